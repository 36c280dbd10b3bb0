#!/usr/bin/env bash
# Set everything up and run all tests: ruff, mypy, the import contracts and pytest, cluster
# tests included, on SLURM 22.05 (the host's) and on SLURM 24.11 (a Debian 13 root).
#
# Idempotent: installs what is missing (Debian packages, the venvs, the 24.11 root: built once
# per machine, outside the clone, scripts/cache-dir.sh), brings the dev clusters up for the
# cluster tests and down again after (the host's only if it was not running before).
#
# Three lanes run side by side (docs/development.md, "The test run"): lint then the tests that
# need no cluster; the cluster tests on the host's dev cluster; the tests whose SLURM side
# differs by version on the 24.11 dev cluster, which has ports and job ids of its own. Each
# stage's wall and CPU time are tabled at the end, then the 20 slowest test modules.
#
#   HPCTRAIN_SKIP_CLUSTER=1   skip every cluster test, explicitly and visibly
#   HPCTRAIN_SKIP_SLURM_24=1  skip the 24.11 lane
#   scripts/test.sh ARGS      lint, then `pytest ARGS` alone (one lane, no 24.11 part)
set -euo pipefail
cd "$(dirname "$0")/.."

export HPCTRAIN_HOME="${HPCTRAIN_HOME:-$PWD/.hpctrain}"
export PYTHONUNBUFFERED=1
venv=.venv/bin
logs=.cache/test-logs
# shellcheck source=scripts/cache-dir.sh
source scripts/cache-dir.sh
# Lanes 2b's and 2c's dev clusters (below): a home and ports of their own.
lane_b_env=(HPCTRAIN_HOME="$PWD/.cache/devcluster-b" HPCTRAIN_DEVCLUSTER_PORT_OFFSET=500)
lane_c_env=(HPCTRAIN_HOME="$PWD/.cache/devcluster-c" HPCTRAIN_DEVCLUSTER_PORT_OFFSET=1500)
lane_d_env=(HPCTRAIN_HOME="$PWD/.cache/devcluster-d" HPCTRAIN_DEVCLUSTER_PORT_OFFSET=2000)
nargs=$#
skip_cluster=0
[ "${HPCTRAIN_SKIP_CLUSTER:-0}" = 0 ] || skip_cluster=1
with_24=1
if [ "$skip_cluster" = 1 ] || [ "${HPCTRAIN_SKIP_SLURM_24:-0}" != 0 ] || [ "$#" != 0 ]; then
  with_24=0
fi

stage() {
  python3 scripts/stages.py run "$@"
}

# pytest's exit 5 (no test collected) is a failure, not a pass.
pytest_stage() {
  local name="$1" rc=0
  shift
  stage "$name" -- "$@" || rc=$?
  if [ "$rc" = 5 ]; then
    echo "[$name] pytest collected no tests: that is a failure, not a pass" >&2
    return 1
  fi
  return "$rc"
}

# pytest's reports for one lane: every duration in a JUnit XML, every test's wall and CPU time.
report_args() {
  echo "--junitxml=$logs/$1.xml" "--durations=0" "--durations-min=2"
}

python3 scripts/stages.py begin
stage setup -- bash -c 'bash scripts/setup.sh && if [ "$1" = 1 ]; then bash scripts/slurm-root.sh; fi' \
  setup "$with_24"
# The container tests' image (issue 56), made once here for every lane: lanes d and 24.11 use it
# at once, and the 24.11 lane's tests, inside the Debian 13 root, could not make it there.
if [ "$skip_cluster" = 0 ]; then
  stage container-image -- bash scripts/container-image.sh
  export HPCTRAIN_TEST_CONTAINER_IMAGE="$hpctrain_cache_dir/container-image/root"
fi

# Every check runs whatever the one before gave, so that one run reports every failure.
lint() {
  local rc=0
  stage ruff -- "$venv/ruff" check hpctrain tests benchmarks || rc=1
  stage mypy -- "$venv/mypy" --cache-dir "$hpctrain_cache_dir/mypy" || rc=1
  stage imports -- "$venv/lint-imports" --no-cache || rc=1
  return "$rc"
}

# Leave a cluster the developer already had running as it was.
was_up=0
if [[ "$("$venv/hpctrain" devcluster status --json 2>/dev/null || true)" == *'"running": true'* ]]; then
  was_up=1
