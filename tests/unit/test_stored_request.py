"""request.json: a job's request as its run directory keeps it, read back for `rerun`."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hpctrain.errors import HpctrainError
from hpctrain.plan import JobRequest, build_plan
from hpctrain.plan.stored import request_from_json, request_json
from hpctrain.profiles import load_profile
from hpctrain.trainconfig.load import load_config


def _request() -> JobRequest:
    trainer = load_config(None, "spiral", ["optim.lr=0.25", "trainer.max_epochs=3"])
    return JobRequest(
        profile=load_profile("local"), nodes=2, time="0:30:00", job_name="it's; $(x)",
        launcher="torchrun", env={"A": "1 2", "B": "'q'"}, sbatch_args=("--hold",),
        trainer=trainer, trainer_args=("--resume",), after=("12",), chain=3,
        in_place=("data",), grace_s=90, requeue=False, monitor_interval_s=None,
        run_dir="/runs/x", log_dir="/runs/x", code_dir="/runs/x/code", race="1x2")


def test_a_request_reads_back_as_it_was_asked() -> None:
    req = _request()
    back = request_from_json(request_json(req), req.profile, "request.json")
    # What one submission decided (where it writes, its race) is not part of the request.
    assert back == dataclasses.replace(req, run_dir=None, log_dir=None, code_dir=None,
                                       race=None)
    assert build_plan(back).command == build_plan(dataclasses.replace(req, race=None)).command


@pytest.mark.parametrize(("text", "says"), [
    ("{", "not a request hpctrain can read"),
    ('{"format": 9, "request": {}}', "format 9"),
    ('{"format": 1, "request": {"nodes": 2, "gpus": 4}}', "unknown fields gpus"),
    ('{"format": 1, "request": {"trainer": {"optim": {"lr": "fast"}}}}',
     "trainer settings do not validate"),
])
def test_a_damaged_request_is_refused_by_name(text: str, says: str) -> None:
    with pytest.raises(HpctrainError, match=says) as e:
        request_from_json(text, load_profile("local"), "/r/request.json")
    assert "/r/request.json" in e.value.what


def test_the_json_names_every_option_and_nothing_of_the_profile() -> None:
    data = json.loads(request_json(_request()))["request"]
    assert data["env"] == {"A": "1 2", "B": "'q'"} and data["trainer"]["optim"]["lr"] == 0.25
    assert not {"profile", "run_dir", "race", "preview"} & set(data)
