"""SLURM states grouped once (slurm/states.py): every state in exactly one group."""

import pytest

from hpctrain.slurm import states
from hpctrain.slurm.states import JobState, StateGroup, parse_state


def test_every_state_has_one_group() -> None:
    sets = (states.PENDING, states.RUNNING, frozenset({JobState.COMPLETED}), states.FAILED)
    for state in JobState:
        member_of = [s for s in sets if state in s]
        assert len(member_of) == (0 if state is JobState.UNKNOWN else 1), state


@pytest.mark.parametrize(("text", "group"), [
    ("PD", StateGroup.PENDING), ("REQUEUE_HOLD", StateGroup.PENDING),
    ("SUSPENDED", StateGroup.PENDING), ("CG", StateGroup.RUNNING), ("R", StateGroup.RUNNING),
    ("COMPLETED", StateGroup.ENDED), ("CANCELLED by 1234", StateGroup.FAILED),
    ("OUT_OF_ME+", StateGroup.FAILED), ("BOOT_FAIL", StateGroup.FAILED),
    ("DEADLINE", StateGroup.FAILED), ("PREEMPTED", StateGroup.FAILED),
    ("NEW_STATE_2030", StateGroup.UNKNOWN),
])
def test_groups_as_people_read_them(text: str, group: StateGroup) -> None:
    assert parse_state(text).group is group


def test_ended_is_every_terminal_state() -> None:
    # The display shows an exit code for these even before the watcher cached the row.
    assert {JobState.COMPLETED, *states.FAILED} == states.ENDED
    assert all(s.is_terminal for s in states.ENDED)
    assert not any(s.is_terminal for s in states.PENDING | states.RUNNING)
