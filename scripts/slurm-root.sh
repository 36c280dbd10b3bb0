#!/usr/bin/env bash
# Make, once, a Debian 13 (trixie) root with SLURM 24.11 for the dev cluster and its tests.
#
#   bash scripts/slurm-root.sh            # build or bring up to date; prints the root's path
#   bash scripts/in-slurm-root.sh CMD...  # run CMD in it (docs/devcluster.md)
#
# Debian 12 (the host) ships SLURM 22.05; the clusters hpctrain targets run newer releases. The
# root holds Debian 13's slurm-wlm, slurmdbd, munge and mariadb-server (SLURM 24.11), what the
# tests call (OpenSSH, rsync, git, procps), Debian's CPU torch (python3-torch) and a venv,
# /opt/hpctrain-venv, made with --system-site-packages, with `pip install -e '.[train,dev]'`
# of this repository (bound at the same path) constrained to the system torch and numpy: PyPI's
# torch for Python 3.13 would be a multi-GB CUDA build.
#
# Where: ~/.cache/hpctrain/slurm-24.11/root, one per machine, shared by every clone
# ($HPCTRAIN_CACHE_DIR or $HPCTRAIN_SLURM_ROOT_DIR move it).
# Cost, measured on the 2-core development machine: first build 2.5 min (debootstrap,
# ~290 more packages, the venv), 2.2 GB on disk; later calls 0.02 s (stamps checked).
# Stamps: .hpctrain-base (suite, mirror), .hpctrain-packages (the package lists, the apt recipe's
# hash), opt/hpctrain-venv/.hpctrain-venv (a hash of the dependency lists, the package stamp and
# the recipe), opt/hpctrain-venv/.hpctrain-editable (the clone installed, a hash of what its
# install is made from: pyproject.toml's [project], build settings, the recipe): a stage runs
# again only when its stamp changed; `--rebuild` starts from scratch.
#
# Needs root (debootstrap, pivot_root, mount namespaces) and network to deb.debian.org and PyPI.
# Safe with CI=true and no stdin. Starts no daemon: the packages' services are held back by a
# policy-rc.d, and the dev cluster is started by `hpctrain devcluster up` inside the root.
set -euo pipefail
# shellcheck source=scripts/slurm-root-mounts.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm-root-mounts.sh"

suite=trixie
mirror="${HPCTRAIN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Keep in step with scripts/setup.sh's list (the dev cluster, OpenSSH and rsync for the tests),
# installed like there with their Recommends; plus what a Debian root lacks that the host has:
# git (hpctrain records commits), procps, iproute2, CA certificates; tmux, the real terminal
# the tests of `hpctrain dev` type into; charliecloud-runtime, the container runtime of the
# container tests' jobs (issue 56), whose user namespace the pivot_root entry allows.
packages=(
  slurm-wlm slurmdbd munge mariadb-server openssh-client openssh-server rsync
  git procps iproute2 ca-certificates tmux charliecloud-runtime
)
# The Python side without Recommends: python3-torch's (libtorch-dev, build-essential, ...)
# would add ~2 GB. OpenBLAS, which torch only recommends, keeps its CPU maths fast.
packages_norec=(python3-torch python3-venv libopenblas0)
say="[slurm-root]"

fail() {
  echo "$say $*" >&2
  exit 1
}

check_host() {
  [ "$(id -u)" = 0 ] || fail "needs root (debootstrap, pivot_root, mount namespaces): sudo bash $0"
  local prog
  for prog in debootstrap unshare pivot_root flock; do
    command -v "$prog" >/dev/null 2>&1 ||
      fail "needs $prog: sudo apt-get install -y debootstrap util-linux coreutils"
  done
}

# Host files the root needs for the network: name resolution, the hosts (the issue's "the tree
# needs the host's /etc/hosts") and the host's CA bundle (a TLS-inspecting proxy's CA lives
# only there).
copy_host_files() {
  cp -L /etc/resolv.conf "$slurm_root/etc/resolv.conf"
  if [ ! -f "$slurm_root/etc/.hpctrain-hosts-copied" ]; then
    cp -L /etc/hosts "$slurm_root/etc/hosts"
    touch "$slurm_root/etc/.hpctrain-hosts-copied"
  fi
  if [ -f /etc/ssl/certs/ca-certificates.crt ] && [ -d "$slurm_root/etc/ssl/certs" ]; then
    cp -L /etc/ssl/certs/ca-certificates.crt "$slurm_root/etc/ssl/certs/ca-certificates.crt"
  fi
}

base_stage() {
  local key="$suite $mirror minbase"
  if [ -f "$slurm_root/.hpctrain-base" ] && [ "$(cat "$slurm_root/.hpctrain-base")" = "$key" ]; then
    return 0
  fi
  echo "$say debootstrap $suite into $slurm_root (about a minute)" >&2
  rm -rf "$slurm_root"
  mkdir -p "$slurm_root_cache"
  debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$suite" "$slurm_root" "$mirror" </dev/null >"$slurm_root_cache/debootstrap.log" 2>&1 ||
    fail "debootstrap failed; see $slurm_root_cache/debootstrap.log"
  echo "$key" >"$slurm_root/.hpctrain-base"
}

