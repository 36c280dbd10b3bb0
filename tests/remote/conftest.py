"""A real OpenSSH server on loopback, a client ssh config for it, and a laptop home.

The "login node" is this machine reached through sshd (its own host key, key authentication,
running as the current user); its ForceCommand wrapper logs every remote command, and sshd's
VERBOSE log shows every TCP connection, so the tests can count both.
"""

from __future__ import annotations

import functools
import getpass
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sshd:
    """The server, the client config that reaches it as Host `testlogin`, and its logs."""

    root: Path
    port: int
    log: Path
    commands_log: Path
    client_config: Path
    remote_home: Path
    host: str = "testlogin"
    # Other names the client config gives the login (add_alias); laptops close their masters.
    aliases: list[str] = field(default_factory=list)

    def connections(self) -> int:
        """Connections sshd has authenticated so far (the readiness probe never is)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text.count("Accepted publickey for ")

    def add_alias(self, alias: str) -> None:
        """The client config names the login also as `alias` (a second destination)."""
        text = self.client_config.read_text()
        if alias not in self.aliases:
            self.aliases.append(alias)
        if f" {alias}\n" not in text.split("HostName", 1)[0]:
            self.client_config.write_text(
                text.replace(f"Host {self.host}", f"Host {self.host} {alias}", 1))

    def commands(self) -> list[str]:
        """Every command line a client ran through sshd, in order."""
        if not self.commands_log.exists():
            return []
        return [c for c in self.commands_log.read_text(errors="replace").split("\0") if c]


def _write_server(root: Path, port: int, remote_home: Path, slurm_conf: str | None) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "host_key")],
                   check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "id_user")],
                   check=True)
    shutil.copy(root / "id_user.pub", root / "authorized_keys")
    wrapper = root / "force-command.sh"
    # Log each command (NUL-separated) and run it as sshd would, with the user's shell.
    wrapper.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\0' \"$SSH_ORIGINAL_COMMAND\" >> '{root}/commands.log'\n"
        "exec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n")
    wrapper.chmod(0o755)
    env = [f"HPCTRAIN_HOME={remote_home}", f"PATH={os.environ.get('PATH', '/usr/bin:/bin')}"]
    if slurm_conf:
        env.append(f"SLURM_CONF={slurm_conf}")
    config = root / "sshd_config"
    # Quoted: the paths have spaces in them, as the users' paths may.
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f'HostKey "{root}/host_key"',
        f'PidFile "{root}/sshd.pid"', f'AuthorizedKeysFile "{root}/authorized_keys"',
        "PubkeyAuthentication yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        "PermitRootLogin prohibit-password", "LogLevel VERBOSE", "MaxSessions 100",
        "MaxStartups 100", f"ForceCommand {shlex.quote(str(wrapper))}",
        "SetEnv " + " ".join(f'"{e}"' for e in env), "",
    ]))
    return config


def _write_client(root: Path, port: int) -> Path:
    host_key = (root / "host_key.pub").read_text().split()
    (root / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    config = root / "ssh config"
    config.write_text("\n".join([
        "Host testlogin", "  HostName 127.0.0.1", f"  Port {port}", f"  User {getpass.getuser()}",
        f'  IdentityFile "{root}/id_user"', "  IdentitiesOnly yes",
        f'  UserKnownHostsFile "{root}/known_hosts"', "  GlobalKnownHostsFile /dev/null",
        "  StrictHostKeyChecking yes", "  LogLevel ERROR", "",
    ]))
    return config


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text(errors='replace')}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("sshd did not listen within 10 s")


def start_sshd(root: Path, slurm_conf: str | None) -> tuple[Sshd, subprocess.Popen[bytes]]:
    """Start sshd under `root` (a directory whose path has a space in it)."""
    if not os.path.exists(SSHD):
        pytest.fail("openssh-server is not installed: run scripts/setup.sh")
    if os.geteuid() == 0:
        # sshd started as root wants its privilege-separation directory (Debian's unit makes it).
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    port = _free_port()
    remote_home = root / "remote home"
    remote_home.mkdir()
    config = _write_server(root, port, remote_home, slurm_conf)
    client = _write_client(root, port)
    log = root / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(log)],
                            stdin=subprocess.DEVNULL)
    _wait_listening(port, proc, log)
    return Sshd(root, port, log, root / "commands.log", client, remote_home), proc


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """sshd on loopback, SLURM_CONF of the session's dev cluster (if any) set for its sessions."""
    root = tmp_path / "ssh root"
    root.mkdir()
    server, proc = start_sshd(root, os.environ.get("SLURM_CONF"))
    try:
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@dataclass
class Laptop:
    """A separate HPCTRAIN_HOME and project directory, running hpctrain as a subprocess."""

    home: Path
    project: Path
    env: dict[str, str]
    # The login's disk, which a real laptop cannot see: hidden from each hpctrain run here.
    remote_home: Path | None = None

    def argv(self, *args: str) -> list[str]:
        """hpctrain's command line, in a mount namespace without the login's home where this
        machine allows one: a file read there instead of through the login fails, as it would
        on a laptop, instead of finding the loopback login's file on this shared disk."""
        argv = [sys.executable, "-m", "hpctrain", *args]
        if self.remote_home is None or not _can_hide():
            return argv
        return ["unshare", "--mount", "sh", "-c",
                'mount -t tmpfs hpctrain-laptop "$0" && exec "$@"', str(self.remote_home), *argv]

    def __call__(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), env=self.env,
                              cwd=self.project, capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)

    def ok(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        res = self(*args, timeout_s=timeout_s)
        assert res.returncode == 0, f"hpctrain {' '.join(args)}: {res.stdout}\n{res.stderr}"
        return res


@functools.cache
def _can_hide() -> bool:
    """Whether this machine lets a test make a mount namespace (root, or a user namespace)."""
    done = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs t /mnt"],
                          capture_output=True, timeout=10, check=False)
    return done.returncode == 0


