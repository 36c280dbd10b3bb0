#!/usr/bin/env bash
# Install what hpctrain and its dev cluster need; idempotent, quick when nothing changed.
#
#   1. Debian packages, if missing: for the dev cluster (SLURM, slurmdbd, munge, MariaDB), for
#      working from a laptop (OpenSSH's client, rsync; its server for the tests), and debootstrap
#      for the SLURM 24.11 root the tests also use.
#   2. .venv (python3 -m venv), torch==2.13.0 first (the CPU build pip finds on local disk;
#      a bare `torch` would pull a multi-GB CUDA build), then `pip install -e '.[train,dev]'`.
#
# Safe with CI=true and no stdin. Call it (`bash scripts/setup.sh`) or source it.
# Does not start the dev cluster: `hpctrain devcluster up` does (docs/devcluster.md).

_hpctrain_setup() {
  set -euo pipefail
  local repo
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  cd "$repo"

  local torch_pin="torch==2.13.0"
  # openssh-server only for tests/remote (a private sshd on loopback); no service is started.
  # debootstrap builds the Debian 13 root with SLURM 24.11 the tests also run on
  # (scripts/slurm-root.sh); util-linux gives it unshare.
  local packages=(slurm-wlm slurmdbd munge mariadb-server openssh-client openssh-server rsync
                  debootstrap util-linux)
  local say="[setup]"

  # --- 1. Debian packages -------------------------------------------------------------
  local missing=() pkg
  for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
      echo "$say missing ${missing[*]} and no apt-get: install SLURM, slurmdbd, munge," \
        "MariaDB, OpenSSH and rsync with your package manager" >&2
      return 1
    fi
    local sudo=()
    if [ "$(id -u)" != 0 ]; then
      if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo=(sudo -n)
      else
        echo "$say missing ${missing[*]}: run as root, or install them:" \
          "sudo apt-get install -y ${packages[*]}" >&2
        return 1
      fi
    fi
    echo "$say installing ${missing[*]}"
    # Keep the packages' maintainer scripts from starting system daemons (default ports,
    # /etc/slurm): the dev cluster runs its own. Only if no policy is in place already.
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\n# hpctrain setup.sh: no service starts during install\nexit 101\n' |
        "${sudo[@]}" tee "$policy" >/dev/null
      "${sudo[@]}" chmod 755 "$policy"
      made_policy=1
    fi
    local apt_env=(env DEBIAN_FRONTEND=noninteractive)
    local rc=0
    {
      # Update the package lists only when we must install something. Recommends stay on:
      # that is the package set the dev cluster was tested with.
      "${sudo[@]}" "${apt_env[@]}" apt-get update -q &&
        "${sudo[@]}" "${apt_env[@]}" apt-get install -y -q \
          -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
          "${packages[@]}"
    } </dev/null || rc=$?
    if [ "$made_policy" = 1 ]; then
      "${sudo[@]}" rm -f "$policy"
    fi
    if [ "$rc" != 0 ]; then
      echo "$say apt-get failed (exit $rc)" >&2
      return "$rc"
    fi
  fi

  # --- 2. Python environment ------------------------------------------------------------
  local py=.venv/bin/python
  if [ ! -x "$py" ]; then
    echo "$say creating .venv"
    if ! python3 -m venv .venv </dev/null; then
      rm -rf .venv
      echo "$say python3 -m venv failed: install python3-venv (Debian) and retry" >&2
      return 1
    fi
  fi
  # The stamp says which pyproject.toml (and torch pin) the venv was last installed from.
  local stamp=.venv/.hpctrain-setup.stamp key
  key="$( (cat pyproject.toml; echo "$torch_pin"; "$py" -V 2>&1) | sha256sum | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] && [ -x .venv/bin/hpctrain ]; then
    echo "$say up to date (.venv matches pyproject.toml)"
    return 0
  fi
  local pip=("$py" -m pip install --quiet --disable-pip-version-check --no-input)
  if ! "$py" -c 'import sys, importlib.metadata as m; sys.exit(m.version("torch").split("+")[0] != sys.argv[1])' \
    "${torch_pin#torch==}" 2>/dev/null; then
    echo "$say installing $torch_pin (CPU build)"
    "${pip[@]}" "$torch_pin" </dev/null
  fi
  echo "$say installing hpctrain (editable) with [train,dev]"
  "${pip[@]}" -e '.[train,dev]' </dev/null
  echo "$key" >"$stamp"
  echo "$say done"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  _hpctrain_setup
else
  # Sourced: run in a subshell so `set -e` and `cd` do not leak into the caller's shell.
  (_hpctrain_setup)
fi
