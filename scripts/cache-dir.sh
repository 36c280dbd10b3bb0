# Sourced: where the caches shared by every clone on this machine live (the dependency venv
# of scripts/setup.sh, mypy's cache, the SLURM 24.11 root of scripts/slurm-root.sh). Built
# once per machine, each keyed by what it is built from; HPCTRAIN_CACHE_DIR moves them all.
hpctrain_cache_dir="${HPCTRAIN_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/hpctrain}"
