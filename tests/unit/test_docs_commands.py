"""Every `hpctrain` command shown in the README and docs/ that needs no cluster is run, and the
output a page shows after a `$ hpctrain ...` line must still be what it prints.

Runnable without a cluster: `render` (not `--check`), `profiles list|show|validate`, and
`--dry-run` of `submit`/`sweep`; each in an empty directory, with no SLURM and a history of its
own. A command naming a file the page does not provide (`my.yaml`, `--config big.yaml`) is
skipped, and so named in the skip list below: a page that stops showing runnable commands fails
the count at the end, not silently. The job's own command (after `--`) is only written into the
script, so the files it names need not exist. A user profile the page shows (a code block whose
first line is `# ~/.config/hpctrain/profiles/NAME.yaml`) is in place for the page's commands
after it, as it would be for a reader who followed the page.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# File arguments the examples name but do not provide: the page describes the user's own file.
_FILE = re.compile(r".+\.(ya?ml|csv|py|sh)$")
_FENCE = re.compile(r"^```(\w*)\s*$")
# The first line of a code block that shows a user profile: where the reader puts it.
_PROFILE = re.compile(r"^#\s*~/\.config/hpctrain/profiles/([\w.-]+\.ya?ml)\s*$")
# The fewest commands the pages must keep runnable (they show more today).
MIN_RUN = 15


@dataclass
class Example:
    page: str
    line: int
    argv: list[str]
    shown: list[str] = field(default_factory=list)
    # The user profiles the page has shown above the command: file name -> text.
    profiles: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    """Fenced code blocks: (line of the first line, lines)."""
    out: list[tuple[int, list[str]]] = []
    current: list[str] | None = None
    start = 0
    for n, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            if current is None:
                current, start = [], n + 1
            else:
                out.append((start, current))
                current = None
        elif current is not None:
            current.append(line)
    return out


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix() if page.is_relative_to(REPO) else page.name


def _examples(page: Path) -> list[Example]:
    found: list[Example] = []
    profiles: dict[str, str] = {}
    for start, lines in _blocks(page.read_text()):
        shown_profile = _PROFILE.match(lines[0].strip()) if lines else None
        if shown_profile:
            profiles = {**profiles, shown_profile.group(1): "\n".join(lines) + "\n"}
            continue
        joined: list[tuple[int, str]] = []
        for i, line in enumerate(lines):
            if joined and joined[-1][1].endswith("\\"):
                joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
            else:
                joined.append((start + i, line))
        current: Example | None = None
        for n, line in joined:
            text = line.strip()
            prompt = text.startswith("$ ")
            if text.startswith(("hpctrain ", "$ hpctrain ")):
                words = shlex.split(text.removeprefix("$ "), comments=True)
                # `| grep X` shows a part of the output: the command is what comes before.
                words = words[:words.index("|")] if "|" in words else words
                current = Example(_name(page), n, words[1:], profiles=profiles)
                found.append(current)
                if not prompt:
                    current = None  # output is shown only after a `$ ` prompt
            elif current is not None and text and not text.startswith("$"):
                current.shown.append(line.rstrip())
    return found


def _runnable(argv: list[str]) -> str | None:
    """Why the command cannot run here (None: it can)."""
    if not argv or any(a in ("...", "JOB", "NAME", "FILE", "P") or a.startswith("[")
                       for a in argv):
        return "a placeholder"
    if "--check" in argv:
        return "asks SLURM"
    command = argv[0]
    dry = "--dry-run" in argv
    if not (command == "render" or (command == "profiles" and argv[1:2] and argv[1] in
            ("list", "show", "validate")) or (command in ("submit", "sweep") and dry)):
        return "needs a cluster"
    # What follows `--` is the job's command: written into the script, never read here.
    own = argv[:argv.index("--")] if "--" in argv else argv
    if any(_FILE.match(a) and not a.startswith("-") for a in own[1:]) and "-o" not in own:
        return "names the user's own file"
    if "-o" in own and any(_FILE.match(a) for a in own[own.index("-o") + 2:]):
        return "names the user's own file"
    return None


def _all() -> list[Example]:
    return [e for page in PAGES for e in _examples(page)]


EXAMPLES = [e for e in _all() if _runnable(e.argv) is None]


def _run(example: Example, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env.update(HPCTRAIN_HOME=str(tmp_path / "home"), COLUMNS="200")
    if example.profiles:
        user = tmp_path / "home" / "config" / "profiles"
        user.mkdir(parents=True)
        for name, text in example.profiles.items():
            (user / name).write_text(text)
    return subprocess.run([sys.executable, "-m", "hpctrain", *example.argv], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_a_docs_command_runs_and_prints_what_the_page_shows(example: Example,
                                                             tmp_path: Path) -> None:
    res = _run(example, tmp_path)
    said = res.stdout + res.stderr
    fails = any(line.startswith("Error:") for line in example.shown)
    assert (res.returncode != 0) == fails, f"{example.id}: {example.argv}\n{said}"
    for line in example.shown:
        if "..." in line:
            continue
        assert " ".join(line.split()) in " ".join(said.split()), (
            f"{example.id} shows a line the command no longer prints: {line!r}\n{said}")


def test_the_pages_keep_runnable_commands() -> None:
    assert len(EXAMPLES) >= MIN_RUN, [e.id for e in EXAMPLES]
    shown = [e for e in EXAMPLES if e.shown]
    assert shown, "no page shows a command's output any more"


def test_a_page_s_user_profile_is_in_place_for_its_commands_after_it(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\nhpctrain render -P raven -- python train.py | grep account\n```\n"
                    "```yaml\n# ~/.config/hpctrain/profiles/raven.yaml\nextends: raven\n"
                    "default_account: ab12\n```\n"
                    "```console\n$ hpctrain render -P raven -- python train.py | grep account\n"
                    "#SBATCH --account=ab12\n```\n")
    before, after = _examples(page)
    # The job's own `train.py` need not exist: render only writes it into the script.
    assert _runnable(before.argv) is None and _runnable(after.argv) is None
    assert before.profiles == {} and "default_account: ab12" in after.profiles["raven.yaml"]
    (tmp_path / "a").mkdir()
    assert "--account=ab12" not in _run(before, tmp_path / "a").stdout
    assert "#SBATCH --account=ab12" in _run(after, tmp_path / "b").stdout
