"""`why` tells a container that could not start the ranks from a training failure, with the
fix, on the logs of real jobs of the dev cluster (recorded/charliecloud-0.31/, by save_job.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpctrain.diagnosis.causes import diagnose
from hpctrain.diagnosis.logscan import scan
from hpctrain.diagnosis.model import Evidence
from tests.diagnosis.test_recorded import SETS, _sacct

RECORDED = Path(__file__).resolve().parent / "recorded" / "charliecloud-0.31"

# case -> (what the finding says, words of the summary, words of the fix, the headline)
EXPECTED = {
    "image_missing": ("image_missing", "does not exist on the node: /no/such/image",
                      "as the nodes see it", "container: image missing"),
    "bind_missing": ("bind_missing", "does not exist on the node: /no/such/dir",
                     "--container-bind a SRC", "container: bind missing"),
    "command_missing": ("command_missing", "not in the container: python",
                        "--container-python image", "container: command missing"),
    "user_not_set": ("user_unset", "$USER is not set", "export USER", "container: user unset"),
}


def _evidence(case: Path) -> Evidence:
    findings = [f for name in ("stdout.log", "stderr.log")
                for f in scan((case / name).read_text(), name)]
    return Evidence(job_id="1", accounting=_sacct(case), findings=tuple(findings))


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_a_container_that_never_started_the_ranks_is_the_cause(case: str) -> None:
    what, summary, fix, headline = EXPECTED[case]
    ev = _evidence(RECORDED / case)
    (found,) = [f for f in ev.findings if f.kind == "container"][:1]
    assert found.info["what"] == what
    got = diagnose(ev)
    assert got.cause == "container", got
    assert got.summary.startswith("the ranks never started: ") and summary in got.summary
    assert fix in got.fix and got.headline == headline
    assert got.evidence[0].startswith("stderr.log:")


def test_a_training_failure_is_no_container_failure() -> None:
    # A job whose program raised (recorded without a container) keeps its own cause.
    case = SETS[0] / "exception"
    findings = [f for name in ("stdout.log", "stderr.log") for f in scan((case / name).read_text(),
                                                                            name)]
    assert not [f for f in findings if f.kind == "container"]
    assert diagnose(Evidence(job_id="1", accounting=_sacct(case),
                             findings=tuple(findings))).cause == "exception"


@pytest.mark.parametrize(("line", "what", "path"), [
    ("hpctrain: container runtime apptainer not found on node7", "runtime_missing", "apptainer"),
    ("hpctrain: container image not found on node1: /scratch/my image.sif", "image_missing",
     "/scratch/my image.sif"),
    ("ch-run[12]: error: can't mkdir: /img/root/no: Read-only file system (ch_misc.c:409 30)",
     "bind_target_missing", "/img/root/no"),
    ("ch-run[25582]: error: can't stat: /nonexistent/image: No such file or directory "
     "(ch_core.c:255 2)", "image_missing", "/nonexistent/image"),
    ("ch-run[9]: error: something new (ch_core.c:1)", "other", "something new"),
])
def test_each_container_line_is_read(line: str, what: str, path: str) -> None:
    # ch-run 0.31's words, as it printed them on this machine (docs/containers.md).
    (found,) = scan(line + "\n", "stderr.log")
    assert (found.kind, found.info["what"], found.info["path"]) == ("container", what, path)


def test_ch_run_0_38_says_the_same_in_its_own_words() -> None:
    # Debian 13's ch-run 0.38, the 24.11 lane's runtime: each error as it printed it there
    # (recorded/charliecloud-0.38/, MANIFEST.json says how), read as 0.31's.
    text = (RECORDED.parent / "charliecloud-0.38" / "ch-run-errors.txt").read_text()
    found = [(f.info["what"], f.info["path"]) for f in scan(text, "stderr.log")]
    assert found == [("image_missing", "/no/such/image"), ("bind_missing", "/no/such/dir"),
                     ("bind_target_missing", "/root/.cache/hpctrain/container-image/root/no"),
                     ("command_missing", "no-such-python"), ("user_unset", "")]
