#!/usr/bin/env bash
# Set everything up and run all tests: ruff, mypy and pytest, cluster tests included.
#
# Idempotent: installs what is missing (Debian packages, .venv), brings the local dev
# cluster up for the cluster tests, and brings it down again if it was not running before.
# HPCTRAIN_SKIP_CLUSTER=1 skips the cluster tests, explicitly and visibly.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

export HPCTRAIN_HOME="${HPCTRAIN_HOME:-$PWD/.hpctrain}"
venv=.venv/bin

echo "== ruff"
"$venv/ruff" check hpctrain tests benchmarks
echo "== mypy"
"$venv/mypy"
echo "== import contracts (pyproject.toml [tool.importlinter], docs/architecture.md)"
"$venv/lint-imports" --no-cache

# Leave a cluster the developer already had running as it was.
was_up=0
status_json="$("$venv/hpctrain" devcluster status --json 2>/dev/null || true)"
if [[ "$status_json" == *'"running": true'* ]]; then
  was_up=1
fi
cleanup() {
  if [ "$was_up" = 0 ] && [ "${HPCTRAIN_SKIP_CLUSTER:-0}" != 1 ]; then
    "$venv/hpctrain" devcluster down || true
  fi
}
trap cleanup EXIT

echo "== pytest"
set +e
"$venv/pytest" --durations=15 "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
