"""Node types inside partitions: the model, loading and overriding them, and the plan's choice."""

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from hpctrain.errors import PlanError, ProfileError
from hpctrain.plan import JobPlan, JobRequest, build_plan
from hpctrain.profiles import NodeType, Partition, load_profile
from hpctrain.profiles.plain import from_plain
from tests.unit.test_profiles import _home, user_profile

# A fresh HPCTRAIN_HOME for every test (autouse), and a writer of user profiles.
__all__ = ["_home", "user_profile"]


def gil(**kw: Any) -> JobPlan:
    return build_plan(JobRequest(profile=load_profile("gilbreth"), account="lab", **kw))


def gil_refused(**kw: Any) -> list[str]:
    return gil_error(**kw).problems


def gil_error(**kw: Any) -> PlanError:
    with pytest.raises(PlanError) as e:
        gil(**kw)
    return e.value


# The model


def test_flat_partition_has_one_implicit_type() -> None:
    local = load_profile("local").partition("debug")
    assert local is not None and not local.node_types
    (t,) = local.types()
    assert (t.name, t.gpus, t.cpus, t.mem_mb) == ("debug", 2, 4, 4000)


def test_typed_partition_derives_the_flat_shape() -> None:
    part = load_profile("gilbreth").partition("a100-40gb")
    assert part is not None
    assert [t.name for t in part.types()] == ["G", "N"]
    # The largest type's values: what one node of the partition can give at most.
    assert (part.gpus_per_node, part.cpus_per_node, part.mem_per_node_mb) == (4, 128, 1000000)
    assert part.features() == ["G", "N", "nvlink"]


def test_typed_partition_survives_the_cache_constructor() -> None:
    prof = load_profile("gilbreth")
    assert from_plain(type(prof), dataclasses.asdict(prof)) == prof


def _partition(**kw: Any) -> Partition:
    from pydantic import TypeAdapter

    data = {"name": "p", "max_time": "1:00:00", **kw}
    return TypeAdapter(Partition).validate_python(data)


K = {"name": "K", "gpus": 2, "cpus": 64, "mem_mb": 512000, "features": ["K"]}


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({}, "give gpus_per_node, cpus_per_node, mem_per_node_mb"),
        ({"gpus_per_node": 4, "node_types": [K]}, "gpus_per_node 4 contradicts node_types"),
        ({"node_types": [K, K]}, "duplicate node types: K"),
        ({"node_types": [{**K, "name": "$(reboot)"}]}, "node type name '$(reboot)'"),
        ({"node_types": [{**K, "name": "-rf"}]}, "node type name '-rf'"),
        ({"node_types": [{**K, "name": "a b"}]}, "node type name 'a b'"),
        ({"node_types": [{**K, "features": ["K|I"]}]}, "feature name 'K|I'"),
        ({"node_types": [{**K, "features": ["x;id"]}]}, "feature name 'x;id'"),
        ({"node_types": [{**K, "gpu_type": "a100 80"}]}, "GPU type name 'a100 80'"),
        ({"node_types": [{**K, "gpus": -1}]}, "greater than or equal to 0"),
        ({"node_types": [{**K, "color": "red"}]}, "color"),
    ],
)
def test_bad_node_types_refused(kw: dict[str, Any], needle: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=None) as e:
        _partition(**kw)
    assert needle in str(e.value)


def test_flat_fields_equal_to_the_types_are_accepted() -> None:
    part = _partition(gpus_per_node=2, cpus_per_node=64, node_types=[K])
    assert part.types() == [NodeType(**K)]  # type: ignore[arg-type]


# Loading: a user profile adds or overrides types by name


def test_user_profile_overrides_and_adds_types(_home: Path) -> None:
    user_profile(_home, "mygil", """extends: gilbreth
partitions:
  - name: a100-80gb
    node_types:
      - {name: K, mem_mb: 500000}
      - {name: Z, gpus: 8, cpus: 96, mem_mb: 2000000, features: [Z]}
""")
    prof = load_profile("mygil")
    part = prof.partition("a100-80gb")
    assert part is not None
    types = {t.name: t for t in part.types()}
    assert list(types) == ["K", "I", "J", "Z"]
    assert types["K"].mem_mb == 500000 and types["K"].cpus == 64  # merged key by key
    assert part.gpus_per_node == 8
    # The other partitions are kept, not replaced by the one named here.
    shipped = load_profile("gilbreth").partitions
    assert [p.name for p in prof.partitions] == [p.name for p in shipped]


