"""docs/tutorials.md's commands render the scripts kept in tests/unit/golden/tutorials/.

In the doc's ```bash blocks, a line `# golden: NAME` stands right above each `hpctrain render`
command (which may go on over lines ending in `\\`). Each command runs in-process, as a user
would type it, and its script must equal golden/tutorials/NAME.sh and pass `bash -n`.
HPCTRAIN_UPDATE_GOLDEN=1 rewrites the goldens. The script depends on nothing but the command:
no user profiles (HPCTRAIN_HOME is empty), the venv the job activates is /opt/venv, and the
`# Made by:` line is the command itself.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpctrain.cli import options
from hpctrain.profiles.model import Profile
from tests.unit.inproc import Cli, in_process

DOC = Path(__file__).resolve().parents[2] / "docs" / "tutorials.md"
GOLDEN = Path(__file__).parent / "golden" / "tutorials"
UPDATE = os.environ.get("HPCTRAIN_UPDATE_GOLDEN") == "1"
MARK = re.compile(r"#\s*golden:\s*(\S+)\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class DocCommand:
    golden: str
    line: int  # in the doc, 1-based, of the command's first line
    text: str  # the command, its continuation lines joined


def _bash_blocks(text: str) -> list[tuple[int, list[str]]]:
    """The ```bash blocks: (number of the block's first line, its lines)."""
    blocks: list[tuple[int, list[str]]] = []
    language: str | None = None  # of the block we are in; None outside blocks
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line.strip())
        if fence:
            language = fence.group(1) if language is None else None
            if language == "bash":
                blocks.append((number + 1, []))
        elif language == "bash":
            blocks[-1][1].append(line)
    return blocks


def _command_at(lines: list[str], i: int) -> str:
    """The command starting at lines[i], continuation lines (trailing `\\`) joined."""
    parts = []
    while True:
        line = lines[i].rstrip()
        parts.append(line.removesuffix("\\").strip())
        if not line.endswith("\\") or i + 1 >= len(lines):
            return " ".join(parts)
        i += 1


def parse_doc(text: str) -> tuple[list[DocCommand], list[str]]:
    """The doc's marked render commands, and what is ambiguous about the marking."""
    commands: list[DocCommand] = []
    problems: list[str] = []
    for start, lines in _bash_blocks(text):
        for i, line in enumerate(lines):
            mark = MARK.match(line.strip())
            is_render = line.strip().startswith("hpctrain render")
            after_mark = i > 0 and MARK.match(lines[i - 1].strip())
            if mark:
                if i + 1 >= len(lines) or not lines[i + 1].strip().startswith("hpctrain render"):
                    problems.append(f"line {start + i}: `# golden:` not followed by a render")
                    continue
                commands.append(DocCommand(mark.group(1), start + i + 1,
                                           _command_at(lines, i + 1)))
            elif is_render and not after_mark:
                problems.append(f"line {start + i}: `hpctrain render` without `# golden: NAME`")
    names = [c.golden for c in commands]
    problems += [f"golden {n!r} is named twice" for n in sorted(set(names)) if names.count(n) > 1]
    return commands, problems


COMMANDS, PROBLEMS = parse_doc(DOC.read_text(encoding="utf-8"))


def test_the_doc_has_commands_and_marks_each_one() -> None:
    assert COMMANDS, f"{DOC} has no `# golden: NAME` + `hpctrain render` commands"
    assert not PROBLEMS, "\n".join(PROBLEMS)


def test_every_golden_is_used() -> None:
    used = {f"{c.golden}.sh" for c in COMMANDS}
    unused = sorted(p.name for p in GOLDEN.glob("*.sh") if p.name not in used)
    assert not unused, f"no command in {DOC.name} renders {unused}: remove them"


def test_parser_finds_marked_commands_only() -> None:
    text = "\n".join([
        "```bash", "# golden: a", "hpctrain render --profile local \\", "  --nodes 2", "```",
        "```console", "hpctrain render --profile local", "```",
        "```bash", "hpctrain submit --profile local", "hpctrain render --profile raven", "```",
        "```bash", "# golden: a", "hpctrain submit x", "```",
    ])
    commands, problems = parse_doc(text)
    assert commands == [DocCommand("a", 3, "hpctrain render --profile local --nodes 2")]
    assert problems == ["line 11: `hpctrain render` without `# golden: NAME`",
                        "line 14: `# golden:` not followed by a render"]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> Cli:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    real = options.default_python_env

    def venv(profile: Profile) -> str | None:
        # The venv the tests run from differs by machine; a user's is /opt/venv here.
        return "/opt/venv" if profile.environment.python == "auto" else real(profile)

    monkeypatch.setattr(options, "default_python_env", venv)
    return in_process(monkeypatch, capsys)


@pytest.mark.parametrize("command", COMMANDS, ids=[c.golden for c in COMMANDS])
def test_doc_command_renders_its_golden(command: DocCommand, cli: Cli, tmp_path: Path) -> None:
    words = shlex.split(command.text)
    assert words[:2] == ["hpctrain", "render"], command
    ran = cli(*words[1:])
    assert ran.code == 0, f"{DOC.name} line {command.line}: {ran.err}"
    assert f"# Made by: {shlex.join(words)}\n" in ran.out
    golden = GOLDEN / f"{command.golden}.sh"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(ran.out)
    assert golden.exists(), f"missing {golden}; run with HPCTRAIN_UPDATE_GOLDEN=1 to create it"
    assert ran.out == golden.read_text(), (
        f"{DOC.name} line {command.line} no longer renders {golden.name}")
    script = tmp_path / "job.sh"
    script.write_text(ran.out)
    subprocess.run(["bash", "-n", str(script)], check=True)
