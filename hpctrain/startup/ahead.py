"""Questions a command will ask, started in threads while it goes on importing and planning.

A submit asks git and SLURM up to four things before its sbatch (the project's state for the
snapshot, its commit and dirty flag, the maintenance reservations), each a process of 2 ms
or more (git status of a large project: far more), one after the other, and between them it
spends 40 ms importing on one core. Started at once, their processes run beside the imports;
whoever needs an answer takes it with `answer`, which waits for it where it is not in yet.

Only the speed depends on this: an answer is taken once, by the same key it was started
under, and a question started under another key (or never started) is asked then, in the
caller's thread, as before. An error is raised to whoever takes the answer, as if asked
then. A question is asked a few milliseconds before the caller would have asked it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class _Question(threading.Thread):
    def __init__(self, ask: Callable[[], Any]) -> None:
        # A daemon: a command that ends without the answer (an error, a refused plan) does
        # not wait for it.
        super().__init__(daemon=True, name="hpctrain-ahead")
        self.ask = ask
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.ask()
        except BaseException as e:  # raised again in the thread that takes the answer
            self.error = e


_started: dict[Hashable, _Question] = {}
_lock = threading.Lock()


def start(key: Hashable, ask: Callable[[], Any]) -> None:
    """Ask `ask()` now in a thread, for `answer(key, ...)` to take."""
    with _lock:
        if key in _started:
            return
        question = _started[key] = _Question(ask)
    question.start()


def answer(key: Hashable, ask: Callable[[], T]) -> T:
    """What the question started under `key` answered (waiting for it), else `ask()`."""
    with _lock:
        question = _started.pop(key, None)
    if question is None:
        return ask()
    question.join()
    if question.error is not None:
        raise question.error
    return question.value


@contextmanager
def scope() -> Iterator[None]:
    """Answers for one command: what it started and did not take is dropped at its end, so
    that a process running several commands (the tests) never hands one command's answer to
    the next."""
    try:
        yield
    finally:
        with _lock:
            _started.clear()
