#!/usr/bin/env bash
# Make, once, the directory image the dev cluster's container jobs run in (docs/containers.md),
# and print its path.
#
#   bash scripts/container-image.sh            # make or bring up to date; prints the image's path
#   hpctrain submit --profile local --container "$(bash scripts/container-image.sh)" ...
#
# The image is the 24.11 lane's Debian 13 root (scripts/slurm-root.sh), another distribution
# than this Debian 12 host, copied as hard links (no second 2 GB: the root is only read, never
# written; ch-run mounts an image read-only) with what a job binds into it made as empty
# directories: a runtime mounts a bind only where the image has its path, and the job's own
# Python (this clone's venv, the interpreter it was made from) lives at the host's paths.
# /hpctrain-container-image names the image: a rank that reads it is inside.
#
# Where: ~/.cache/hpctrain/container-image/root ($HPCTRAIN_CACHE_DIR moves it). Cost, measured on
# the 2-core development machine: the links 15 s once the root exists; later calls 0.1 s (the
# stamp: the root's stamps and the bind points). Needs charliecloud-runtime (`ch-run`), which
# it installs with apt where missing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/cache-dir.sh
source "$repo/scripts/cache-dir.sh"
cache="$hpctrain_cache_dir/container-image"
image="$cache/root"

if ! command -v ch-run >/dev/null 2>&1; then
  echo "container-image: installing charliecloud-runtime (ch-run)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q charliecloud-runtime >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q charliecloud-runtime >&2; }
fi

root="$(bash "$repo/scripts/slurm-root.sh" | tail -n 1)"
# The paths a job binds in that a Debian root lacks: this clone (the job's venv and hpctrain's
# package)
# and the interpreter the venv was made from, and the site directories its .pth files add.
mapfile -t points < <("$repo/.venv/bin/python" - "$repo" <<'PY'
import os, sys
for p in [sys.argv[1], sys.base_prefix, *sys.path]:
    if p and os.path.isdir(p):
        print(p)
        print(os.path.realpath(p))
PY
)
stamp="$(cat "$root"/.hpctrain-base "$root"/.hpctrain-packages 2>/dev/null | sha256sum | cut -c1-16) ${points[*]}"

if [ -f "$image/hpctrain-container-image" ] && [ "$(cat "$image/hpctrain-container-image")" = "$stamp" ]; then
  echo "$image"
  exit 0
fi
# A mount inside the root (a lane's bind, in this namespace) would be copied as its contents.
if findmnt -rn -o TARGET | grep -q "^$root/"; then
  echo "container-image: $root has mounts inside it now; run again once they are gone" >&2
  exit 1
fi
echo "container-image: linking $root into $image" >&2
rm -rf "$cache/root.partial"
mkdir -p "$cache"
cp -al "$root" "$cache/root.partial"
for point in "${points[@]}"; do
  mkdir -p "$cache/root.partial$point"
done
printf '%s' "$stamp" >"$cache/root.partial/hpctrain-container-image"
rm -rf "$image"
mv "$cache/root.partial" "$image"
echo "$image"