def make_laptop(root: Path, sshd: Sshd, workdir: str, host: str | None = None) -> Laptop:
    """A laptop whose profile `remote` is the local profile reached through `sshd`."""
    home = root / "laptop"
    root.mkdir(exist_ok=True)
    profiles = home / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "remote.yaml").write_text(
        "extends: local\nname: remote\nlogin:\n"
        f"  host: {_yaml_str(host or sshd.host)}\n  workdir: {_yaml_str(workdir)}\n"
        f"  python: {_yaml_str(str(REPO / '.venv'))}\n"
        f"  ssh_config: {_yaml_str(str(sshd.client_config))}\n")
    project = root / "my project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "train.py").write_text("print('hello from the laptop')\n")
    (project / ".gitignore").write_text("data/\n")
    (project / "data").mkdir()
    (project / "data" / "big.bin").write_bytes(b"x" * 1000)
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "HPCTRAIN_HOME")}
    # The laptop has no SLURM of its own: every SLURM command must go over ssh.
    env["HPCTRAIN_HOME"] = str(home)
    return Laptop(home, project, env, sshd.remote_home)


def _yaml_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@pytest.fixture
def laptop(tmp_path: Path, sshd: Sshd) -> Iterator[Callable[..., Laptop]]:
    """make(workdir, host=None): a laptop for `sshd`; its ssh masters are closed afterwards."""
    made: list[Laptop] = []

    def make(workdir: str, host: str | None = None) -> Laptop:
        lap = make_laptop(tmp_path / f"l{len(made)}", sshd, workdir, host)
        made.append(lap)
        return lap

    yield make
    for lap in made:
        lap("login", "remote", "--close")
        for alias in sshd.aliases:
            lap("login", alias, "--ssh-config", str(sshd.client_config), "--close")
