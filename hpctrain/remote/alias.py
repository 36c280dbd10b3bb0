"""The keys of `hpctrain dev --attach`'s ssh alias, and a first connection through it.

With connection.py and sync.py the only modules that run OpenSSH's programs. The host key is
made here and travels to the run directory over the master, so that the laptop knows it before
the first connection (strict checking, no trust on first use); the laptop's own key for dev
jobs is made once and never leaves this machine but for its public half.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hpctrain.errors import RemoteError
from hpctrain.files import paths
from hpctrain.remote.connection import _private_dir

KEY_NAME = "dev_ed25519"
KNOWN_HOSTS = "dev_known_hosts"
CHECK_TIMEOUT_S = 60.0


def _keygen(path: Path, comment: str) -> None:
    try:
        done = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                               "-f", str(path)], capture_output=True, check=False,
                              stdin=subprocess.DEVNULL, timeout=30)
    except OSError as e:
        raise RemoteError(f"cannot run ssh-keygen: {e.strerror}",
                          "install OpenSSH's client") from None
    if done.returncode != 0:
        raise RemoteError(f"ssh-keygen failed: {done.stderr.decode(errors='replace').strip()}",
                          "check that OpenSSH's ssh-keygen works here")


def host_key_pair(comment: str) -> tuple[str, str]:
    """A new ed25519 key pair (private, public) as text, for a dev job's sshd."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "host_key"
        _keygen(path, comment)
        return path.read_text(), path.with_suffix(".pub").read_text()


def ssh_dir() -> Path:
    """This user's private folder for dev jobs' keys and known hosts."""
    return _private_dir(paths.state_dir() / "ssh")


def client_key() -> Path:
    """The laptop's key for dev jobs (made on first use, mode 600); its public half is
    `.pub` beside it."""
    path = ssh_dir() / KEY_NAME
    if not path.exists() or not path.with_suffix(".pub").exists():
        path.unlink(missing_ok=True)
        _keygen(path, "hpctrain dev --attach")
    return path


def known_hosts() -> Path:
    return ssh_dir() / KNOWN_HOSTS


def remember_host(alias: str, public_key: str) -> Path:
    """The known-hosts file with `alias`'s key (an older key of the same alias replaced)."""
    path = known_hosts()
    keep = [line for line in (path.read_text().splitlines() if path.exists() else [])
            if line.split(" ", 1)[0] != alias]
    kind, blob = public_key.split()[:2]
    path.write_text("".join(f"{line}\n" for line in [*keep, f"{alias} {kind} {blob}"]))
    return path


def try_alias(config_text: str, alias: str) -> tuple[int, str]:
    """`ssh ALIAS true` with `config_text` as the whole ssh config: its exit status and
    stderr (a refusal from the node's end says why)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config"
        config.write_text(config_text)
        try:
            done = subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", "--",
                                   alias, "true"], capture_output=True, check=False,
                                  stdin=subprocess.DEVNULL, timeout=CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return 124, f"no answer within {CHECK_TIMEOUT_S:.0f} s"
        except OSError as e:
            raise RemoteError(f"cannot run ssh: {e.strerror}",
                              "install OpenSSH's client") from None
    return done.returncode, done.stderr.decode(errors="replace").strip()