def test_user_types_replace_a_flat_partitions_shape(_home: Path) -> None:
    user_profile(_home, "mylocal", """extends: local
partitions:
  - name: debug
    node_types:
      - {name: small, gpus: 1, cpus: 2, mem_mb: 2000, features: [small]}
      - {name: big, gpus: 2, cpus: 4, mem_mb: 4000, features: [big]}
""")
    part = load_profile("mylocal").partition("debug")
    assert part is not None
    assert [t.name for t in part.types()] == ["small", "big"]
    assert (part.gpus_per_node, part.cpus_per_node, part.mem_per_node_mb) == (2, 4, 4000)


def test_bad_user_type_names_the_file_and_field(_home: Path) -> None:
    path = user_profile(_home, "bad", """extends: gilbreth
partitions:
  - name: a100-80gb
    node_types:
      - {name: "K;rm -rf ~", gpus: 2, cpus: 8, mem_mb: 1000}
""")
    with pytest.raises(ProfileError) as e:
        load_profile("bad")
    assert f"{path}:5: partitions[name=a100-80gb].node_types[name=K;rm -rf ~]" in str(e.value)
    assert "hpctrain profiles show gilbreth" in str(e.value)


# The plan picks the types that fit


def test_gilbreth_tutorial_single_node_four_gpus() -> None:
    p = gil(partition="a100-80gb", nodes=1, gpus_per_node=4)
    assert p.constraint == "J" and p.node_types == ("J",)
    assert p.gpu_option == "--gpus-per-node=4" and p.tasks_per_node == 4
    assert p.cpus_per_node == 128 and p.mem_mb == 1000000
    assert any("--constraint J added" in n for n in p.notes)
    # The tutorial's own layout: one task with 64 CPUs, which torchrun launches.
    p = gil(nodes=1, gpus_per_node=4, cpus_per_task=64, launcher="torchrun")
    assert p.constraint == "J" and p.cpus_per_node == 64


def test_gilbreth_tutorial_four_nodes_one_gpu() -> None:
    p = gil(partition="a100-80gb", nodes=4, gpus_per_node=1)
    # Every type has a GPU to give: no constraint, and the defaults fit the smallest (I).
    assert p.constraint is None and p.node_types == ("K", "I", "J")
    assert (p.cpus_per_task, p.mem_mb) == (16, 250000)
    p = gil(partition="a100-80gb", nodes=4, gpus_per_node=1, cpus_per_task=64)
    assert p.constraint == "K|J" and p.node_types == ("K", "J")


def test_k_and_i_nodes_still_handled() -> None:
    assert gil(gpus_per_node=2, cpus_per_task=16).node_types == ("K", "I", "J")
    assert gil(gpus_per_node=2, cpus_per_task=32).node_types == ("K", "J")
    p = gil(gpus_per_node=2, cpus_per_task=32, launcher="torchrun")
    assert p.constraint is None and p.cpus_per_node == 32
    p = gil(gpus_per_node=2, cpus_per_task=64, launcher="torchrun")
    assert p.constraint == "K|J" and p.cpus_per_node == 64
    p = gil(gpus_per_node=2, cpus_per_task=32, launcher="torchrun", constraint="I")
    assert p.constraint == "I" and p.node_types == ("I",)
    assert p.cpus_per_task == 32


def test_four_gpus_on_a100_40gb_get_the_n_nodes() -> None:
    p = gil(partition="a100-40gb", gpus_per_node=4)
    assert p.constraint == "N" and p.node_types == ("N",)
    assert p.cpus_per_node == 48 and p.mem_mb == 1000000
    assert gil(partition="a100-40gb", gpus_per_node=4, constraint="nvlink").constraint == "nvlink"


def test_defaults_come_from_the_smallest_fitting_type() -> None:
    p = gil(partition="a30", gpus_per_node=3)
    assert p.constraint is None and p.cpus_per_node == 15  # 3 tasks on D's 16 cores
    p = gil(partition="a30", gpus_per_node=3, cpus_per_task=8)
    assert p.constraint == "B" and p.cpus_per_node == 24