fi
cleanup() {
  if [ "$was_up" = 0 ] && [ "$skip_cluster" = 0 ]; then
    "$venv/hpctrain" devcluster down >/dev/null 2>&1 || true
  fi
  if [ "$skip_cluster" = 0 ] && [ "$nargs" = 0 ]; then
    env "${lane_b_env[@]}" "$venv/hpctrain" devcluster down >/dev/null 2>&1 || true
    env "${lane_c_env[@]}" "$venv/hpctrain" devcluster down >/dev/null 2>&1 || true
    env "${lane_d_env[@]}" "$venv/hpctrain" devcluster down >/dev/null 2>&1 || true
  fi
  if [ "$with_24" = 1 ]; then
    bash scripts/in-slurm-root.sh hpctrain devcluster down >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

if [ "$#" != 0 ]; then
  rc=0
  lint || rc=1
  pytest_stage pytest "$venv/pytest" "$@" || rc=1
  python3 scripts/stages.py table
  exit "$rc"
fi

# Lane 1: lint, then the tests that need no cluster (every test, skipped ones shown, when
# HPCTRAIN_SKIP_CLUSTER=1). Not niced: its tests that compare a speed with a baseline taken a
# moment before would see the CPU come and go (one failed so: 1.81 s against 0.29 s).
lane_local() {
  local select=(-m "not cluster")
  [ "$skip_cluster" = 0 ] || select=()
  local rc=0
  lint || rc=1
  # A home of its own, where no dev cluster runs: with lane a's, a dry run here would ask that
  # cluster's SLURM, and meet what lane a's tests set up there at that moment (a maintenance
  # reservation refused a sweep's dry run so).
  HPCTRAIN_TEST_TIMES="$logs/local.times.json" HPCTRAIN_HOME="$PWD/.cache/local-home" \
    pytest_stage local "$venv/pytest" -p no:cacheprovider "${select[@]}" \
    $(report_args local) || rc=1
  return "$rc"
}

# Lanes 2a to 2d: the cluster tests on four dev clusters of the host's SLURM 22.05, side by side
# (they mostly wait: for SLURM, for jobs, for daemons; the four use less CPU together than the
# local lane). 2b's, 2c's and 2d's clusters live under .cache/ with every port moved up by 500,
# 1500 and 2000, their jobs numbered from 5001, 15001 and 20001 and a hosts line each, so none
# sees another; they take the modules that switch profiles and a share of the rest, each whole.
# A new module goes to 2a unless listed here.
lane_b_tests=(
  tests/cluster/test_check.py tests/cluster/test_gilbreth_tutorial.py
  tests/cluster/test_training_jobs.py
  tests/devcluster/test_profiles_cluster.py tests/options/test_devcluster_options.py
  tests/options/test_profiles_options.py tests/options/test_scale_options.py
  tests/profiles/test_profiles_cluster.py tests/trainer/test_trainer_custom_cluster.py
  tests/trainer/test_trainer_ddp_cluster.py tests/trainer/test_trainer_stop_ddp_cluster.py
  tests/diagnosis/test_why_cluster.py
  tests/alternatives/test_global_batch_runs.py
  tests/alternatives/test_race_partitions_cluster.py tests/alternatives/test_race_profiles_cluster.py
  tests/diagnosis/test_faults_trainer_cluster.py tests/sweeps/test_sweep_requeue_cluster.py
  tests/cluster/test_requeue_per_node.py
)
lane_c_tests=(
  tests/diagnosis/test_faults_cluster.py tests/jobs/test_dead_controller.py
  tests/cluster/test_tutorial_patterns.py
  tests/monitor/test_monitor_cluster.py tests/cluster/test_snapshots.py tests/dev/test_dev_cluster.py
  tests/dev/test_dev_container_cluster.py
)
# Issue 54's and 56's: recovery inside the allocation, the tracker across restarts, containers.
lane_d_tests=(
  tests/supervisor/test_restarts_cluster.py tests/jobs/test_node_failure_cluster.py
  tests/jobs/test_node_failure_2node_cluster.py  # 85 s: node2 killed under a 2-node job
  tests/cluster/test_tracker_identity_cluster.py tests/monitor/test_stall_cluster.py
  tests/containers/test_container_cluster.py  # 63 s; its image made by the setup stage
  tests/containers/test_container_torchrun_cluster.py tests/containers/test_container_image_cluster.py
)
lane_cluster() {
  local ignore=() f
  for f in "${lane_b_tests[@]}" "${lane_c_tests[@]}" "${lane_d_tests[@]}" "${slurm24_only[@]}"; do
    ignore+=("--ignore=$f")
  done
  HPCTRAIN_TEST_TIMES="$logs/cluster-22.05-a.times.json" pytest_stage cluster-22.05-a \
    "$venv/pytest" -p no:cacheprovider -m "cluster and not quiet" "${ignore[@]}" \
    $(report_args cluster-22.05-a)
}
lane_cluster_other() {  # lane_cluster_other NAME ENV_ARRAY TESTS_ARRAY
  local name="$1"
  local -n env_of="$2" tests_of="$3"
  HPCTRAIN_TEST_TIMES="$logs/$name.times.json" pytest_stage "$name" \
    env "${env_of[@]}" "$venv/pytest" -p no:cacheprovider -m "cluster and not quiet" \
    $(report_args "$name") "${tests_of[@]}"
}

# Lane 3: what differs by SLURM version, on 24.11: every command hpctrain reads or sends
# (squeue, sacct, scontrol, sinfo, sacctmgr, sbatch's refusals), arrays, requeue and chains, the
# environment srun gives a rank, `status` through a login (squeue and sacct in one round trip,
# whose form is the version's), a real time limit crossed (slurm24_only). Not the training that
# lane 2 checks: the packaged trainer's runs, the 2-node timer-driven requeue to the end, the
# scaling study, Lightning's tutorials. Not torchrun: Debian's torch lacks the libuv its
# rendezvous asks for. docs/development.md lists each file.
# Run here alone, where they cost no wall time (this lane ends minutes before lane a): a real
# 1-minute limit crossed by one rank (22.05's is the quiet stage's 2-node test_requeue.py).
slurm24_only=(tests/cluster/test_time_limit.py)
slurm24_tests=(
  "${slurm24_only[@]}"
  tests/jobs/test_jobs_cluster.py tests/cluster/test_check.py
  tests/profiles/test_profiles_cluster.py tests/alternatives/test_race_cluster.py
  tests/sweeps/test_sweep_cluster.py tests/cluster/test_requeue.py
  tests/monitor/test_monitor_cluster.py tests/cluster/test_tutorial_patterns.py
  tests/cluster/test_training_jobs.py::test_hostile_job_name_round_trips_through_sbatch
  tests/cluster/test_shell_variables.py tests/cluster/test_plain_sbatch.py
  tests/remote/test_status_login.py tests/remote/test_sweep_login.py
  tests/remote/test_remote_cluster.py::test_submit_status_logs_cancel_over_one_connection
  tests/jobs/test_maintenance_cluster.py tests/jobs/test_free_cluster.py
  tests/jobs/test_status_calls_cluster.py tests/jobs/test_budget_cluster.py
  tests/dev/test_dev_cluster.py tests/remote/test_dev_login.py tests/dev/test_dev_container_cluster.py
  # Containers (issue 56): Debian 13's ch-run 0.38 in the root's nodes.
  tests/containers/test_container_cluster.py::test_the_packaged_trainer_runs_its_2_node_ddp_job_inside_the_container
  # The fault matrix's first rows (issue 51): Debian's torch 2.6 records no collectives, so
  # the stacks name the rank.
  tests/diagnosis/test_faults_cluster.py::test_a_rank_that_raises_is_the_cause_at_its_own_line
  tests/diagnosis/test_faults_cluster.py::test_a_rank_asleep_in_its_own_function_is_named_with_the_collective
  tests/diagnosis/test_faults_cluster.py::test_a_rank_that_skips_a_collective_is_named
  "tests/diagnosis/test_faults_cluster.py::test_a_correct_run_completes[correct-1]"
)
slurm24_omit="torchrun or test_long_training or scaling_study or lightning or 1node"
lane_24() {
  HPCTRAIN_TEST_TIMES="$logs/slurm-24.11.times.json" pytest_stage slurm-24.11 \
    bash scripts/in-slurm-root.sh pytest -p no:cacheprovider -m "cluster and not quiet" \
    -k "not ($slurm24_omit)" $(report_args slurm-24.11) "${slurm24_tests[@]}"
}
# Its `quiet` tests, alone at the end like lane 2's.
quiet_24() {
  HPCTRAIN_TEST_TIMES="$logs/quiet-24.11.times.json" pytest_stage quiet-24.11 \
    bash scripts/in-slurm-root.sh pytest -p no:cacheprovider -m "cluster and quiet" \
    -k "not ($slurm24_omit)" $(report_args quiet-24.11) "${slurm24_tests[@]}"
}

pids=()
lane_local & pids+=($!)
if [ "$skip_cluster" = 0 ]; then
  lane_cluster & pids+=($!)
  lane_cluster_other cluster-22.05-b lane_b_env lane_b_tests & pids+=($!)
  lane_cluster_other cluster-22.05-c lane_c_env lane_c_tests & pids+=($!)
  lane_cluster_other cluster-22.05-d lane_d_env lane_d_tests & pids+=($!)
fi
if [ "$with_24" = 1 ]; then
  lane_24 & pids+=($!)
fi
rc=0
for pid in "${pids[@]}"; do
  wait "$pid" || rc=1
done
# Last, alone: the tests marked `quiet`: of load itself (others' load would blur it, its hogs
# would slow the others), and those that load breaks (SLURM's time-limit timer with requeues,
# 2-node gloo teardown).
if [ "$skip_cluster" = 0 ]; then
  HPCTRAIN_TEST_TIMES="$logs/quiet.times.json" pytest_stage quiet \
    "$venv/pytest" -p no:cacheprovider -m "cluster and quiet" $(report_args quiet) || rc=1
fi
if [ "$with_24" = 1 ]; then
  quiet_24 || rc=1
fi

python3 scripts/stages.py table
shopt -s nullglob
times=("$logs"/*.times.json)
if [ "${#times[@]}" != 0 ]; then
  python3 scripts/slowest.py "${times[@]}"
fi
junit=("$logs"/*.xml)
if [ "${#junit[@]}" != 0 ]; then
  python3 scripts/failures.py "${junit[@]}"
fi
exit "$rc"
