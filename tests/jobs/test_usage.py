"""Your accounts' usage and fair share (issue 42), from recorded sacct, sshare and sprio output
of SLURM 22.05 (the dev cluster, with priority/basic and once switched to priority/multifactor).
On the dev cluster: tests/jobs/test_free_cluster.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpctrain.slurm import usage

RECORDED = Path(__file__).resolve().parent / "recorded" / "slurm-22.05"


def _at(clock: str) -> float:
    return time.mktime(time.strptime(f"2026-11-27T{clock}", "%Y-%m-%dT%H:%M:%S"))


def _read(name: str) -> str:
    return (RECORDED / name).read_text()


def test_gpu_hours_per_account_and_user_inside_the_period() -> None:
    sacct = _read("sacct_usage.txt")
    whole = usage.gpu_hours(sacct, _at("23:00:00"), _at("23:30:00"))
    # hpctrain-dev: 4 + 1 + 4x5 + 1 + 10 + 9 + 3x20 GPU-seconds; hpctrain-test: 4 GPUs x 30 s.
    # Steps of no TRES (cancelled before they started) count nothing.
    assert whole["hpctrain-dev"]["root"] == pytest.approx(105 / 3600)
    assert whole["hpctrain-test"]["root"] == pytest.approx(120 / 3600)
    # A job that began before the period counts from the period's start; one after `now`, not.
    late = usage.gpu_hours(sacct, _at("23:03:10"), _at("23:07:41"))
    assert late["hpctrain-dev"]["root"] == pytest.approx((1 + 10 + 9 + 3 * 10) / 3600)
    assert late["hpctrain-test"]["root"] == 0


def test_a_job_still_running_counts_until_now() -> None:
    line = "ana|lab|cpu=8,gres/gpu:a100=4,node=1|2026-11-27T23:00:00|Unknown\n"
    got = usage.gpu_hours(line, _at("22:00:00"), _at("23:30:00"))
    assert got == {"lab": {"ana": pytest.approx(4 * 0.5)}}
    assert usage.job_gpus("billing=2,cpu=2,gres/gpu=1,gres/gpu:a100=1") == 1
    assert usage.job_gpus("cpu=2,mem=1G") == 0


def test_fair_share_under_the_multifactor_plugin() -> None:
    found = usage.usage(_at("23:00:00"), _at("23:30:00"), _read("sacct_usage.txt"),
                        _read("sshare_usage_multifactor.txt"),
                        (0, _read("sprio_weights_multifactor.txt")),
                        _read("squeue_mine_gpus.txt"))
    assert found.fair_share_orders is True
    by = {a.account: a for a in found.accounts}
    assert list(by) == ["root", "ag_hpctrain_test", "hpctrain-dev", "hpctrain-test"]
    dev = by["hpctrain-dev"]
    assert (dev.fair_share, dev.shares, dev.usage) == (0.25, 0.25, 0.500003)
    assert dev.your_gpu_hours == pytest.approx(105 / 3600) == dev.gpu_hours
    assert by["hpctrain-test"].fair_share == 0.5
    assert found.held_gpu_hours == pytest.approx(2 * 2 * 598 / 3600 + 0.5)
    only = usage.only(found, ["hpctrain-test"])
    assert [a.account for a in only.accounts] == ["hpctrain-test"]


def test_under_priority_basic_fair_share_is_not_shown_as_a_number() -> None:
    found = usage.usage(_at("23:00:00"), _at("23:30:00"), _read("sacct_usage.txt"),
                        _read("sshare_usage_basic.txt"), (1, _read("sprio_weights_basic.txt")),
                        None)
    assert found.fair_share_orders is False
    assert all(a.fair_share is None and a.shares is None for a in found.accounts)
    assert found.held_gpu_hours is None
    assert found.as_dict()["accounts"][2] == {
        "account": "hpctrain-dev", "gpu_hours": round(105 / 3600, 3),
        "your_gpu_hours": round(105 / 3600, 3), "fair_share": None, "norm_shares": None,
        "effective_usage": None}


def test_without_sshare_the_accounts_come_from_the_jobs_and_yours_are_unknown() -> None:
    found = usage.usage(_at("23:00:00"), _at("23:30:00"), _read("sacct_usage.txt"), None,
                        (1, "sprio: error: Unable to contact slurm controller"), None)
    assert [a.account for a in found.accounts] == ["hpctrain-dev", "hpctrain-test"]
    assert all(a.your_gpu_hours is None for a in found.accounts)
    assert found.fair_share_orders is None


RECORDED_24 = RECORDED.parent / "slurm-24.11"


def test_slurm_24_11_multifactor_without_a_fair_share_weight() -> None:
    """The 24.11 dev cluster runs the multifactor plugin (24.11's default) with every weight
    0: sshare prints fair shares, but they order nothing, and sprio shows no FAIRSHARE."""
    read = {n: (RECORDED_24 / n).read_text() for n in (
        "sacct_usage.txt", "sshare_usage_site_weight.txt", "sprio_weights_site_only.txt",
        "squeue_mine_gpus.txt")}
    found = usage.usage(_at("23:00:00"), _at("23:30:00"), read["sacct_usage.txt"],
                        read["sshare_usage_site_weight.txt"],
                        (0, read["sprio_weights_site_only.txt"]), read["squeue_mine_gpus.txt"])
    assert (found.fair_share_orders, found.ordering) == (
        False, "priority/multifactor without a fair-share weight")
    dev = {a.account: a for a in found.accounts}["hpctrain-dev"]
    assert dev.gpu_hours == dev.your_gpu_hours == pytest.approx(2 * 40 / 3600)
    assert dev.fair_share is None
    # Two 1-GPU jobs with 4:54 left, a 2-node x 2-GPU job waiting for its 30 minutes.
    assert found.held_gpu_hours == pytest.approx(2 * 294 / 3600 + 2.0)
