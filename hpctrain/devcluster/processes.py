"""Run the dev cluster's programs: start, identify and stop daemons by their pid files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpctrain.errors import DevClusterError

# Polling interval: short enough for a fast `up`, long enough to leave the 2 cores alone.
POLL_S = 0.2


@dataclass(frozen=True)
class Daemon:
    """One daemon we start: how, where its pid file is, and how to recognise it in /proc."""

    name: str
    argv: tuple[str, ...]
    pid_file: Path
    log_file: Path
    # Accepted basenames of argv[0] (mysqld is a link to mariadbd on Debian).
    programs: tuple[str, ...]
    # Must appear in the process's command line or environment: proves it is ours, not
    # another cluster's daemon of the same program that happens to reuse the pid.
    marker: str
    # An exact argument the command line must hold (slurmd's node name: node1 is not node10).
    exact_arg: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # True: the program forks into the background itself; False: we detach it (setsid -f).
    self_daemonizes: bool = True


def read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 1 else None


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the state follows the last ')'.
    return stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else None


def is_running(pid: int) -> bool:
    """Alive and not a zombie (an unreaped dead daemon still answers kill(pid, 0))."""
    state = _proc_state(pid)
    return state is not None and state not in ("Z", "X", "x")


def _read_nul(path: Path) -> list[str]:
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return [p.decode(errors="replace") for p in data.split(b"\0") if p]


def cmdline(pid: int) -> list[str]:
    return _read_nul(Path(f"/proc/{pid}/cmdline"))


def is_ours(pid: int, daemon: Daemon) -> bool:
    """The pid runs one of the daemon's programs and carries our marker."""
    if not is_running(pid):
        return False
    argv = cmdline(pid)
    if not argv or os.path.basename(argv[0]) not in daemon.programs:
        return False
    if daemon.exact_arg is not None and daemon.exact_arg not in argv:
        return False
    if any(daemon.marker in a for a in argv):
        return True
    return any(daemon.marker in e for e in _read_nul(Path(f"/proc/{pid}/environ")))


def running_pid(daemon: Daemon) -> int | None:
    """The pid from the daemon's pid file if that process is verifiably ours, else None."""
    pid = read_pid(daemon.pid_file)
    return pid if pid is not None and is_ours(pid, daemon) else None


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def start(daemon: Daemon, timeout_s: float = 20.0) -> None:
    """Start the daemon detached from the caller: own session, stdio on its log, not ours."""
    daemon.log_file.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        daemon.pid_file.unlink()
    argv = list(daemon.argv) if daemon.self_daemonizes else ["setsid", "-f", *daemon.argv]
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LANG": "C.UTF-8",
           **daemon.env}
    # A separate launch log: the daemon may open its own log file with the same name.
    launch_log = daemon.log_file.with_name(daemon.log_file.name + ".launch")
    with open(launch_log, "ab") as out:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                close_fds=True,
                start_new_session=True,
                cwd="/",
            )
        except OSError as e:
            raise DevClusterError(
                f"cannot start {daemon.name}: {e}", "check that it is installed"
            ) from e
        try:
            # The launcher returns once the daemon has forked into the background.
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise DevClusterError(
                f"{daemon.name} did not go into the background within {timeout_s:g} s",
                f"see {launch_log} and {daemon.log_file}",
            ) from None
    if rc != 0:
        raise DevClusterError(
            f"{daemon.name} failed to start (exit status {rc}):\n{log_tail(launch_log)}\n"
            f"{log_tail(daemon.log_file)}",
            f"see {daemon.log_file}",
        )


def wait_until(check: Callable[[], bool], timeout_s: float, what: str, fix: str,
               interval_s: float = POLL_S) -> None:
    """Poll `check` until true; raise DevClusterError naming `what` after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise DevClusterError(f"{what} (waited {timeout_s:g} s)", fix)
        time.sleep(interval_s)


def wait_started(daemon: Daemon, timeout_s: float, ready: Callable[[], bool]) -> int:
    """Wait for the pid file to name a live daemon of ours and for `ready`; return the pid."""
    state: dict[str, int | None] = {"pid": None}

    def check() -> bool:
        pid = running_pid(daemon)
        if pid is None:
            seen = read_pid(daemon.pid_file)
            if seen is not None and not is_running(seen):
                raise DevClusterError(
                    f"{daemon.name} exited right after starting:\n{log_tail(daemon.log_file)}",
                    f"see {daemon.log_file}",
                )
            return False
        state["pid"] = pid
        return ready()

    wait_until(check, timeout_s, f"{daemon.name} did not become ready:\n"
               f"{log_tail(daemon.log_file)}", f"see {daemon.log_file}")
    assert state["pid"] is not None
    return state["pid"]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Something accepts TCP connections on the port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def port_owner(port: int) -> str:
    """Best effort: which process listens on a local TCP port (for error messages)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                # State 0A is LISTEN; the local address ends in the port in hex.
                if len(cols) > 9 and cols[3] == "0A" and cols[1].endswith(f":{port:04X}"):
                    inodes.add(cols[9])
    if inodes:
        for pid in _pids():
            fd_dir = Path(f"/proc/{pid}/fd")
            with contextlib.suppress(OSError):
                for fd in fd_dir.iterdir():
                    with contextlib.suppress(OSError):
                        link = os.readlink(fd)
                        if link.startswith("socket:[") and link[8:-1] in inodes:
                            return f"pid {pid} ({' '.join(cmdline(pid))[:80]})"
    return "an unknown process"


def _pids() -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def stop(daemons: Sequence[Daemon], timeout_s: float = 10.0) -> list[tuple[str, int]]:
    """SIGTERM the verified-ours daemons, SIGKILL after the timeout; remove their pid files."""
    targets: list[tuple[Daemon, int]] = []
    for d in daemons:
        pid = running_pid(d)
        if pid is not None:
            targets.append((d, pid))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(is_running(pid) for _, pid in targets) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for d, pid in targets:
        # Re-check identity: never SIGKILL a pid that was reused by another program.
        if is_running(pid) and is_ours(pid, d):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if targets:
        wait_until(lambda: not any(is_running(p) for _, p in targets), 5.0,
                   "daemons did not exit after SIGKILL", "check `ps` for stuck processes")
    for d in daemons:
        with contextlib.suppress(FileNotFoundError):
            # A stale file (dead or foreign pid) goes too; the foreign process is left alone.
            d.pid_file.unlink()
    return [(d.name, pid) for d, pid in targets]


def kill_by_environ(program: str, marker: str) -> list[int]:
    """SIGKILL processes of `program` whose environment carries `marker` (orphaned steps)."""
    killed = []
    for pid in _pids():
        if pid == os.getpid() or not is_running(pid):
            continue
        argv = cmdline(pid)
        if not argv or os.path.basename(argv[0]).split(":")[0] != program:
            continue
        if any(marker == e for e in _read_nul(Path(f"/proc/{pid}/environ"))):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def run_logged(argv: Sequence[str], log: Path, timeout_s: float) -> int:
    """Run a one-off program with its output in `log`; its exit status (-1 on timeout)."""
    with open(log, "wb") as out:
        try:
            return subprocess.run(
                list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                timeout=timeout_s, check=False, cwd="/",
            ).returncode
        except subprocess.TimeoutExpired:
            return -1


def run_captured(argv: Sequence[str], input: bytes | None = None, timeout_s: float = 5.0
                 ) -> tuple[int, bytes]:
    """Run a short program; its exit status (-1 on timeout) and stdout."""
    try:
        proc = subprocess.run(list(argv), input=input, capture_output=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return -1, b""
    return proc.returncode, proc.stdout
