"""Two ranks' identical tracebacks mixed line by line in one log (srun writes every task's
stderr into one file, unprefixed): the exception's frame is still the innermost one. Seen
under load in tests/diagnosis/test_why_cluster.py, where rank 0's exception line came before
rank 1's last frames and the frame named was the module's, not ratio()'s."""

from __future__ import annotations

import itertools

from hpctrain.diagnosis.logscan import scan

A = ['Traceback (most recent call last):',
     '  File "/r/code/pkg/exc.py", line 5, in <module>',
     '    ratio(0)',
     '  File "/r/code/pkg/exc.py", line 2, in ratio',
     '    return 1 / x',
     'ZeroDivisionError: division by zero']


def _mixes() -> list[list[str]]:
    """Every order of two copies of A that keeps each copy's own order."""
    out = []
    for picks in itertools.combinations(range(2 * len(A)), len(A)):
        first, second, mixed = iter(A), iter(A), []
        for i in range(2 * len(A)):
            mixed.append(next(first) if i in picks else next(second))
        out.append(mixed)
    return out


def test_the_innermost_frame_survives_any_interleaving() -> None:
    mixes = _mixes()
    assert len(mixes) == 924
    for lines in mixes:
        found = [f for f in scan("\n".join(lines) + "\n", "job.err") if f.kind == "exception"]
        assert found, lines
        frames = found[0].frames
        assert (frames[-1].line, frames[-1].func) == (2, "ratio"), lines
