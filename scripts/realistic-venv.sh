#!/usr/bin/env bash
# Build the "realistic" venv most ML researchers have: torch, Lightning, and torchvision,
# transformers and scipy beside them; idempotent, quick when it is already there. It is what
# `benchmarks/trainer_startup.py --python` and the realistic test in tests/unit/test_trainer_lean.py
# measure the trainer's start-up in (issue 43). Prints the venv's python on its last line.
#
#   bash scripts/realistic-venv.sh           # $HPCTRAIN_CACHE_DIR/venv-realistic
#
# torch and torchvision go in together, at a pair built for each other: PyPI's torchvision
# beside the CPU torch 2.13.0 that setup.sh installs cannot load its operators ("operator
# torchvision::nms does not exist"), and then `import lightning` itself fails, since
# torchmetrics imports torchvision. On x86_64 that pair is torch 2.14.1 + torchvision 0.29.1,
# CUDA builds (about 5.5 GB; pip takes them from this machine's disk), which is also what a GPU
# node has; on aarch64 torch 2.9.1 + torchvision 0.24.1, CPU builds. The Lightning packages
# are at the versions of the project's own venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=cache-dir.sh
source "$repo/scripts/cache-dir.sh"
venv="${1:-$hpctrain_cache_dir/venv-realistic}"
if [ "$(uname -m)" = aarch64 ]; then
  vision=(torch==2.9.1 torchvision==0.24.1)
else
  vision=(torch==2.14.1 torchvision==0.29.1)
fi
pins=(lightning==2.6.6 torchmetrics==1.9.0 lightning-utilities==0.15.3)
extras=(transformers scipy)
stamp="$venv/.hpctrain-realistic"
# What it is built from: the pins, hpctrain's own dependencies and this recipe.
recipe="$( (python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))
["project"]["dependencies"])' "$repo/pyproject.toml"; cat "${BASH_SOURCE[0]}") | sha256sum)"
want="${vision[*]} ${pins[*]} ${extras[*]} ${recipe:0:16}"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
# The pair first, then everything else with torch held where it is.
"${pip[@]}" "${vision[@]}"
"${pip[@]}" "${pins[@]}" "${extras[@]}" "${vision[@]}"
# hpctrain's own dependencies, not hpctrain: callers put their clone on PYTHONPATH.
"$venv/bin/python" - "$repo/pyproject.toml" "${vision[@]}" <<'EOF'
import subprocess, sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                *deps, *sys.argv[2:]], check=True)
EOF
# torchvision's operators load (the failure above), and transformers imports.
"$venv/bin/python" -c 'import torchvision.ops, transformers; import lightning'
echo "$want" > "$stamp"
echo "$venv/bin/python"
