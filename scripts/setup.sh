#!/usr/bin/env bash
# Install what hpctrain and its dev cluster need; idempotent, quick when nothing changed.
#
#   1. Debian packages, if missing: for the dev cluster (SLURM, slurmdbd, munge, MariaDB), for
#      working from a laptop (OpenSSH's client, rsync; its server for the tests), and debootstrap
#      for the SLURM 24.11 root the tests also use.
#   2. The dependencies of '.[train,dev]' in a venv shared by every clone on this machine
#      ($HPCTRAIN_CACHE_DIR, default ~/.cache/hpctrain/venv/<hash of what it is built from>),
#      torch==2.13.0 first (the CPU build pip finds on local disk; a bare `torch` would pull a
#      multi-GB CUDA build); then the clone's thin .venv: hpctrain editable on top of it.
#
# A .venv this script did not make (no .venv/.hpctrain-setup.stamp: the README's Install, say)
# is never deleted or changed: it is used as it is when hpctrain and what it needs import
# there (HPCTRAIN_SETUP_EXTRAS, default "train dev": what the tests need; demo.sh asks for
# "train"), else the script stops and says what to do. A stale .venv it made is rebuilt.
#
# Safe with CI=true and no stdin. Call it (`bash scripts/setup.sh`) or source it.
# `bash scripts/setup.sh --keys` changes nothing: it prints the shared venv's key (the last part
# of its path) and the .venv's stamp, each a hash of everything that venv is built from.
# Does not start the dev cluster: `hpctrain devcluster up` does (docs/devcluster.md).

_hpctrain_setup() {
  set -euo pipefail
  local repo
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  cd "$repo"

  local torch_pin="torch==2.13.0"
  # openssh-server only for tests/remote (a private sshd on loopback); no service is started.
  # debootstrap builds the Debian 13 root with SLURM 24.11 the tests also run on
  # (scripts/slurm-root.sh); util-linux gives it unshare. tmux drives `hpctrain dev`'s real
  # terminal in tests/dev; charliecloud-runtime (ch-run) runs the container tests' jobs.
  local packages=(slurm-wlm slurmdbd munge mariadb-server openssh-client openssh-server rsync
                  debootstrap util-linux tmux charliecloud-runtime)
  local say="[setup]"
  if [ "${1:-}" = --keys ]; then
    _hpctrain_keys "$torch_pin"
    return 0
  fi

  # --- 0. A .venv someone else made: use it as it is, or stop before changing anything --------
  local theirs=0
  if [ -e .venv ] && [ ! -f "$_hpctrain_stamp" ]; then
    _hpctrain_their_venv "$say" || return 1
    theirs=1
  fi

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
  [ "$theirs" = 0 ] || return 0
  # The dependencies live in one venv per machine, outside the clone, keyed by what it is
  # built from (_hpctrain_deps_key): a fresh clone finds it in seconds. The clone's .venv is
  # thin: the shared site-packages through a .pth, hpctrain itself editable, and the shared
  # venv's scripts pointed at .venv's python; stamped with what it is built from
  # (_hpctrain_venv_key), so a changed console script is installed.
  local cache deps key
  cache="$(_hpctrain_cache_dir)"
  key="$(_hpctrain_deps_key "$torch_pin")"
  deps="$cache/venv/$key"
  _hpctrain_deps_venv "$deps" "$torch_pin" "$say" || return 1
  _hpctrain_thin_venv "$deps" "$(_hpctrain_venv_key "$key")" "$say" || return 1
}

# What says that this script made .venv: it deletes no .venv without it.
_hpctrain_stamp=.venv/.hpctrain-setup.stamp

# A .venv without the stamp is the user's (pip install . into it, per the README): use it when
# hpctrain and the requirements of HPCTRAIN_SETUP_EXTRAS import there, else stop, with the
# ways out, and leave it exactly as it is.
_hpctrain_their_venv() {
  local say="$1" extras missing=""
  read -r -a extras <<<"${HPCTRAIN_SETUP_EXTRAS:-train dev}"
  if [ -x .venv/bin/python ] && [ -x .venv/bin/hpctrain ]; then
    # -I: this checkout's own hpctrain/ (the current directory) must not count as installed.
    missing="$(python3 scripts/requirements.py --names "${extras[@]}" | .venv/bin/python -I -c '
import importlib.metadata as md, importlib.util, sys

def there(name):
    try:
        return md.version(name) is not None
    except md.PackageNotFoundError:
        return False

lacks = [] if importlib.util.find_spec("hpctrain") else ["hpctrain"]
print(" ".join(lacks + [n for n in sys.stdin.read().split() if not there(n)]))
' 2>/dev/null)" || missing="a python that runs"
  else
    missing="$([ -x .venv/bin/python ] || printf 'bin/python, ')bin/hpctrain"
  fi
  if [ -z "$missing" ]; then
    echo "$say .venv was not made by this script: using it as it is (hpctrain and" \
      "${extras[*]:-its} requirements import there); nothing in it is changed"
    return 0
  fi
  local target=.
  [ "${#extras[@]}" = 0 ] || target=".[$(IFS=,; echo "${extras[*]}")]"
  echo "$say .venv was not made by this script (no $_hpctrain_stamp) and lacks:" \
    "$missing. It is left as it is. Either install into it:" \
    ".venv/bin/python -m pip install -e '$target', or move it aside" \
    "(mv .venv .venv.mine) and run this again for hpctrain's own .venv" >&2
  return 1
}

