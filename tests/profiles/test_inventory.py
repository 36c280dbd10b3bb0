"""Parsers, discovery and checks on SLURM output recorded from the dev cluster (no SLURM here)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from hpctrain.files.resources import profiles_dir
from hpctrain.plan import JobRequest
from hpctrain.profiles import load_profile, load_profile_file
from hpctrain.profiles.check import check_profile
from hpctrain.profiles.discover import draft_profile, draft_yaml, read_cluster
from hpctrain.slurm import inventory as inv
from hpctrain.slurm.versions import NODES_TEXT_ARGV, SINFO_JSON_SINCE, dialect_for, parse_version

from .helpers import (
    RECORDED,
    SETS,
    USER,
    assert_same_profile,
    recorded_facts,
    recording,
    replay,
)

PROFILES = sorted(p.name for p in RECORDED.iterdir() if p.is_dir())


def test_every_shipped_profile_has_a_recording() -> None:
    """The tests below run on each recorded profile: a profile shipped without a recording
    would go unchecked (record it with recorded/record.py)."""
    assert sorted(p.stem for p in profiles_dir().glob("*.yaml")) == PROFILES


def test_versions() -> None:
    assert parse_version(recording("local", "sinfo_version")["stdout"]) == (22, 5)
    assert parse_version("slurm 23.11.4\n") == (23, 11)
    assert parse_version("slurm 21.08.8-2") >= SINFO_JSON_SINCE
    with pytest.raises(ValueError, match="no SLURM version"):
        parse_version("sinfo: command failed")


# (SLURM set, profile): every profile recorded on each SLURM.
VERSIONED = [(s, p) for s in SETS for p in PROFILES]


@pytest.mark.parametrize(("slurm", "profile"), VERSIONED)
def test_json_and_text_paths_agree(slurm: str, profile: str) -> None:
    """The JSON node path (sinfo's on 22.05, scontrol's on 24.11) and scontrol -o show node
    (every version) give the same nodes."""
    by_json = {n.name: n for n in inv.parse_nodes_json(
        recording(profile, "nodes_json", slurm)["stdout"]) or []}
    by_text = {n.name: n for n in inv.parse_nodes_text(
        recording(profile, "nodes", slurm)["stdout"])}
    assert by_json and by_json.keys() == by_text.keys()
    for name, node in by_text.items():
        assert dataclasses.replace(node, state="") == dataclasses.replace(by_json[name], state="")


@pytest.mark.parametrize(("slurm", "argv"), [
    ("slurm-22.05", ("sinfo", "--json")),
    ("slurm-24.11", ("scontrol", "show", "node", "--json")),
])
def test_discover_asks_each_version_for_its_json_node_list(slurm: str, argv: tuple[str, ...]
                                                           ) -> None:
    """From 23.02 sinfo --json lists groups of nodes, not nodes: scontrol's JSON is asked."""
    client = replay("gilbreth", slurm=slurm)
    facts = read_cluster(client, USER)
    assert argv in client.calls and NODES_TEXT_ARGV not in client.calls
    assert len(facts.nodes) == 18


def test_without_json_the_text_node_list_is_read() -> None:
    client = replay("gilbreth", slurm="slurm-24.11")
    client._dialect = dialect_for((24, 11), {"HPCTRAIN_SLURM_JSON": "0"})
    assert len(client.node_inventory()) == 18
    assert client.calls == [NODES_TEXT_ARGV]


@pytest.mark.parametrize("profile", PROFILES)
def test_partition_json_of_24_11_does_not_name_the_default(profile: str) -> None:
    """Why partitions stay on the text path (versions.py): the text names the default
    partition, 24.11's JSON nowhere does. Should a later SLURM add it, record it and switch."""
    text = recording(profile, "partitions", "slurm-24.11")["stdout"]
    doc = json.loads(recording(profile, "partitions_json", "slurm-24.11")["stdout"])
    assert "Default=YES" in text and [p["name"] for p in doc["partitions"]]
    assert "DEFAULT" not in json.dumps(doc).upper().replace("DEFAULTS", "")


def test_local_recording() -> None:
    facts = recorded_facts("local")
    assert facts.cluster == "hpctrain-dev" and facts.emulated
    (debug,) = facts.partitions
    assert (debug.name, debug.default, debug.max_time_s, debug.default_time_s) == (
        "debug", True, 7200, 1800)
    # The dev cluster's partition allows its own 2 nodes (profile local says so).
    assert (debug.max_nodes, debug.total_nodes, debug.allow_qos) == (2, 2, None)
    node = facts.nodes[0]
    assert (node.cpus, node.mem_mb, node.gpus, node.gpu_type, node.features) == (
        4, 4000, 2, "emu", ())
    assert node.partitions == ("debug",)
    assert "normal" in {q.name for q in facts.qos or []}
    assert "hpctrain-dev" in facts.accounts()


def test_oneliner_keeps_values_with_spaces() -> None:
    (rec, *_) = inv.parse_oneliners(recording("local", "nodes")["stdout"])
    assert rec["OS"].startswith("Linux ") and " " in rec["OS"]
    assert rec["NodeName"] == "node1" and rec["RealMemory"] == "4000"


@pytest.mark.parametrize(("gres", "expected"), [
    ("gpu:emu:2", (2, "emu")),
    ("gpu:a100:4(S:0-1)", (4, "a100")),
    ("gpu:2", (2, None)),
    ("(null)", (0, None)),
    ("gpu:a100:2(S:0),gpu:a100:2(S:1)", (4, "a100")),
    ("mps:100,gpu:a30:3", (3, "a30")),
])
def test_gres(gres: str, expected: tuple[int, str | None]) -> None:
    assert inv.parse_gres(gres) == expected


