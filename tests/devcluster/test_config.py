"""The pure part of the dev cluster: profile -> node groups and config text."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from hpctrain.devcluster.accounting import AccountingState, accounting_commands, parse_accounting
from hpctrain.devcluster.conffiles import (
    SlurmConfigs,
    gres_device_files,
    render_gres_conf,
    render_mysql_init,
    render_slurm_conf,
    render_slurmdbd_conf,
    write_files,
)
from hpctrain.devcluster.hosts import hosts_has_line, update_hosts
from hpctrain.devcluster.layout import Layout, Ports, is_plain
from hpctrain.devcluster.state import export_line
from hpctrain.devcluster.topology import DEFAULT_NODES, plan_cluster
from hpctrain.errors import DevClusterError, HpctrainError
from hpctrain.profiles import load_profile
from hpctrain.profiles.model import Constraint, Partition, Profile, Qos
from hpctrain.values.units import format_time

GOLDEN = Path(__file__).parent / "golden"
LAYOUT = Layout.for_dir(Path("/srv/hpctrain/state/devcluster"))
SHIPPED = ["local", "raven", "gilbreth", "marvin"]
# Expected node groups, one per node type: partitions sharing a type (same shape and
# features) share its nodes.
GROUPS = {
    "local": [("node", ("debug",))],
    "raven": [("gpu", ("gpu", "gpudev")), ("gpu-bw", ("gpu",))],
    "gilbreth": [
        ("k", ("a100-80gb",)),
        ("i", ("a100-80gb",)),
        ("j", ("a100-80gb", "training")),
        ("g", ("a100-40gb",)),
        ("n", ("a100-40gb",)),
        ("l", ("training",)),
        ("b", ("a30",)),
        ("d", ("a30",)),
        ("h", ("a10",)),
    ],
    "marvin": [
        ("sgpu", ("sgpu_devel", "sgpu_short", "sgpu_medium", "sgpu_long")),
        ("mlgpu", ("mlgpu_devel", "mlgpu_short", "mlgpu_medium", "mlgpu_long")),
    ],
}


def _conf_lines(text: str, key: str) -> list[dict[str, str]]:
    """slurm.conf lines starting with key=..., as dicts of their KEY=VALUE words."""
    out = []
    for line in text.splitlines():
        if line.startswith(f"{key}="):
            out.append(dict(w.split("=", 1) for w in line.split()))
    return out


def _setting(text: str, key: str) -> str:
    found = [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]
    assert len(found) == 1, f"{key} appears {len(found)} times"
    return found[0]


@pytest.mark.parametrize("name", SHIPPED)
def test_groups_follow_node_shapes(name: str) -> None:
    plan = plan_cluster(load_profile(name))
    assert [(g.prefix, g.partitions) for g in plan.groups] == GROUPS[name]
    assert all(len(g.nodes) == DEFAULT_NODES for g in plan.groups)


@pytest.mark.parametrize("name", SHIPPED)
def test_slurm_conf_carries_the_profile(name: str) -> None:
    prof = load_profile(name)
    plan = plan_cluster(prof)
    text = render_slurm_conf(plan, LAYOUT, "devhost")
    assert _setting(text, "ClusterName") == "hpctrain-dev"
    assert _setting(text, "EnforcePartLimits") == "ALL"
    assert _setting(text, "SlurmdParameters") == "config_overrides"
    assert _setting(text, "SelectTypeParameters") == "CR_Core_Memory"
    assert _setting(text, "SlurmctldPort") == "16817"
    assert _setting(text, "AccountingStoragePort") == "16819"
    # cred_expire=10: a requeued job waits 11 s, not SLURM's default 121 s.
    assert _setting(text, "AuthInfo") == f"socket={LAYOUT.munge_socket},cred_expire=10"
    # state.json and the published pointer name this slurm.conf; status checks this pid file.
    assert LAYOUT.slurm_conf == LAYOUT.root / "etc" / "slurm.conf"
    assert _setting(text, "SlurmctldPidFile") == str(LAYOUT.root / "run" / "slurmctld.pid")

    nodes = {n["NodeName"]: n for n in _conf_lines(text, "NodeName")}
    parts = {p["PartitionName"]: p for p in _conf_lines(text, "PartitionName")}
    assert list(parts) == [p.name for p in prof.partitions]
    assert [p for p, v in parts.items() if v["Default"] == "YES"] == [prof.default_partition.name]
    ports = [int(n["Port"]) for n in nodes.values()]
    assert ports == list(range(17001, 17001 + len(nodes)))
    for p in prof.partitions:
        line = parts[p.name]
        assert line["MaxTime"] == format_time(p.max_seconds)
        assert line.get("MaxNodes") == (str(p.max_nodes) if p.max_nodes else None)
        assert line.get("AllowQos") == p.required_qos
        shapes = {
            (str(t.cpus), str(t.mem_mb), f"gpu:{p.gpu_type_of(t)}:{t.gpus}",
             ",".join(t.features) or None)
            for t in p.types()
        }
        seen = set()
        for node in line["Nodes"].split(","):
            shape = nodes[node]
            seen.add((shape["CPUs"], shape["RealMemory"], shape["Gres"], shape.get("Feature")))
        assert seen == shapes, p.name
    for name_ in nodes:
        assert re.fullmatch(r"[a-z][a-z0-9-]*[0-9]", name_), name_


def test_raven_limits_and_features() -> None:
    text = render_slurm_conf(plan_cluster(load_profile("raven")), LAYOUT, "devhost")
    parts = {p["PartitionName"]: p for p in _conf_lines(text, "PartitionName")}
    assert parts["gpu"]["MaxTime"] == "1-00:00:00"
    assert parts["gpu"]["MaxNodes"] == "80"
    assert parts["gpudev"]["MaxTime"] == "00:15:00"
    assert parts["gpudev"]["MaxNodes"] == "1"
    nodes = {n["NodeName"]: n for n in _conf_lines(text, "NodeName")}
    assert nodes["gpu1"]["Feature"] == "gpu" and nodes["gpu-bw1"]["Feature"] == "gpu-bw,gpu"
    for node in nodes.values():
        assert (node["CPUs"], node["RealMemory"], node["Gres"]) == ("72", "500000", "gpu:a100:4")
    assert parts["gpu"]["Nodes"] == "gpu1,gpu2,gpu-bw1,gpu-bw2"
    assert parts["gpudev"]["Nodes"] == "gpu1,gpu2"


def test_gilbreth_training_requires_its_qos() -> None:
    prof = load_profile("gilbreth")
    plan = plan_cluster(prof)
    text = render_slurm_conf(plan, LAYOUT, "devhost")
    allow = {p["PartitionName"]: p.get("AllowQos") for p in _conf_lines(text, "PartitionName")}
    assert allow == {"a100-80gb": None, "a100-40gb": None, "training": "training",
                     "a30": None, "a10": None}
    assert {q.name: q.max_wall_s for q in plan.qos} == {
        "normal": 14 * 86400, "standby": 4 * 3600, "training": 24 * 3600}


def test_local_slurm_conf_matches_golden() -> None:
    text = render_slurm_conf(plan_cluster(load_profile("local")), LAYOUT, "devhost")
    assert text == (GOLDEN / "local-slurm.conf").read_text()


def test_gres_conf_backs_each_gpu_by_a_file() -> None:
    plan = plan_cluster(load_profile("gilbreth"))
    text = render_gres_conf(plan, LAYOUT)
    assert "AutoDetect=off" in text
    assert f"NodeName=j1,j2 Name=gpu Type=a100-80gb File={LAYOUT.dev}/gpu[0-3]" in text
    assert f"NodeName=l1,l2 Name=gpu Type=h100 File={LAYOUT.dev}/gpu[0-1]" in text
    assert f"NodeName=b1,b2 Name=gpu Type=a30 File={LAYOUT.dev}/gpu[0-2]" in text
    files = gres_device_files(plan, LAYOUT)
    assert files == [LAYOUT.dev / f"gpu{i}" for i in range(4)]


def _profile(partitions: list[Partition], qos: list[Qos] | None = None) -> Profile:
    return Profile(name="custom", cluster="custom", partitions=partitions, qos=qos or [])


def test_untyped_and_gpuless_partitions() -> None:
    prof = _profile([
        Partition(name="gpu.small", gpus_per_node=2, cpus_per_node=8, mem_per_node_mb=8000,
                  max_time="1:00:00", default=True),
        Partition(name="cpu_only", gpus_per_node=0, cpus_per_node=16, mem_per_node_mb=32000,
                  max_time="2:00:00"),
    ])
    plan = plan_cluster(prof, nodes_per_group=1)
    assert [g.prefix for g in plan.groups] == ["gpu-small", "cpu-only"]
    text = render_slurm_conf(plan, LAYOUT, "devhost")
    nodes = {n["NodeName"]: n for n in _conf_lines(text, "NodeName")}
    assert nodes["gpu-small1"]["Gres"] == "gpu:2"
    assert "Gres" not in nodes["cpu-only1"]
    gres = render_gres_conf(plan, LAYOUT)
    assert f"NodeName=gpu-small1 Name=gpu File={LAYOUT.dev}/gpu[0-1]" in gres
    assert "cpu-only1" not in gres


def test_same_prefix_groups_stay_distinct() -> None:
    prof = _profile([
        Partition(name="a_x", gpus_per_node=1, cpus_per_node=8, mem_per_node_mb=8000,
                  max_time="1:00:00"),
        Partition(name="a_y", gpus_per_node=1, cpus_per_node=8, mem_per_node_mb=8000,
                  max_time="2:00:00"),
        Partition(name="a", gpus_per_node=2, cpus_per_node=8, mem_per_node_mb=8000,
                  max_time="2:00:00", constraints=[Constraint(name="fast")]),
    ])
    plan = plan_cluster(prof)
    assert [g.prefix for g in plan.groups] == ["a", "ag2"]
    assert len(set(plan.node_names)) == len(plan.node_names) == 4


def test_nodes_option_caps_per_group_and_total() -> None:
    plan = plan_cluster(load_profile("marvin"), nodes_per_group=3)
    assert plan.node_names == ["sgpu1", "sgpu2", "sgpu3", "mlgpu1", "mlgpu2", "mlgpu3"]
    assert plan.node_ports() == {n: 17001 + i for i, n in enumerate(plan.node_names)}
    with pytest.raises(ValueError, match="slurmd"):
        plan_cluster(load_profile("gilbreth"), nodes_per_group=5)
    with pytest.raises(ValueError):
        plan_cluster(load_profile("local"), nodes_per_group=0)


def test_default_mem_per_cpu_is_the_cpus_share() -> None:
    plan = plan_cluster(load_profile("local"))
    assert plan.partitions[0].def_mem_per_cpu == 1000


def test_layout_keeps_socket_paths_short() -> None:
    short = Layout.for_dir(Path("/srv/dc"))
    assert short.socket_dir == Path("/srv/dc/run")
    deep = Path("/very/" + "long/" * 20 + "devcluster")
    long = Layout.for_dir(deep)
    assert long.socket_dir.parent == Path("/tmp")
    assert long.socket_dir == Layout.for_dir(deep).socket_dir  # stable across runs
    assert long.socket_dir != Layout.for_dir(deep / "other").socket_dir
    assert len(str(long.munge_socket)) < 100 and len(str(long.mysql_socket)) < 100
    # slurmstepd's socket: <spool>/<node>/<node>_<job>.<step>, node names up to 16 chars.
    for layout in (short, long, Layout.for_dir(Path("/" + "x" * 39))):
        stepd = f"{layout.slurmd_spool}/{'n' * 16}/{'n' * 16}_4294967295.4294967295"
        assert len(stepd) < 108, layout


@pytest.mark.parametrize("name", ["a b", "it's", 'say "hi"', "#1", "a,b", "100%", "back\\slash"])
def test_config_files_name_an_odd_root_through_a_plain_alias(name: str) -> None:
    root = Path("/srv") / name / "devcluster"
    layout = Layout.for_dir(root)
    named = layout.as_named()
    assert layout.socket_dir.parent == Path("/tmp") and is_plain(layout.socket_dir)
    assert named.root == layout.alias == layout.socket_dir / "home"
    plan = plan_cluster(load_profile("raven"))
    texts = [render_slurm_conf(plan, layout, "host"), render_gres_conf(plan, layout),
             render_slurmdbd_conf(layout, Ports(), "pw")]
    for text in texts:
        assert name not in text
        assert str(named.root) in text
    assert _setting(texts[0], "StateSaveLocation") == str(named.state_save)
    assert LAYOUT.as_named() is LAYOUT, "a plain root is named as it is"


def test_export_line_is_quoted_for_the_shell() -> None:
    assert export_line(Path("/srv/dc/etc/slurm.conf")) == "export SLURM_CONF=/srv/dc/etc/slurm.conf"
    assert export_line("/a b/it's/slurm.conf") == "export SLURM_CONF='/a b/it'\"'\"'s/slurm.conf'"


def test_node_names_stay_short_and_valid() -> None:
    prof = _profile([
        Partition(name="Very_Long.Partition-Name_2024", gpus_per_node=1, cpus_per_node=8,
                  mem_per_node_mb=8000, max_time="1:00:00"),
        Partition(name="9lives", gpus_per_node=2, cpus_per_node=8, mem_per_node_mb=8000,
                  max_time="1:00:00"),
    ])
    plan = plan_cluster(prof, nodes_per_group=12)
    assert [g.prefix for g in plan.groups] == ["very-long", "n9lives"]
    assert plan.node_names[-1] == "n9lives12"
    assert all(len(n) <= 16 for n in plan.node_names)


def test_slurmdbd_conf_and_mysql_init() -> None:
    text = render_slurmdbd_conf(LAYOUT, Ports(), "s3cret-_x")
    assert "StorageHost=127.0.0.1" in text.splitlines()
    assert "StoragePort=13306" in text.splitlines()
    assert "DbdPort=16819" in text.splitlines()
    assert f"AuthInfo=socket={LAYOUT.munge_socket}" in text.splitlines()
    sql = render_mysql_init("s3cret-_x")
    assert "'slurm'@'127.0.0.1' IDENTIFIED BY 's3cret-_x'" in sql
    with pytest.raises(ValueError):
        render_mysql_init("x'; DROP DATABASE mysql; --")


def test_hosts_line_is_idempotent_and_replaces_its_own_line() -> None:
    base = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n"
    once = update_hosts(base, ["node1", "node2"])
    assert once == base + "127.0.0.1 node1 node2 # hpctrain-devcluster\n"
    assert update_hosts(once, ["node1", "node2"]) == once
    swapped = update_hosts(once, ["sgpu1", "mlgpu1"])
    assert swapped == base + "127.0.0.1 sgpu1 mlgpu1 # hpctrain-devcluster\n"
    assert hosts_has_line(swapped, ["sgpu1", "mlgpu1"])
    assert not hosts_has_line(swapped, ["node1", "node2"])


# Recorded from the dev cluster emulating gilbreth (sacctmgr -n -P show ...).
REC_QOS = (
    "normal|14-00:00:00|DenyOnLimit\n"
    "standby|04:00:00|DenyOnLimit\n"
    "training|1-00:00:00|DenyOnLimit\n"
)
REC_ASSOC = (
    "|root|normal\n"
    "root|root|normal,standby,training\n"
    "|ag_hpctrain_test|normal\n"
    "root|ag_hpctrain_test|normal,standby,training\n"
    "|hpctrain-dev|normal\n"
    "root|hpctrain-dev|normal,standby,training\n"
    "|hpctrain-test|normal\n"
    "root|hpctrain-test|normal,standby,training\n"
)
REC_ACCOUNTS = "ag_hpctrain_test\nhpctrain-dev\nhpctrain-test\nroot\n"


def test_accounting_from_scratch_then_converged() -> None:
    plan = plan_cluster(load_profile("gilbreth"))
    cmds = accounting_commands(plan, AccountingState(), ["root"])
    flat = [" ".join(c) for c in cmds]
    assert flat[0] == "sacctmgr -i add cluster hpctrain-dev"
    assert "sacctmgr -i add qos training MaxWall=1-00:00:00 Flags=DenyOnLimit" in flat
    assert "sacctmgr -i add qos normal MaxWall=14-00:00:00 Flags=DenyOnLimit" in flat
    assert any(f.startswith("sacctmgr -i add account hpctrain-dev ") for f in flat)
    assert any(f.startswith("sacctmgr -i add user root Account=hpctrain-dev,hpctrain-test,")
               for f in flat)
    assert any("QOS=normal,standby,training" in f for f in flat)

    state = parse_accounting("hpctrain-dev\n", REC_QOS, REC_ACCOUNTS, REC_ASSOC,
                             "root|hpctrain-dev\n")
    assert accounting_commands(plan, state, ["root"]) == []


def test_accounting_follows_a_profile_switch() -> None:
    state = parse_accounting("hpctrain-dev\n", REC_QOS, REC_ACCOUNTS, REC_ASSOC,
                             "root|hpctrain-dev\n")
    flat = [" ".join(c) for c in accounting_commands(plan_cluster(load_profile("raven")),
                                                     state, ["root", "alice"])]
    # normal loses gilbreth's 14-day cap; root's associations drop the gilbreth QOS.
    assert ("sacctmgr -i modify qos where name=normal set MaxWall=-1 Flags=DenyOnLimit"
            in flat)
    assert any(f.startswith("sacctmgr -i modify user where name=root") and "QOS=normal" in f
               for f in flat)
    assert any(f.startswith("sacctmgr -i add user alice ") for f in flat)
    assert not any("add cluster" in f or "add account" in f for f in flat)


def test_a_foreign_socket_dir_is_refused(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "odd home", tmp_path / "sockets")
    layout.socket_dir.mkdir()
    os.chown(layout.socket_dir, 65534, 65534)  # nobody's: it could plant links for root
    plan = plan_cluster(load_profile("local"))
    configs = SlurmConfigs.render(plan, layout, "host")
    with pytest.raises(DevClusterError, match="belongs to another user"):
        write_files(plan, layout, configs)
    layout.socket_dir.rmdir()
    write_files(plan, layout, configs)
    assert layout.alias.readlink() == layout.root
    assert str(layout.alias) in layout.slurm_conf.read_text()


def test_port_offset_moves_every_port(monkeypatch: pytest.MonkeyPatch) -> None:
    from hpctrain.devcluster.cluster import PORT_OFFSET_VAR, ports_from_environment

    monkeypatch.setenv(PORT_OFFSET_VAR, "100")
    moved = ports_from_environment()
    assert moved.as_dict() == {k: v + 100 for k, v in Ports().as_dict().items()}
    for bad in ("-1", "x", "20001", "1e3"):
        monkeypatch.setenv(PORT_OFFSET_VAR, bad)
        with pytest.raises(HpctrainError, match=PORT_OFFSET_VAR):
            ports_from_environment()
    monkeypatch.delenv(PORT_OFFSET_VAR)
    assert ports_from_environment() == Ports()


def test_a_shifted_cluster_numbers_its_jobs_apart_and_schedules_at_once() -> None:
    # MASTER_PORT is 20000 + job id % 12000: the 24.11 cluster (offset 1000) starts at 10001,
    # so its jobs' ports never meet the host cluster's while it numbers fewer than 2000.
    conf = {}
    for offset in (0, 1000):
        text = render_slurm_conf(plan_cluster(load_profile("local"), ports=Ports().shifted(offset)),
                                 LAYOUT, "devhost")
        conf[offset] = dict(line.split("=", 1) for line in text.splitlines()
                            if line.startswith(("FirstJobId=", "SchedulerParameters=")))
    assert conf[0]["FirstJobId"] == "1" and conf[1000]["FirstJobId"] == "10001"
    assert conf[0]["SchedulerParameters"] == "sched_interval=1,bf_interval=1"


def test_a_moved_cluster_keeps_a_hosts_line_of_its_own() -> None:
    # Two dev clusters on one machine (scripts/test.sh runs two on SLURM 22.05): the second,
    # on ports moved by 500, emulating Raven, must not take node1 away from the first.
    both = update_hosts(update_hosts("127.0.0.1 localhost\n", ["node1", "node2"]),
                        ["gpu1", "gpu2"], tag="port 17317")
    assert hosts_has_line(both, ["node1", "node2"])
    assert hosts_has_line(both, ["gpu1", "gpu2"], tag="port 17317")
    again = update_hosts(both, ["node1"], tag="port 17317")
    assert hosts_has_line(again, ["node1", "node2"]) and "gpu1" not in again