def test_memory_narrows_the_types() -> None:
    p = gil(partition="a100-40gb", gpus_per_node=2, mem="900G")
    assert p.constraint == "N"


def test_mixed_gpu_models_leave_the_model_to_the_constraint() -> None:
    p = build_plan(JobRequest(profile=load_profile("raven"), gpus_per_node=4, constraint="gpu-bw"))
    assert p.gpu_option == "--gres=gpu:a100:4" and p.node_types == ("gpu-bw",)
    p = gil(partition="training", gpus_per_node=2)
    assert p.node_types == ("J", "L") and p.gpu_type is None


# Refusals list the types and what each allows


def test_no_type_has_the_cpus() -> None:
    err = gil_error(gpus_per_node=1, cpus_per_task=200)
    (msg,) = err.problems
    assert "1 task(s) x 200 CPUs = 200 CPUs per node" in msg
    assert (err.fix or "").startswith("--cpus-per-task 128 is accepted")
    assert "K: 2 GPUs, 64 CPUs, 512000 MB, 52 nodes, features K" in msg
    assert "I: 2 GPUs, 32 CPUs" in msg and "J: 4 GPUs, 128 CPUs" in msg


def test_no_type_has_the_memory() -> None:
    (msg,) = gil_refused(partition="a100-40gb", mem="2000G")
    assert "more than a a100-40gb node has (1000000 MB)" in msg
    assert "G: 2 GPUs, 128 CPUs, 512000 MB" in msg and "N: 4 GPUs, 48 CPUs" in msg


def test_constraint_without_the_gpus() -> None:
    err = gil_error(gpus_per_node=4, constraint="K")
    (msg,) = err.problems
    assert "no node type of partition a100-80gb with --constraint K has 4 GPUs" in msg
    assert "K: 2 GPUs" in msg
    # Four GPUs in all stay four: two K nodes of two, or one node of another type.
    assert err.fix is not None and (err.fix.startswith("--nodes 2 --gpus-per-node 2 is accepted")
                                    or "(1 node(s) x 4 GPU(s)" in err.fix), err.fix


def test_gpus_no_type_has() -> None:
    (msg,) = gil_refused(gpus_per_node=5)
    assert "5 GPUs on one node is impossible (4 per node" in msg
    assert "K: 2 GPUs; I: 2 GPUs; J: 4 GPUs" in msg


def test_node_counts_per_type() -> None:
    err = gil_error(gpus_per_node=4, nodes=3)
    (msg,) = err.problems
    assert "3 nodes asked, but partition a100-80gb has 2 node(s) that fit" in msg
    assert "J: 4 GPUs" in msg and err.fix is not None and " is accepted (" in err.fix
    assert gil(gpus_per_node=2, nodes=59).nodes == 59


def test_unknown_and_unparsed_constraints() -> None:
    assert "no constraint 'X'" in gil_refused(constraint="X")[0]
    assert "known: K, I, J" in gil_refused(constraint="X")[0]
    assert "understands one feature, A|B or A&B" in gil_refused(constraint="K&I|J")[0]
    assert "characters SLURM names never contain" in gil_refused(constraint="K;id")[0]
    (msg,) = gil_refused(constraint="K&I")
    assert "selects no node type" in msg


def test_user_or_constraint_narrowed_to_fitting_types() -> None:
    p = gil(gpus_per_node=2, cpus_per_task=64, launcher="torchrun", constraint="K|I")
    assert p.constraint == "K" and p.node_types == ("K",)
    assert gil(gpus_per_node=1, constraint="K|I").constraint == "K|I"


def test_several_nodes_say_why_they_get_the_smallest_types_gpus() -> None:
    """Review 2026-11-27, 25: Gilbreth --nodes 2 got 2 GPUs a node without a word."""
    p = gil(nodes=2)
    assert p.gpus_per_node == 2
    assert any(n.startswith("2 GPUs per node: the fewest of partition a100-80gb's node types")
               and "--gpus-per-node 4" in n for n in p.notes), p.notes
    assert not any("the fewest" in n for n in gil(nodes=2, gpus_per_node=2).notes)