def test_sacctmgr_refused_is_recorded() -> None:
    off = recording("local", "sacctmgr_off")
    assert off["returncode"] != 0 and "accounting_storage" in off["stderr"]


@pytest.mark.parametrize("profile", PROFILES)
def test_draft_loads_back(profile: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    draft = draft_profile(recorded_facts(profile), "drafted", when="2026-01-01")
    path = tmp_path / "drafted.yaml"
    path.write_text(draft_yaml(draft))
    loaded = load_profile_file(path)
    assert loaded.name == "drafted" and loaded.cluster == "hpctrain-dev"
    assert {r.field for r in draft.review} >= {"nccl", "environment.modules", "shared_node"}
    assert "REVIEW nccl" in path.read_text()


def test_draft_equals_local() -> None:
    prof = load_profile("local")
    draft = draft_profile(recorded_facts("local"), "local")
    (part,) = draft.data["partitions"]
    want = prof.default_partition
    assert part["max_nodes"] == want.max_nodes and part["default"] is True
    assert part["max_time"] == "02:00:00" and part["default_time"] == "00:30:00"
    (t,) = part["node_types"]
    assert (t["gpus"], t["cpus"], t["mem_mb"], part["gpu_type"]) == (
        want.gpus_per_node, want.cpus_per_node, want.mem_per_node_mb, want.gpu_type)


def test_no_accounting_is_said() -> None:
    facts = recorded_facts("local", accounting=False)
    draft = draft_profile(facts, "x")
    assert "qos" not in draft.data and draft.accounts == []
    prof = dataclasses.replace(load_profile("gilbreth"), default_account="lab")
    report = check_profile(prof, facts)
    assert any("QOS not checked" in n for n in report.notes)
    assert any("default_account not checked" in n for n in report.notes)


@pytest.mark.parametrize(("slurm", "profile"), VERSIONED)
def test_draft_equals_the_emulated_profile(slurm: str, profile: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions, node types (Gilbreth's K, I, J ...) and limits come back as the profile has
    them, from either node path, on either SLURM."""
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    for json_nodes in (True, False):
        facts = recorded_facts(profile, json_nodes=json_nodes, slurm=slurm)
        path = tmp_path / f"{profile}-{json_nodes}.yaml"
        path.write_text(draft_yaml(draft_profile(facts, "drafted")))
        assert_same_profile(load_profile(profile), load_profile_file(path))


@pytest.mark.parametrize(("slurm", "profile"), VERSIONED)
def test_check_emulated_profile_matches(slurm: str, profile: str) -> None:
    report = check_profile(load_profile(profile), recorded_facts(profile, slurm=slurm))
    assert report.differences == [] and not report.fatal


def _changed_local(**changes: object) -> object:
    prof = load_profile("local")
    part = dataclasses.replace(prof.partitions[0], **changes)  # type: ignore[arg-type]
    return dataclasses.replace(prof, partitions=[part])


@pytest.mark.parametrize(("changes", "fatal", "words"), [
    ({"max_nodes": 8}, True, "max_nodes 8 in the profile, 2 on the cluster"),
    ({"max_nodes": 1}, False, "max_nodes 1 in the profile, 2 on the cluster"),
    ({"max_time": "04:00:00"}, True, "max_time 04:00:00 in the profile, 02:00:00"),
    ({"gpus_per_node": 4, "allowed_gpus_per_node": None}, True, "4 GPUs per node"),
    ({"mem_per_node_mb": 8000}, True, "8000 MB usable memory per node in the profile, 4000"),
    ({"cpus_per_node": 2}, False, "2 cores per node in the profile, 4 on the cluster"),
    ({"gpu_type": "a100"}, True, "GPU type a100 in the profile, emu on the cluster"),
    ({"default_constraint": "ib"}, True, "no nodes with features ib"),
    ({"name": "gpu"}, True, "partition missing on the cluster"),
])
def test_check_reports_each_difference(changes: dict[str, object], fatal: bool,
                                       words: str) -> None:
    report = check_profile(_changed_local(**changes), recorded_facts("local"))  # type: ignore[arg-type]
    assert any(words in d.message for d in report.differences), report.differences
    assert report.fatal is fatal


def test_probe_script_runs_here(tmp_path: Path) -> None:
    """The probe's body on this machine (real /sys, no nvidia-smi or IB): JSON comes back."""
    from hpctrain.plan import build_plan
    from hpctrain.profiles.probe import parse_findings
    from hpctrain.render.script import render_script
    from hpctrain.submission.probe import probe_script

    rendered = render_script(build_plan(JobRequest(profile=load_profile("raven"),
                                                   gpus_per_node=4, account="x")))
    script = probe_script(rendered)
    assert "#SBATCH --gres=gpu:a100:4" in script and "--signal" not in script
    assert "#SBATCH --account=x" in script
    path = tmp_path / "probe.sh"
    path.write_text(script)
    out = subprocess.run(["bash", str(path)], capture_output=True, text=True, check=True)
    findings = parse_findings(out.stdout)
    assert any(n["name"] == "lo" for n in findings.net)
    assert findings.summary()[0].startswith("node ")


def test_check_takes_the_smallest_of_one_type() -> None:
    """Two K nodes with a little less memory: the K type promises what the smallest has."""
    facts = recorded_facts("gilbreth")
    k1 = next(n for n in facts.nodes if n.name == "k1")
    nodes = [dataclasses.replace(n, mem_mb=500000) if n is k1 else n for n in facts.nodes]
    report = check_profile(load_profile("gilbreth"), dataclasses.replace(facts, nodes=nodes))
    assert [(d.where, d.message, d.fatal) for d in report.differences] == [
        ("gilbreth a100-80gb K",
         "512000 MB usable memory per node in the profile, 500000 on the cluster", True)]
