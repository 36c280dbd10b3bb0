"""Launch detection from SLURM/torchrun variables, and run-directory rules (pure, no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpctrain.errors import ConfigError
from hpctrain.tasks.parts.datasets.fetch import default_data_dir
from hpctrain.trainer.cluster import (
    ProcessLayout,
    detect_topology,
    parse_tasks_per_node,
    resolve_run_dir,
)


def slurm(**extra: str) -> dict[str, str]:
    env = {
        "SLURM_JOB_ID": "777",
        "SLURM_JOB_NAME": "train",
        "SLURM_NTASKS": "8",
        "SLURM_NTASKS_PER_NODE": "4",
        "SLURM_NNODES": "2",
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "1",
    }
    env.update(extra)
    return env


def test_outside_slurm_is_one_local_process() -> None:
    topo = detect_topology({})
    assert topo == ProcessLayout("local", world_size=1, num_nodes=1, devices_per_node=1)


def test_local_devices_from_config() -> None:
    assert detect_topology({}, devices=2).world_size == 2


def test_local_run_cannot_pin_several_nodes() -> None:
    with pytest.raises(ConfigError, match="num_nodes=2 needs a multi-node launch"):
        detect_topology({}, num_nodes=2)


def test_srun_task_layout_and_ranks() -> None:
    topo = detect_topology(slurm())
    assert (topo.launch, topo.world_size, topo.num_nodes, topo.devices_per_node) == (
        "slurm",
        8,
        2,
        4,
    )
    assert (topo.global_rank, topo.local_rank, topo.node_rank, topo.job_id) == (5, 1, 1, "777")


def test_step_layout_wins_over_job_variables() -> None:
    env = slurm(
        SLURM_STEP_NUM_TASKS="8", SLURM_STEP_NUM_NODES="2", SLURM_STEP_TASKS_PER_NODE="4(x2)"
    )
    assert detect_topology(env).devices_per_node == 4


def test_ntasks_without_ntasks_per_node_uses_the_layout() -> None:
    env = slurm(SLURM_NTASKS="4", SLURM_NNODES="1", SLURM_TASKS_PER_NODE="4")
    del env["SLURM_NTASKS_PER_NODE"]
    topo = detect_topology(env)
    assert (topo.world_size, topo.devices_per_node) == (4, 4)


def test_lightning_issue_20391_is_a_clear_error() -> None:
    # --ntasks=1 --ntasks-per-node=2: SLURM starts one task, Lightning would count two devices.
    env = slurm(SLURM_NTASKS="1", SLURM_NNODES="1", SLURM_NTASKS_PER_NODE="2", SLURM_PROCID="0")
    with pytest.raises(ConfigError) as e:
        detect_topology(env)
    assert "SLURM_NTASKS=1" in str(e.value) and "SLURM_NTASKS_PER_NODE=2" in str(e.value)
    assert "#20391" in str(e.value)


def test_uneven_layout_is_refused() -> None:
    env = slurm(SLURM_NTASKS="3", SLURM_TASKS_PER_NODE="2,1")
    del env["SLURM_NTASKS_PER_NODE"]
    with pytest.raises(ConfigError, match="different number of tasks on each node"):
        detect_topology(env)


def test_pinned_devices_disagreeing_with_slurm_names_both() -> None:
    with pytest.raises(ConfigError) as e:
        detect_topology(slurm(), devices=2)
    message = str(e.value)
    assert "trainer.devices=2" in message and "gives 4 process(es) per node" in message
    assert "SLURM_NTASKS_PER_NODE" in message


def test_pinned_nodes_disagreeing_with_slurm_names_both() -> None:
    with pytest.raises(ConfigError) as e:
        detect_topology(slurm(), num_nodes=1)
    assert "trainer.num_nodes=1" in str(e.value) and "gives 2 node(s)" in str(e.value)


def test_pinned_values_that_agree_are_fine() -> None:
    assert detect_topology(slurm(), devices=4, num_nodes=2).world_size == 8


@pytest.mark.parametrize("name", ["bash", "interactive"])
def test_interactive_jobs_run_locally(name: str) -> None:
    assert detect_topology(slurm(SLURM_JOB_NAME=name)).launch == "local"


def test_salloc_shell_without_srun_runs_locally() -> None:
    env = slurm()
    del env["SLURM_PROCID"]
    assert detect_topology(env).launch == "local"


def test_torchrun_wins_over_slurm() -> None:
    # The torchrun launcher runs one SLURM task per node; the workers carry both sets of variables.
    env = slurm(SLURM_NTASKS="2", SLURM_NTASKS_PER_NODE="1", SLURM_PROCID="1")
    env.update(
        TORCHELASTIC_RUN_ID="777",
        RANK="6",
        LOCAL_RANK="2",
        WORLD_SIZE="8",
        LOCAL_WORLD_SIZE="4",
        GROUP_RANK="1",
    )
    topo = detect_topology(env)
    assert (topo.launch, topo.world_size, topo.num_nodes, topo.devices_per_node) == (
        "torchrun",
        8,
        2,
        4,
    )
    assert (topo.global_rank, topo.local_rank, topo.node_rank) == (6, 2, 1)


def test_bad_number_in_environment() -> None:
    with pytest.raises(ConfigError, match="SLURM_NTASKS='x' is not a whole number"):
        detect_topology(slurm(SLURM_NTASKS="x"))


def test_tasks_per_node_expansion() -> None:
    assert parse_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(ConfigError):
        parse_tasks_per_node("two")


def test_run_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    local = ProcessLayout("local", 1, 1, 1)
    assert resolve_run_dir(tmp_path / "x", "spiral", local, {}) == tmp_path / "x"
    env = {"HPCTRAIN_RUN_DIR": str(tmp_path / "env")}
    assert resolve_run_dir(None, "spiral", local, env) == tmp_path / "env"
    stamped = resolve_run_dir(None, "spiral", local, {})
    assert stamped.parent == tmp_path / "hpctrain-runs" and stamped.name.startswith("spiral-")


def test_distributed_default_run_dir_is_the_same_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for rank in ("0", "5"):
        topo = detect_topology(slurm(SLURM_PROCID=rank))
        assert resolve_run_dir(None, "mnist", topo, {}) == tmp_path / "hpctrain-runs" / "mnist-777"


def test_default_data_dir(tmp_path: Path) -> None:
    assert default_data_dir("mnist", {"HPCTRAIN_DATA_DIR": str(tmp_path)}) == tmp_path / "mnist"
