"""Waiting for events instead of sleeping, and timing checks relative to a baseline.

The suite must hold on a shared 2-core machine with CPU hogs beside it, so a test never
asserts a wall-clock constant. It waits for the event it means (a file, a state, a line)
with `wait_for`, whose timeout is only how long to wait before failing loudly; and where
speed is the feature ("fails at once instead of hanging"), `assert_prompt` compares the
time taken with a baseline measured in the same test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

POLL_S = 0.1


def wait_for(check: Callable[[], T], timeout_s: float, what: str, *,
             until: Callable[[T], object] = bool, poll_s: float = POLL_S) -> T:
    """Call `check` until `until` accepts its value (by default: until it is truthy) and
    return that value; after `timeout_s` raise AssertionError naming `what` and the last
    value seen. The timeout is only how long to wait before failing: make it generous."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"no {what} after {timeout_s:g} s (last seen: {value!r})")
        time.sleep(poll_s)


def timed(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> tuple[T, float]:
    """`call(*args, **kwargs)`'s result and the wall seconds it took."""
    start = time.monotonic()
    result = call(*args, **kwargs)
    return result, time.monotonic() - start


def assert_prompt(took_s: float, baseline_s: float, what: str, *, factor: float = 5.0,
                  plus_s: float = 0.0) -> None:
    """`what` took at most `factor` times the baseline (a comparable call measured in the same
    test, under the same load) plus `plus_s`, a wait the code itself promises (a probe delay,
    a timeout)."""
    bound = factor * baseline_s + plus_s
    assert took_s <= bound, (
        f"{what} took {took_s:.2f} s, more than {factor:g} x the baseline {baseline_s:.2f} s"
        f" + {plus_s:g} s: it waited instead of failing at once")
