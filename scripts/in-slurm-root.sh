#!/usr/bin/env bash
# Run a command inside the Debian 13 root with SLURM 24.11 (scripts/slurm-root.sh builds it
# first when missing or out of date: minutes once, ~0.1 s afterwards).
#
#   bash scripts/in-slurm-root.sh hpctrain devcluster up
#   bash scripts/in-slurm-root.sh sinfo --version              # slurm 24.11.x
#   bash scripts/in-slurm-root.sh pytest -x tests/cluster/test_training_jobs.py
#   bash scripts/in-slurm-root.sh bash                         # a shell in the root
#
# Inside: the repository at the same path (run directories and paths in tests match), the
# caller's directory when it lies in the repository, the root's venv (hpctrain editable,
# Debian's torch) first on PATH, HPCTRAIN_HOME=.cache/slurm-24.11/home (in the clone) so its dev cluster's
# state and job history are its own, and the root's own /tmp (not the host's). The environment
# is clean: only HPCTRAIN_* (not HPCTRAIN_HOME), CI, TERM, COLUMNS, PYTEST_ADDOPTS and
# PYTHONDONTWRITEBYTECODE pass. The exit status is the command's.
#
# The sandbox allows no network namespace, so the dev cluster inside moves its ports up by
# HPCTRAIN_DEVCLUSTER_PORT_OFFSET (default 1000: past the host's slurmd ports, one per node
# from 17001) and can run beside the host's. Daemons it starts keep running after the
# command returns (in their own mount namespace, which the kernel drops when they exit); stop
# them with `bash scripts/in-slurm-root.sh hpctrain devcluster down`. Nothing stays mounted on
# the host, whatever way the command ends.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/slurm-root-mounts.sh
source "$here/slurm-root-mounts.sh"

if [ "$#" = 0 ]; then
  echo "usage: $0 COMMAND [ARG...]   (e.g. $0 hpctrain devcluster up)" >&2
  exit 2
fi
bash "$here/slurm-root.sh" >/dev/null

slurm_root_env=(
  "PATH=$slurm_root_venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  HOME=/root USER=root LOGNAME=root LANG=C.UTF-8
  "HPCTRAIN_HOME=$slurm_root_home"
  "HPCTRAIN_DEVCLUSTER_PORT_OFFSET=${HPCTRAIN_DEVCLUSTER_PORT_OFFSET:-1000}"
  # Debian builds torch without libuv, which TCPStore (DDP's rendezvous) asks for by default
  # since torch 2.4: "use_libuv was requested but PyTorch was build without libuv support".
  # Jobs inherit it (sbatch exports the submitting environment).
  USE_LIBUV=0
  # Debian's torch does its BLAS through OpenBLAS, whose own threads, one set per rank, fight
  # over the cores: a 4-rank spiral on 2 cores ran 10x slower (1.3 s an epoch, 0.14 s on the
  # host's pip torch); with one BLAS thread it is as fast as the host's (measured 0.06 s).
  OPENBLAS_NUM_THREADS=1
)
while IFS='=' read -r name _; do
  case "$name" in
    HPCTRAIN_HOME | HPCTRAIN_DEVCLUSTER_PORT_OFFSET) ;;
    HPCTRAIN_* | CI | TERM | COLUMNS | PYTEST_ADDOPTS | PYTHONDONTWRITEBYTECODE)
      slurm_root_env+=("$name=${!name}")
      ;;
  esac
done < <(env -0 | tr '\0\n' '\n ' | grep -E '^[A-Za-z_][A-Za-z0-9_]*=' || true)
mkdir -p "$slurm_root_home"
_slurm_root_exec "$@"
