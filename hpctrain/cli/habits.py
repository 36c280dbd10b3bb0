"""sbatch options that hpctrain does not take, and what to write instead."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from hpctrain.plan.sbatch import hpctrain_spelling
from hpctrain.slurm.sbatch_options import SbatchArg, is_sbatch_option, parse_arg, takes_value

# sbatch options hpctrain leaves to sbatch but has a spelling of its own for.
_ALSO = {"export": "--env KEY=VALUE (repeatable)"}


def hint(option: str, command: str | None, takes_sbatch_arg: bool,
         argv: Sequence[str] | None = None) -> str:
    """What to write instead of `option`, which `command` does not take; its value is read
    from `argv` (the command line, sys.argv's by default)."""
    help_cmd = f"`hpctrain {command} --help`" if command else "`hpctrain --help`"
    if not is_sbatch_option(option.split("=", 1)[0]):
        # A typo of hpctrain's own (--profle): click has said which option it meant.
        return f"see {help_cmd}"
    given = _given(option, list(sys.argv[1:] if argv is None else argv))
    ours = hpctrain_spelling(given)
    if ours is not None:
        # --sbatch-arg would refuse it: hpctrain writes that line itself.
        return f"hpctrain's spelling: {ours}"
    value = given.value or "VALUE"
    passthrough = (f"--sbatch-arg={given.spelling}={value}" if given.spelling.startswith("--")
                   else f"--sbatch-arg='{given.spelling} {value}'")
    if given.value is None and not takes_value(str(given.name)):
        passthrough = f"--sbatch-arg={given.spelling}"
    if not takes_sbatch_arg:
        return f"hpctrain's spelling: {_ALSO[str(given.name)]}" if given.name in _ALSO \
            else f"see {help_cmd}"
    if given.name in _ALSO:
        return f"hpctrain's spelling: {_ALSO[str(given.name)]}; or pass it to sbatch as " \
            f"{passthrough}"
    return f"see {help_cmd}; an sbatch option reaches sbatch as {passthrough}"


def _given(option: str, argv: list[str]) -> SbatchArg:
    """The option as the command line gave it, with its value: `--gres=gpu:4`, `--gres gpu:4`,
    `-c8`, `-c 8`."""
    flag = option.split("=", 1)[0]
    name = parse_arg(flag).name
    for i, word in enumerate(argv):
        if word == "--":
            break
        if word.startswith(f"{flag}=") or (len(flag) == 2 and word.startswith(flag)
                                            and len(word) > 2):
            return parse_arg(word)
        if word == flag:
            following = argv[i + 1] if i + 1 < len(argv) else None
            if name and takes_value(name) and following and not following.startswith("-"):
                return parse_arg(f"{flag}={following}")
            return parse_arg(flag)
    return parse_arg(option)