# Runs as root inside the root: "$1" packages with Recommends, then the rest without.
# shellcheck disable=SC2016
apt_script='
set -euo pipefail
printf "#!/bin/sh\n# hpctrain slurm-root.sh: no service starts in this root\nexit 101\n" \
  >/usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
n="$1"; shift
apt-get install "${opts[@]}" "${@:1:$n}"
apt-get install "${opts[@]}" --no-install-recommends "${@:$((n + 1))}"
apt-get clean
'

# The packages, keyed by their lists and the recipe that installs them.
packages_stage() {
  local stamp="$slurm_root/.hpctrain-packages" key recipe
  recipe="$(echo "$apt_script" | sha256sum | cut -c1-16)"
  key="${packages[*]} / ${packages_norec[*]} / recipe $recipe"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
    return 0
  fi
  echo "$say installing $key and their dependencies (a few minutes)" >&2
  copy_host_files
  slurm_root_env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
  _slurm_root_exec /bin/bash -c "$apt_script" apt "${#packages[@]}" "${packages[@]}" \
    "${packages_norec[@]}" </dev/null \
    >"$slurm_root_cache/apt.log" 2>&1 || fail "apt-get failed; see $slurm_root_cache/apt.log"
  copy_host_files
  echo "$key" >"$stamp"
}

# Runs as root inside the root, in the repository: makes the venv with hpctrain's
# dependencies ("$2": one requirement a line), shared by every clone on this machine.
# shellcheck disable=SC2016
venv_script='
set -euo pipefail
venv="$1"
[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
constraints="$venv/constraints.txt"
# The system torch and numpy (built together by Debian) are the only acceptable ones: pip must
# neither fetch a CUDA torch nor a numpy the system torch was not built against.
"$venv/bin/python" - >"$constraints" <<EOF
import importlib.metadata as m
for name in ("torch", "numpy"):
    print(f"{name}=={m.version(name)}")
EOF
mapfile -t reqs <<<"$2"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  -c "$constraints" "${reqs[@]}"
"$venv/bin/python" -c "import torch, lightning; print(\"torch\", torch.__version__, \"lightning\", lightning.__version__)"
'

# The dependencies, keyed by the dependency lists, the packages (the system torch) and the
# recipe (not the clone's path, nor the rest of pyproject.toml).
venv_stage() {
  local stamp="$slurm_root$slurm_root_venv/.hpctrain-venv" key reqs
  reqs="$(python3 "$slurm_root_repo/scripts/requirements.py")"
  key="$( (echo "$reqs"; cat "$slurm_root/.hpctrain-packages"; echo "$venv_script") |
    sha256sum | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
    return 0
  fi
  echo "$say installing hpctrain's dependencies into $slurm_root_venv in the root" >&2
  copy_host_files
  slurm_root_env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
    PIP_DEFAULT_TIMEOUT=180)
  _slurm_root_exec /bin/bash -c "$venv_script" venv \
    "$slurm_root_venv" "$reqs" </dev/null >"$slurm_root_cache/venv.log" 2>&1 ||
    fail "the venv failed; see $slurm_root_cache/venv.log"
  tail -1 "$slurm_root_cache/venv.log" >&2
  echo "$key" >"$stamp"
  rm -f "$slurm_root$slurm_root_venv/.hpctrain-editable"
}

# hpctrain itself, editable from the clone that asks: the root is shared, so the clone that
# entered last is the one installed (a few seconds when that changes), and installed again when
# what an install of it is made from changed (a console script, say).
editable_stage() {
  local stamp="$slurm_root$slurm_root_venv/.hpctrain-editable" key
  key="$slurm_root_repo $( (python3 "$slurm_root_repo/scripts/requirements.py" --installed
    declare -f editable_stage) | sha256sum | cut -c1-16)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
    return 0
  fi
  slurm_root_env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
  _slurm_root_exec "$slurm_root_venv/bin/python" -m pip install --quiet \
    --disable-pip-version-check --no-input --no-deps --no-build-isolation -e . </dev/null \
    >"$slurm_root_cache/editable.log" 2>&1 ||
    fail "installing hpctrain from $slurm_root_repo failed; see $slurm_root_cache/editable.log"
  echo "$key" >"$stamp"
}

main() {
  check_host
  if [ "${1:-}" = --rebuild ]; then
    rm -rf "$slurm_root"
  elif [ -n "${1:-}" ]; then
    fail "usage: $0 [--rebuild]"
  fi
  mkdir -p "$slurm_root_cache"
  # The venv stage runs pip in the working directory: the repository's top.
  cd "$slurm_root_repo"
  # One build at a time (the runner calls this before every command).
  exec 9>"$slurm_root_cache/.build.lock"
  flock 9
  base_stage
  packages_stage
  venv_stage
  editable_stage
  echo "$slurm_root"
}

main "$@"
