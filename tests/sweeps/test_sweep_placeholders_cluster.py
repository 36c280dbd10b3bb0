"""A sweep of an argparse script on the dev cluster: `{KEY}` placeholders put each point's
values where its options want them, and nothing Hydra-style is appended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.options.helpers import User
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster]

TRAIN_PY = """\
import argparse, json, os, sys
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, required=True)
p.add_argument("--name", required=True)
args = p.parse_args()
with open(os.path.join(os.environ["HPCTRAIN_RUN_DIR"], "args.json"), "w") as f:
    json.dump({"args": vars(args), "argv": sys.argv[1:]}, f)
"""


def test_an_argparse_script_gets_each_point_s_values(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    user = User(devcluster, tmp_path)
    (user.cwd / "train.py").write_text(TRAIN_PY)
    done = user.json("sweep", "--profile", "local", "--gpus-per-node", "1", "--time", "2",
                     "--no-monitor", "--grid", "optim.lr=0.1,0.03", "--grid", "tag=a b,-c",
                     "--name", "argparse", "--json",
                     "--", "python", "train.py", "--lr", "{optim.lr}", "--name=run {tag}")
    points = Path(done["run_dir"]) / "points"
    row = wait_for(lambda: [j for j in user.jobs() if j["name"].startswith("sweep argparse")],
                   300, "the sweep to end", until=lambda r: len(r) == 1 and r[0]["terminal"])
    assert row[0]["state"] == "COMPLETED", row
    expected = [("0.1", "a b"), ("0.1", "-c"), ("0.03", "a b"), ("0.03", "-c")]
    for n, (lr, tag) in enumerate(expected):
        got = json.loads((points / f"{n:03d}" / "args.json").read_text())
        assert got["argv"] == ["--lr", lr, f"--name=run {tag}"]
        assert got["args"] == {"lr": float(lr), "name": f"run {tag}"}
