"""Node states from sinfo, and which nodes `up` resumes, on output recorded from the dev cluster."""

from __future__ import annotations

from hpctrain.devcluster.nodes import READY_STATES, nodes_to_resume
from hpctrain.slurm.parsers import parse_sinfo_node_states

# `sinfo --noheader --Node --format='%N %t'`, local profile, after
# `scontrol update NodeName=node2 State=DRAIN Reason=recording`.
REC_LOCAL_DRAINED = "node1 idle\nnode2 drain\n"
# The same on marvin: each node is in four partitions, so sinfo lists it four times.
REC_MARVIN = "".join(f"{n} idle\n" * 4 for n in ("mlgpu1", "mlgpu2", "sgpu1", "sgpu2"))


def test_node_states_one_per_node() -> None:
    assert parse_sinfo_node_states(REC_LOCAL_DRAINED) == {"node1": "idle", "node2": "drain"}
    assert parse_sinfo_node_states(REC_MARVIN) == {
        "mlgpu1": "idle", "mlgpu2": "idle", "sgpu1": "idle", "sgpu2": "idle"}
    assert parse_sinfo_node_states("") == {}


def test_drained_nodes_are_resumed_once_and_unresponsive_ones_not() -> None:
    states = parse_sinfo_node_states(REC_LOCAL_DRAINED)
    assert nodes_to_resume(states, set()) == ["node2"]
    assert nodes_to_resume(states, {"node2"}) == []
    # A trailing * means slurmd does not answer: resuming would not help.
    states = {"a": "down*", "b": "down", "c": "drng", "d": "mix", "e": "drain*"}
    assert nodes_to_resume(states, set()) == ["b", "c"]


def test_a_node_planned_for_a_pending_job_can_take_jobs() -> None:
    # Seen on the dev cluster (22.05.8) while a 2-node job waited for node1: "node2 plnd".
    states = parse_sinfo_node_states("node1 alloc\nnode2 plnd\n")
    assert all(states[n] in READY_STATES for n in ("node1", "node2"))
    assert nodes_to_resume(states, set()) == []
    assert not {"drain", "drng", "down", "down*"} & set(READY_STATES)
