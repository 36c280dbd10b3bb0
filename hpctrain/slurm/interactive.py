"""SLURM's commands that hand this terminal to a job: the dev shell's `srun --pty`, and a
`dev-run` started inside the job. Both keep the caller's stdin, stdout and stderr."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from hpctrain.errors import SlurmUnavailableError
from hpctrain.slurm.runner import resolve_slurm_conf
from hpctrain.values.rundir import DEV_INSIDE, DEV_INSIDE_ENV

# The dev shell in a container (docs/dev.md, "In a container"): the runtime's words as the
# job's script worked them out ($1, NUL-separated), started with the job's environment ($2) as
# the script launches a rank (this step's variables unset, the terminal's TERM kept); inside,
# what the runtime made of that environment is kept ($2.inside) for the start-up file ($3).
_IN_CONTAINER = (
    'mapfile -d "" -t hpctrain_words <"$1" || exit 1; hpctrain_term="${TERM:-}"; '
    'while read -r n; do unset "$n" 2>/dev/null; done < <(compgen -e); . "$2" || exit 1; '
    '[ -z "$hpctrain_term" ] || export TERM="$hpctrain_term"; '
    '[ -n "${USER:-}" ] || export USER="$(id -un)"; '
    'exec "${hpctrain_words[@]}" /bin/bash -c "$4" hpctrain-dev-shell "$2" "$3"')
# Also as NAME=VALUE words ($2.inside-env, bash's builtins only): what dev-run tells its changes
# from (submission/devrelay.py: env_changes).
_INSIDE = ('{ export -p; declare -fx; printf "cd %q\\n" "$PWD"; } >"${1%/*}/' + DEV_INSIDE
           + '" && for n in $(compgen -e); do printf "%s=%s\\0" "$n" "${!n}"; done >"${1%/*}/'
           + DEV_INSIDE_ENV + '" && exec /bin/bash --rcfile "$2" -i')


def shell_argv(job_id: str, rc_file: Path, bash: str = "/bin/bash",
               container: tuple[Path, Path] | None = None,
               srun_options: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The dev shell as a step of job `job_id`: one task beside whatever else runs there; in a
    container, `container` naming the file of its words and the job's environment, with srun's
    `srun_options`."""
    shell = ((bash, "-c", _IN_CONTAINER, "hpctrain-dev-shell", *map(str, container),
              str(rc_file), _INSIDE) if container else (bash, "--rcfile", str(rc_file), "-i"))
    # --export: no variable of this terminal but TERM (and SLURM's own) reaches the shell; the
    # start-up file puts in the job's environment instead. Without PATH bash needs its path,
    # the node's, which this machine (a laptop) cannot look up: /bin/bash is everywhere.
    # --overlap: the step shares the job's CPUs, so that a dev-run's step can take them all.
    # --relative=0: the job's first node, where its script runs (and writes the time limit's
    # warning to this terminal); SLURM would otherwise pick a node of its own choice.
    return ("srun", f"--jobid={job_id}", "--overlap", "--pty", "--nodes=1", "--ntasks=1",
            "--relative=0", "--export=TERM", "--job-name=hpctrain-dev-shell", *srun_options,
            *shell)


def _require_srun() -> None:
    if shutil.which("srun") is None:
        raise SlurmUnavailableError("srun not found: SLURM's client commands are not installed "
                                    "here", "run hpctrain on a cluster login node")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    conf = resolve_slurm_conf()
    if conf:
        env["SLURM_CONF"] = conf
    return env


def run_attached(argv: tuple[str, ...]) -> int:
    """Run a SLURM command (the dev shell's srun) in this terminal; its exit status."""
    _require_srun()
    return subprocess.call(argv, env=_env())


def with_conf(argv: tuple[str, ...]) -> tuple[str, ...]:
    """`argv` with this machine's slurm.conf named, for a process that does not inherit our
    environment (an ssh ProxyCommand)."""
    conf = resolve_slurm_conf()
    return ("env", f"SLURM_CONF={conf}", *argv) if conf else argv


def run_script(script: Path, env: Mapping[str, str]) -> int:
    """Run a job script with bash inside the allocation it names (its srun steps join it)."""
    _require_srun()
    return subprocess.call(("bash", str(script)), env={**_env(), **env})


# The far end of `dev --attach`'s ssh alias: OpenSSH's sshd in inetd mode on this step's stdin
# and stdout, started by the user inside the job: no port, no daemon, and no sshd of the site's
# running on the node, only its binary installed. Its config (the dev job's own host key and
# the laptop's key) is $1; the session learns the job and node from the step. sshd ends with
# 255 whenever the client hangs up: not an error for srun to print.
_SSHD = (
    'sshd="$(command -v sshd 2>/dev/null)" || sshd=/usr/sbin/sshd; '
    'if [ ! -x "$sshd" ]; then echo "hpctrain: no sshd on $(hostname): OpenSSH'
    "'s server is not installed on the job's node, so no ssh alias reaches it; use "
    '\\`hpctrain dev\\` through the login instead" >&2; exit 127; fi; '
    '"$sshd" -i -e -f "$1" -o "SetEnv=SLURM_JOB_ID=$SLURM_JOB_ID '
    'SLURMD_NODENAME=$SLURMD_NODENAME"; exit 0')


def sshd_argv(job_id: str, config: Path) -> tuple[str, ...]:
    """sshd over stdin and stdout as a step of job `job_id` on its first node, the dev
    shell's (an ssh ProxyCommand's remote end); a step, so the dev job counts the connection
    as activity."""
    # --unbuffered: slurmstepd otherwise holds a task's output until a newline, and ssh's
    # binary packets have none where it matters (the key exchange never completes).
    return ("srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1",
            "--relative=0", "--quiet",
            "--unbuffered", "--job-name=hpctrain-dev-ssh", "/bin/sh", "-c", _SSHD, "sh",
            str(config))