# scripts/cache-dir.sh says where the caches shared by the clones of this machine live.
_hpctrain_cache_dir() {
  # shellcheck source=scripts/cache-dir.sh
  source scripts/cache-dir.sh
  echo "$hpctrain_cache_dir"
}

# The two stamps, which change when what their venvs are built from changes: `--keys`.
_hpctrain_keys() {
  local key
  key="$(_hpctrain_deps_key "$1")"
  echo "deps $key"
  echo "venv $(_hpctrain_venv_key "$key")"
}

# A hash of what the shared venv is built from: the Python, the torch pin, the project's
# dependency lists (not the rest of pyproject.toml, whose tool settings change often and
# install nothing) and this script's recipe for it (bash prints a function without comments).
_hpctrain_deps_key() {
  (
    python3 -c 'import platform, sys; print(sys.version, platform.machine())'
    echo "$1"
    _hpctrain_requirements
    declare -f _hpctrain_deps_venv _hpctrain_requirements
  ) | sha256sum | cut -c1-16
}

# A hash of what the clone's .venv is built from: the shared venv ("$1", its key), what an
# editable install of hpctrain is made from (its console scripts, entry points, metadata and
# build settings) and this script's recipe for it.
_hpctrain_venv_key() {
  (
    echo "$1"
    python3 scripts/requirements.py --installed
    declare -f _hpctrain_thin_venv
  ) | sha256sum | cut -c1-16
}

_hpctrain_requirements() {
  python3 scripts/requirements.py
}

# Build the shared dependency venv once (under a lock; built aside, then renamed into place,
# so an interrupted build is never taken for a finished one).
_hpctrain_deps_venv() {
  local deps="$1" torch_pin="$2" say="$3"
  [ -x "$deps/bin/python" ] && return 0
  mkdir -p "$(dirname "$deps")"
  (
    flock 9
    [ -x "$deps/bin/python" ] && exit 0
    echo "$say building the shared dependency venv $deps (once per machine)"
    rm -rf "$deps.tmp"
    if ! python3 -m venv "$deps.tmp" </dev/null; then
      rm -rf "$deps.tmp"
      echo "$say python3 -m venv failed: install python3-venv (Debian) and retry" >&2
      exit 1
    fi
    local pip=("$deps.tmp/bin/python" -m pip install --quiet --disable-pip-version-check
               --no-input)
    local reqs
    mapfile -t reqs < <(_hpctrain_requirements)
    # torch first, pinned: the CPU build pip finds on local disk, not a multi-GB CUDA one.
    "${pip[@]}" "$torch_pin" </dev/null && "${pip[@]}" "${reqs[@]}" </dev/null || exit 1
    # venv scripts name their interpreter by path: build at the final path, i.e. rename the
    # finished tree and fix the shebangs that named the temporary one.
    mv "$deps.tmp" "$deps"
    grep -rlI --null "$deps.tmp" "$deps/bin" | xargs -0 -r sed -i "s|$deps.tmp|$deps|g"
  ) 9>"$deps.lock"
}

# The clone's .venv: its own python, the shared site-packages, hpctrain editable.
_hpctrain_thin_venv() {
  local deps="$1" key="$2" say="$3"
  local stamp="$_hpctrain_stamp" want="$key $PWD"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/hpctrain ]; then
    echo "$say up to date (.venv on $deps)"
    return 0
  fi
  echo "$say making .venv on $deps"
  # Only a .venv this script made (its stamp) or none at all reaches here (step 0).
  rm -rf .venv
  python3 -m venv --without-pip .venv </dev/null || {
    echo "$say python3 -m venv failed: install python3-venv (Debian) and retry" >&2
    return 1
  }
  # Stamped at once, as unfinished: a build cut short is still this script's to redo.
  echo "building" >"$stamp"
  local site shared
  site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  shared="$("$deps/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # addsitedir (not a bare path) so the shared tree's own .pth files are read too.
  echo "import site; site.addsitedir('$shared')" >"$site/_hpctrain_shared_deps.pth"
  local script first
  for script in "$deps"/bin/*; do
    [ -f "$script" ] || continue
    case "$(basename "$script")" in
      python* | activate* | Activate.ps1 | pip*) continue ;;
    esac
    first="$(head -c 300 "$script" | tr -d '\0' | head -1)"
    if [ "$first" = "#!$deps/bin/python" ] || [ "$first" = "#!$deps/bin/python3" ]; then
      { echo "#!$PWD/.venv/bin/python"; tail -n +2 "$script"; } >".venv/bin/$(basename "$script")"
      chmod 755 ".venv/bin/$(basename "$script")"
    else
      ln -sf "$script" ".venv/bin/$(basename "$script")"  # a binary (ruff)
    fi
  done
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input --no-deps \
    --no-build-isolation -e . </dev/null || return 1
  echo "$want" >"$stamp"
  echo "$say done"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  _hpctrain_setup "$@"
else
  # Sourced: run in a subshell so `set -e` and `cd` do not leak into the caller's shell.
  (_hpctrain_setup)
fi
