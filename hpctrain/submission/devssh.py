"""`hpctrain dev --attach JOB`: an ssh host alias that reaches a dev job's node through its
place (the login's master, or SLURM here), for VS Code's Remote-SSH and `ssh -L` (docs/dev.md).

No sshd of the site's is needed on the node: the alias's ProxyCommand starts OpenSSH's sshd in
inetd mode (`sshd -i`) as a step of the dev job (slurm/interactive.py: sshd_argv), speaking
over the step's stdin and stdout, with a host key and the laptop's key kept in the run
directory. Each connection is a step, so the dev job counts it as activity.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import HpctrainError
from hpctrain.values.rundir import RunDir, RunFile

if TYPE_CHECKING:
    from hpctrain.history import JobRecord
    from hpctrain.places import Place
    from hpctrain.tracking.watcher import JobWatcher

# Neither sshd's nor ssh's config can quote these inside a quoted path.
_UNQUOTABLE = re.compile(r'["\n\r\0\\]')
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
DEFAULT_CONFIG = "~/.ssh/config.d/hpctrain"


@dataclass(frozen=True)
class SshdFiles:
    """The dev job's sshd files, in its run directory's DEV_SSH folder."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "sshd_config"

    @property
    def host_key(self) -> Path:
        return self.root / "host_key"

    @property
    def authorized_keys(self) -> Path:
        return self.root / "authorized_keys"


@dataclass(frozen=True)
class Alias:
    """An ssh Host block named `name` that reaches job `job_id`'s node."""

    name: str
    job_id: str
    block: str


def config_path(path: Path | str, tokens: bool = True) -> str:
    """A path as an ssh or sshd config takes it whole: quoted, its `%` not a token where the
    option expands tokens (`tokens`; sshd's HostKey does not)."""
    if _UNQUOTABLE.search(str(path)):
        raise HpctrainError(f"{str(path)!r} has a character ssh's config files cannot quote "
                            '(" \\ or a line break)', "use a run directory (output_dir) and "
                            "HPCTRAIN_HOME without them")
    return '"' + (str(path).replace("%", "%%") if tokens else str(path)) + '"'


def sshd_config(files: SshdFiles) -> str:
    """The config of the sshd a connection starts: keys only, as the user, no PAM or pid."""
    return "\n".join([
        f"HostKey {config_path(files.host_key, tokens=False)}",
        f"AuthorizedKeysFile {config_path(files.authorized_keys)}",
        "PubkeyAuthentication yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "PermitRootLogin prohibit-password",
        # The run directory may be group-writable (a project's shared folder).
        "StrictModes no", "PidFile none", "PrintMotd no", "X11Forwarding no",
        "AllowTcpForwarding yes", "Subsystem sftp internal-sftp", "LogLevel ERROR", ""])


def alias_block(name: str, user: str, proxy: tuple[str, ...], identity: Path,
                known_hosts: Path, comment: str) -> str:
    """The Host block: the ProxyCommand (every word quoted for sh, `%` not a token), the
    laptop's dev key, and the job's host key checked strictly under the alias's name."""
    if not _USER.match(user):
        raise HpctrainError(f"user name {user!r} cannot be written into an ssh config",
                            "report it: hpctrain expects a POSIX user name")
    return "\n".join([
        f"Host {name}", f"  # {comment}", f"  User {user}",
        f"  ProxyCommand {shlex.join(proxy).replace('%', '%%')}",
        f"  IdentityFile {config_path(identity)}", "  IdentitiesOnly yes",
        f"  HostKeyAlias {name}", f"  UserKnownHostsFile {config_path(known_hosts)}",
        "  StrictHostKeyChecking yes", "  ServerAliveInterval 30", ""])


def attach(record: JobRecord, place: Place, watcher: JobWatcher) -> Alias:
    """Make the dev job's sshd files, the alias and its known host, and connect through it
    once; HpctrainError saying why when it cannot reach the node."""
    from hpctrain.remote import alias as keys
    from hpctrain.slurm.interactive import sshd_argv

    run = _running_dev_job(record, place, watcher)
    files = SshdFiles(run.dev_ssh)
    identity = keys.client_key()
    private, public = keys.host_key_pair(f"hpctrain dev job {record.job_id}")
    # A fresh host key each time: the alias written now is the one that knows it.
    place.discard(files.root)
    place.create_run_dir(files.root, [
        RunFile(files.host_key, private, mode=0o600),
        RunFile(files.authorized_keys, identity.with_suffix(".pub").read_text(), mode=0o600),
        RunFile(files.config, sshd_config(files), mode=0o600)])
    name = f"hpctrain-dev-{record.job_id}"
    proxy = place.reach(sshd_argv(record.job_id, files.config))
    block = alias_block(name, place.user, proxy, identity, keys.known_hosts(),
                        f"hpctrain dev job {record.job_id} {place.where} ({run.root})")
    keys.remember_host(name, public)
    code, err = keys.try_alias(block, name)
    if code != 0:
        raise HpctrainError(f"ssh {name} does not reach job {record.job_id}'s node "
                            f"(exit {code}): {err or 'no message'}",
                            f"`hpctrain dev` {place.where} still gives a shell on the node")
    return Alias(name, record.job_id, block)


def _running_dev_job(record: JobRecord, place: Place, watcher: JobWatcher) -> RunDir:
    """The run directory of a dev job whose shell environment is ready and that still runs."""
    from hpctrain.submission.rerun import Changes, stored_request

    if not stored_request(record, place, Changes()).dev:
        raise HpctrainError(f"job {record.job_id} is a batch job, not a dev job",
                            "start one with `hpctrain dev -P PROFILE`, or use `hpctrain logs`")
    if watcher.poll(record).done:
        raise HpctrainError(f"dev job {record.job_id} has ended",
                            "start another with `hpctrain dev`")
    run = RunDir(record.run_dir or "")
    if place.read_file(run.dev_env, 1) is None:
        raise HpctrainError(f"dev job {record.job_id} has not started yet",
                            f"wait until `hpctrain status {record.job_id}` says RUNNING")
    return run


def write_alias(alias: Alias, path: Path) -> str:
    """Add the alias's block to the ssh config file `path` (made 600 if new), or replace the
    block an earlier `dev --attach` wrote for it; everything else in the file is kept. What was
    done: 'added' or 'replaced'."""
    begin, end = f"# >>> {alias.name} (hpctrain dev --attach)", f"# <<< {alias.name}"
    text = path.read_text() if path.exists() else ""
    lines = text.splitlines()
    if begin in lines and end in lines[lines.index(begin):]:
        start = lines.index(begin)
        stop = lines.index(end, start)
        lines[start:stop + 1] = [begin, *alias.block.splitlines(), end]
        done = "replaced"
    elif re.search(rf"^\s*Host\s+(.*\s)?{re.escape(alias.name)}(\s|$)", text, re.M):
        raise HpctrainError(f"{path} has a Host {alias.name} that hpctrain did not write",
                            "remove it, or name another file with --ssh-config-file")
    else:
        lines += ([""] if lines and lines[-1].strip() else []) + [
            begin, *alias.block.splitlines(), end]
        done = "added"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    from hpctrain.files.atomic import write_atomic

    write_atomic(path, "\n".join(lines) + "\n", mode=path.stat().st_mode & 0o777
                 if path.exists() else 0o600)
    return done
