"""Did-you-mean: the known name a mistyped one most likely meant."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice `word` most likely misspells (case aside), if one is close enough."""
    import difflib

    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered:
        return lowered[word.lower()]
    # 0.6, difflib's own cutoff: `ravn` finds raven, `batchsize` batch_size, `xyz` nothing.
    found = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[found[0]] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean NAME?)` for a close choice, else nothing."""
    close = closest(word, choices)
    return f" (did you mean {close}?)" if close is not None and close != word else ""
