#!/usr/bin/env bash
# Set everything up and run the main job: install what is missing, start the local dev
# cluster, submit a real 2-node DDP training job (the spiral MLP on 4 ranks, gloo on the CPU),
# and show its status and logs until it ends. Idempotent: run it again for another job.
set -euo pipefail
cd "$(dirname "$0")/.."

# A .venv of one's own (the README's Install) is used as it is if it has hpctrain and its
# training requirements; the tests' tools are not needed here.
HPCTRAIN_SETUP_EXTRAS="${HPCTRAIN_SETUP_EXTRAS:-train}" bash scripts/setup.sh

# One dev cluster for this checkout, shared with scripts/test.sh (its ports are fixed).
export HPCTRAIN_HOME="${HPCTRAIN_HOME:-$PWD/.hpctrain}"
hp=.venv/bin/hpctrain
workdir="$HPCTRAIN_HOME/demo"
mkdir -p "$workdir"

echo "== hpctrain devcluster up"
"$hp" devcluster up --profile local --nodes 2

echo "== hpctrain submit --profile local --nodes 2"
cd "$workdir"
submitted="$("$OLDPWD/$hp" submit --profile local --nodes 2 --job-name demo-spiral --json)"
job="$(printf '%s' "$submitted" | "$OLDPWD/.venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["job_id"])')"
cd "$OLDPWD"
echo "submitted job $job"

echo "== hpctrain status $job"
"$hp" status "$job"

echo "== hpctrain logs -f $job"
# logs -f exits 1 unless the job COMPLETED: show its status all the same, then say how it ended.
"$hp" logs -f "$job" || true

echo "== hpctrain status $job"
"$hp" status "$job"
state="$("$hp" status "$job" --json | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["jobs"][0]["state"])')"
echo
echo "To use this dev cluster from your shell: export HPCTRAIN_HOME=$HPCTRAIN_HOME"
if [ "$state" != COMPLETED ]; then
  echo "job $job ended $state" >&2
  exit 1
fi
