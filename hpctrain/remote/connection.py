"""One OpenSSH ControlMaster per login, and the commands run over it.

With sync.py the only module that runs ssh. Every later call is a batch-mode client of the
master: the one-time password is typed once (`hpctrain login`), and a master that has gone
is reported within seconds instead of opening a second connection.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpctrain.errors import MasterDownError, RemoteError
from hpctrain.files import paths
from hpctrain.startup.debuglog import debug

# What an ssh destination may look like: a Host alias, user@host, host:port forms, IPv6 in
# brackets, ssh://user@host:port. No leading '-' (it would be an option) and nothing a shell
# treats specially (it reaches ssh's argv only, but also rsync's remote spec).
_DESTINATION = re.compile(r"^[A-Za-z0-9_\[][A-Za-z0-9_.@%:/\[\]+-]*$")
# Unix socket paths hold about 104 bytes on macOS (108 on Linux), and the master first
# binds a temporary name: ours plus 17 random characters.
# Each round trip, shown with --debug (what a command costs over a slow link).
_LOGGER = "hpctrain.ssh"
_SOCKET_MAX = 100
_SOCKET_EXTRA = 1 + 16 + 17
_SOCKET_SAFE = re.compile(r"^[A-Za-z0-9_./-]+$")
CHECK_TIMEOUT_S = 2.0
_GONE = "the connection expired, was closed, or was never opened"
DEFAULT_PERSIST = "8h"
# ControlPersist: seconds, a time with one unit, or yes (until closed).
_PERSIST = re.compile(r"\d+[smhdw]?|yes")
DEFAULT_TIMEOUT_S = 60.0
# ssh exits 255 for its own failures; a remote command's status is passed through otherwise.
SSH_FAILED = 255


def check_destination(host: str) -> str:
    """The destination unchanged, or RemoteError if ssh could take it for an option or worse."""
    if not _DESTINATION.match(host):
        raise RemoteError(
            f"ssh destination {host!r} is not a host name, user@host or Host alias",
            "use the name you would type after `ssh` (e.g. raven or me@raven.mpcdf.mpg.de); "
            "options belong in your ssh config",
        )
    return host


def check_persist(persist: str) -> str:
    """The ControlPersist value unchanged, or RemoteError if ssh would not read a duration."""
    if not _PERSIST.fullmatch(persist):
        raise RemoteError(f"--persist {persist!r} is not a duration",
                          "e.g. --persist 8h, 30m or yes")
    return persist


@dataclass(frozen=True)
class Target:
    """An ssh destination and the config file it is resolved with (None: the user's own)."""

    host: str
    ssh_config: str | None = None

    @classmethod
    def of(cls, host: str, ssh_config: str | None = None) -> Target:
        """A validated target; `ssh_config` must be a readable file."""
        config = None
        if ssh_config:
            path = Path(ssh_config).expanduser()
            if not path.is_file():
                raise RemoteError(f"ssh config {ssh_config} is not a file",
                                  "fix login.ssh_config in the profile, or drop it")
            config = str(path.resolve())
        return cls(check_destination(host), config)

    @property
    def key(self) -> str:
        # Here, not at the top: hashlib loads OpenSSL (3 ms), and `status` of local jobs
        # imports this module without a login in sight.
        import hashlib

        blob = f"{self.host}\0{self.ssh_config or ''}".encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def socket_dir() -> Path:
    """Where the masters' sockets live: under HPCTRAIN_HOME when its path is short and plain."""
    preferred = paths.state_dir() / "ssh"
    # ssh expands % and ${...} in ControlPath, and the kernel limits socket paths: a home that
    # is long or has odd characters gets a private directory under /tmp instead.
    if len(str(preferred)) + _SOCKET_EXTRA <= _SOCKET_MAX and _SOCKET_SAFE.match(str(preferred)):
        return preferred
    import tempfile  # rarely: most homes are short and plain

    return Path(tempfile.gettempdir()) / f"hpctrain-{os.getuid()}"


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_uid != os.getuid():
        raise RemoteError(f"{path} belongs to another user", "set HPCTRAIN_HOME elsewhere")
    path.chmod(0o700)
    return path


def shell_command(argv: Sequence[str], cwd: str | None = None) -> str:
    """`argv` as one POSIX shell command line (every word quoted), run in `cwd` if given."""
    line = shlex.join(argv)
    return f"cd -- {shlex.quote(cwd)} && {line}" if cwd else line


@dataclass
class Connection:
    """The ControlMaster of one target and the batch-mode commands that use it."""

    target: Target
    name: str
    round_trips: int = 0
    _facts: dict[str, str] | None = field(default=None, repr=False)

    @property
    def socket(self) -> Path:
        return socket_dir() / self.target.key

    def _base(self) -> list[str]:
        config = ["-F", self.target.ssh_config] if self.target.ssh_config else []
        return ["ssh", *config, "-S", str(self.socket)]

    def client_argv(self) -> list[str]:
        """ssh as a client of the master only: no prompt, and no connection of its own."""
        # ProxyCommand=false: if the master is gone, ssh would quietly open a new TCP
        # connection (and ask for a password it cannot read); this makes it fail at once.
        # Given first on the command line, it beats the user's ProxyJump/ProxyCommand.
        return [*self._base(), "-o", "BatchMode=yes", "-o", "ControlMaster=no",
                "-o", "ProxyCommand=false"]

    def fix(self) -> str:
        return f"run `hpctrain login {self.name}` (it asks for your password or OTP once)"

    def down_error(self, why: str) -> MasterDownError:
        return MasterDownError(f"no open ssh connection to {self.target.host}: {why}", self.fix())

    def alive(self) -> bool:
        """True when the master answers `ssh -O check` within CHECK_TIMEOUT_S."""
        if not self.socket.exists():
            return False
        try:
            done = subprocess.run([*self._base(), "-O", "check", "--", self.target.host],
                                  capture_output=True, timeout=CHECK_TIMEOUT_S, check=False,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    def require(self) -> None:
        """Raise MasterDownError (naming `hpctrain login`) unless the master runs."""
        if not self.alive():
            raise self.down_error(_GONE)

    def open(self, persist: str = DEFAULT_PERSIST) -> bool:
        """Start the master interactively (prompts reach the terminal); False if it ran already."""
        if self.alive():
            return False
        _private_dir(self.socket.parent)
        self.socket.unlink(missing_ok=True)
        argv = [*self._base(), "-o", "ControlMaster=yes", "-o", f"ControlPersist={persist}",
                "-f", "-N", "--", self.target.host]
        try:
            code = subprocess.run(argv, check=False).returncode
        except OSError as e:
            raise RemoteError(f"cannot run ssh: {e.strerror}", "install OpenSSH's client") from None
        if code != 0 or not self.alive():
            raise RemoteError(f"ssh {self.target.host} failed (exit {code})",
                              f"check that `ssh {self.target.host}` works in a terminal")
        self._facts = None
        self._facts_path().unlink(missing_ok=True)
        return True

    def close(self) -> bool:
        """Stop the master; False if none ran."""
        if not self.alive():
            return False
        subprocess.run([*self._base(), "-O", "exit", "--", self.target.host],
                       capture_output=True, timeout=CHECK_TIMEOUT_S, check=False)
        self._facts_path().unlink(missing_ok=True)
        return True

    def run(self, command: str, *, input: bytes | None = None,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[bytes, bytes, int]:
        """Run one shell command line on the remote over the master (one round trip)."""
        argv = [*self.client_argv(), "--", self.target.host, command]
        self.round_trips += 1
        debug(_LOGGER, "round trip %d to %s: %s", self.round_trips, self.target.host,
                   command if len(command) < 200 else command[:200] + " ...")
        with subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else
                              subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) as proc:
            try:
                out, err = proc.communicate(input, timeout=timeout_s)
            except BaseException:
                proc.kill()
                raise
        if proc.returncode == SSH_FAILED and not self.alive():
            # ssh's own words would be about the ProxyCommand that stopped a new connection.
            raise self.down_error(_GONE)
        return out, err, proc.returncode

    def interactive(self, command: str) -> int:
        """Run one command line on the remote with this terminal attached (`ssh -t`) over the
        master; its exit status."""
        argv = [*self.client_argv(), "-t", "--", self.target.host, command]
        self.round_trips += 1
        debug(_LOGGER, "attached to %s: %s", self.target.host, command)
        try:
            code = subprocess.call(argv)
        except OSError as e:
            raise RemoteError(f"cannot run ssh: {e.strerror}", "install OpenSSH's client") from None
        if code == SSH_FAILED and not self.alive():
            raise self.down_error(_GONE)
        return code

    def run_many(self, commands: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S
                 ) -> list[tuple[str, str, int]]:
        """Several command lines in one round trip; each one's stdout, stderr and status."""
        out, err, code = self.run(batch_script(commands), timeout_s=timeout_s)
        if code != 0:
            raise RemoteError(f"remote batch failed on {self.target.host} (exit {code}): "
                              f"{_first_line(err)}", "check that the remote shell is POSIX sh")
        return parse_batch(out, len(commands))

    # --- facts about the remote account, asked once per master --------------------------------

    def _facts_path(self) -> Path:
        return self.socket.parent / f"{self.target.key}.facts.json"

    def facts(self) -> dict[str, str]:
        """The remote home, user, SLURM cluster name and `sinfo --version` (cached until the
        next login)."""
        if self._facts is None:
            try:
                self._facts = json.loads(self._facts_path().read_text())
            except (OSError, ValueError):
                self._facts = self._ask_facts()
        return self._facts

    def _ask_facts(self) -> dict[str, str]:
        raw, err, code = self.run(
            'printf "%s\\n" "$HOME" "$(id -un)" '
            '"$(scontrol show config 2>/dev/null | sed -n "s/^ClusterName *= *//p")" '
            '"$(sinfo --version 2>/dev/null)"')
        lines = raw.decode(errors="replace").split("\n")
        if code != 0 or len(lines) < 3 or not lines[0].startswith("/"):
            raise RemoteError(f"cannot read the remote account's facts: {_first_line(err)}",
                              "check that your login shell there is POSIX sh or bash")
        # The SLURM version decides the output format asked for (slurm/versions.py): learnt
        # here, once per login, it costs no round trip of its own.
        facts = {"home": lines[0], "user": lines[1], "cluster": lines[2],
                 "slurm": lines[3] if len(lines) > 3 else ""}
        path = self._facts_path()
        _private_dir(path.parent)
        path.write_text(json.dumps(facts))
        return facts

    def absolute(self, remote_path: str) -> str:
        """A remote path made absolute: `~` and relative paths start at the remote home."""
        home = self.facts()["home"]
        if remote_path == "~" or remote_path.startswith("~/"):
            remote_path = home + remote_path[1:]
        return remote_path if remote_path.startswith("/") else f"{home}/{remote_path}"


def _first_line(data: bytes) -> str:
    text = data.decode(errors="replace").strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


_MARK = "@@hpctrain-batch"


def batch_script(commands: Sequence[str]) -> str:
    """A sh script running each command with its output kept apart, then printing it framed."""
    parts = ['t=$(mktemp -d) || exit 1']
    for i, command in enumerate(commands):
        parts.append(f'( {command} ) </dev/null >"$t/o{i}" 2>"$t/e{i}"; echo $? >"$t/c{i}"')
    parts.append(
        f'for i in {" ".join(str(i) for i in range(len(commands)))}; do '
        f'printf "{_MARK} %s %s %s\\n" "$(cat "$t/c$i")" "$(wc -c <"$t/o$i")" '
        f'"$(wc -c <"$t/e$i")"; cat "$t/o$i" "$t/e$i"; done')
    parts.append('rm -rf "$t"')
    return "; ".join(parts)


def parse_batch(data: bytes, count: int) -> list[tuple[str, str, int]]:
    """Split batch_script's output back into (stdout, stderr, status) per command."""
    results: list[tuple[str, str, int]] = []
    # A login script may print a banner first: the frames start at the first mark.
    pos = data.find(_MARK.encode())
    for _ in range(count):
        end = data.find(b"\n", pos)
        head = data[pos:end].decode(errors="replace").split() if pos >= 0 <= end else []
        if len(head) != 4 or head[0] != _MARK or not all(h.isdigit() for h in head[1:]):
            raise RemoteError("the remote batch printed something unexpected",
                              "make your login scripts print nothing for non-interactive "
                              "shells (`ssh HOST true` should print nothing)")
        _mark, code, n_out, n_err = head
        pos = end + 1
        out = data[pos:pos + int(n_out)]
        pos += int(n_out)
        err = data[pos:pos + int(n_err)]
        pos += int(n_err)
        results.append((out.decode(errors="replace"), err.decode(errors="replace"), int(code)))
    return results
