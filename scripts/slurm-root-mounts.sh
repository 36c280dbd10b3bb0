# Sourced by scripts/slurm-root.sh and scripts/in-slurm-root.sh: where the Debian 13 root
# lives and how a command enters it. Not meant to be run by itself.
#
# Every entry happens in a mount namespace of its own (`unshare --mount`, private
# propagation): the binds below exist only for the processes inside, and the kernel drops them
# when the last of those exits. So nothing is left mounted on the host when a command fails or
# is killed, and daemons a command started (the dev cluster's slurmctld, ...) keep their mounts
# after it returned, which an unmount in a trap would pull from under them.

slurm_root_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The root (~2 GB) is built once per machine and shared by every clone, beside the dependency
# venv of scripts/setup.sh; HPCTRAIN_SLURM_ROOT_DIR moves it.
# shellcheck source=scripts/cache-dir.sh
source "$slurm_root_repo/scripts/cache-dir.sh"
slurm_root_cache="${HPCTRAIN_SLURM_ROOT_DIR:-$hpctrain_cache_dir/slurm-24.11}"
slurm_root="$slurm_root_cache/root"
# What belongs to this clone stays in it: the 24.11 dev cluster's HPCTRAIN_HOME (its state,
# its job history).
slurm_root_home="$slurm_root_repo/.cache/slurm-24.11/home"
# The container tests' image (scripts/container-image.sh, a linked copy of this root), bound in
# at the same path so that the 24.11 lane's jobs run in it too. The directory, not the image:
# an image made after the lane's daemons started shows in it.
slurm_root_images="$hpctrain_cache_dir/container-image"
# The venv inside the root; the runner puts it first on PATH.
slurm_root_venv=/opt/hpctrain-venv

# The mounts a command inside the root needs (run inside the new namespace).
_slurm_root_mount_all() {
  local r="$slurm_root"
  # The root a mount of its own, so that pivot_root (below) can make it the namespace's root.
  mount --bind "$r" "$r"
  mount -t proc proc "$r/proc" 2>/dev/null || mount --rbind /proc "$r/proc"
  mount --rbind /sys "$r/sys"
  # /dev with its submounts (/dev/pts for ssh's tty, /dev/shm for torch's DDP workers).
  mount --rbind /dev "$r/dev"
  # /tmp stays the root's own directory, on disk, shared by every command run in the root (the
  # dev cluster's sockets in /tmp/hpctrain-<hash>, pytest's tmp_path that slurmd writes job
  # output to) and apart from the host's. Not a tmpfs per command: a daemon started by one
  # command would not see the next one's.
  # The repository at the same path, so run directories and paths in tests match.
  mkdir -p "$r$slurm_root_repo"
  mount --bind "$slurm_root_repo" "$r$slurm_root_repo"
  mkdir -p "$slurm_root_images" "$r$slurm_root_images"
  mount --bind "$slurm_root_images" "$r$slurm_root_images"
  # A git worktree's .git is a file naming the main clone's git directory: bind that too so
  # `git` (hpctrain records the commit of a submission) works inside.
  local common
  common="$(git -C "$slurm_root_repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
  if [ -n "$common" ] && [ -d "$common" ] && [[ "$common" != "$slurm_root_repo"/* ]]; then
    mkdir -p "$r$common"
    mount --bind "$common" "$r$common"
  fi
}

# Run "$@" inside the root, in a private mount namespace, with a clean environment: only the
# NAME=VALUE words in the array slurm_root_env pass. The working directory is the caller's when
# it lies in the repository (bound at the same path), else the repository's top.
_slurm_root_exec() {
  local cwd="$slurm_root_repo"
  if [[ "$PWD/" == "$slurm_root_repo"/* ]]; then
    cwd="$PWD"
  fi
  # The mounts are made by a bash inside the new namespace, which gets the function from us.
  export -f _slurm_root_mount_all
  export slurm_root slurm_root_repo slurm_root_images
  unshare --mount --propagation private -- bash -c '
    set -euo pipefail
    _slurm_root_mount_all
    n="$1" cwd="$2"; shift 2
    env_args=("${@:1:$n}"); shift "$n"
    # pivot_root, not chroot: the kernel refuses a user namespace (a rootless container
    # runtime such as ch-run, issue 56) to a chrooted process, whose root is not its mount
    # namespace'"'"'s. The host'"'"'s tree is then unmounted from under the root.
    cd "$slurm_root"
    mkdir -p .old-root
    pivot_root . .old-root
    cd /
    # Out of sight (a root without umount keeps it, unused, at /.old-root).
    umount -l /.old-root 2>/dev/null || true
    exec /usr/bin/env -i "${env_args[@]}" \
      /bin/bash -c '\''cd -- "$1" && shift && exec "$@"'\'' slurm-root "$cwd" "$@"
  ' slurm-root "${#slurm_root_env[@]}" "$cwd" "${slurm_root_env[@]}" "$@"
}
