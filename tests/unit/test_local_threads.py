"""`hpctrain train` outside SLURM picks its threads as a job's script does: the CPUs it may use,
here those idle now (docs/trainer.md: 1 thread 4.0 s, torch's 2 threads 62 s on a busy 2-core
machine)."""

from __future__ import annotations

import pytest

from hpctrain.trainer.threads import choose, idle_cpus, set_for_local_run


@pytest.mark.parametrize(("cpus", "load", "threads"), [
    (2, 0.0, 2), (2, 0.4, 1), (2, 6.7, 1), (64, 3.2, 60), (64, 0.0, 64), (1, 0.0, 1)])
def test_the_idle_cpus_at_least_one(cpus: int, load: float, threads: int) -> None:
    assert idle_cpus(cpus, load) == threads


def test_a_value_set_or_a_launcher_wins() -> None:
    assert choose({"OMP_NUM_THREADS": "3"}, 8, 0.0) is None
    assert choose({"SLURM_JOB_ID": "7"}, 8, 0.0) is None
    assert choose({"LOCAL_RANK": "0"}, 8, 0.0) is None
    chosen = choose({}, 8, 5.5)
    assert chosen is not None and chosen.threads == 2
    assert "threads: 2" in chosen.note() and "OMP_NUM_THREADS" in chosen.note()


def test_the_choice_is_exported_as_the_job_script_does() -> None:
    env = {"MKL_NUM_THREADS": "4"}
    chosen = set_for_local_run(env)
    assert chosen is not None
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == str(chosen.threads)
    assert env["MKL_NUM_THREADS"] == "4"
    kept = {"OMP_NUM_THREADS": "5"}
    assert set_for_local_run(kept) is None and kept == {"OMP_NUM_THREADS": "5"}
