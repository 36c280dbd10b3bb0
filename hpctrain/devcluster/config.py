"""Profile -> dev-cluster layout, node groups and config text (pure: no files, no processes)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpctrain.profiles.model import Partition, Profile
from hpctrain.units import format_time, parse_time_seconds

CLUSTER_NAME = "hpctrain-dev"
DB_NAME = "slurm_acct_db"
DB_USER = "slurm"
DEFAULT_NODES = 2
# 2-core machines: more slurmds than this make start-up slow and the scheduler sluggish.
MAX_SLURMDS = 24
HOSTS_MARKER = "# hpctrain-devcluster"
DEFAULT_ACCOUNT = "hpctrain-dev"
# Accounts every emulated cluster carries, so tests can pass an --account the way users must
# on Gilbreth and Marvin (ag_<inst>_<pi>); anything else is refused like on a real cluster.
ACCOUNTS = (DEFAULT_ACCOUNT, "hpctrain-test", "ag_hpctrain_test")
# Unix socket paths must stay below the kernel's 108-byte limit. The longest we make is
# slurmstepd's <SlurmdSpoolDir>/<node>_<jobid>.<stepid>, with the node name twice.
_SOCKET_LIMIT = 107
_MAX_PREFIX = 10
# prefix + "n" (after a digit) + "g<i>" (a clash) + a two-digit index
_MAX_NODE_NAME = _MAX_PREFIX + 6
_STEPD_SOCKET = len("/slurmd/") + 2 * _MAX_NODE_NAME + len("/_4294967295.4294967295")
_HOSTNAME_CHARS = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class Ports:
    """Non-default ports, so a system SLURM or MariaDB on this machine is left alone."""

    slurmctld: int = 16817
    slurmdbd: int = 16819
    mysqld: int = 13306
    slurmd_base: int = 17001

    def as_dict(self) -> dict[str, int]:
        return {
            "slurmctld": self.slurmctld,
            "slurmdbd": self.slurmdbd,
            "mysqld": self.mysqld,
            "slurmd_base": self.slurmd_base,
        }


@dataclass(frozen=True)
class Layout:
    """Every file of the dev cluster, derived from its one directory."""

    root: Path
    socket_dir: Path

    @classmethod
    def for_dir(cls, root: Path) -> Layout:
        """Sockets go under root/run unless that path is too long for unix sockets."""
        root = Path(root)
        sockets = root / "run"
        if len(str(sockets)) + _STEPD_SOCKET > _SOCKET_LIMIT:
            digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
            sockets = Path("/tmp") / f"hpctrain-{digest}"
        return cls(root=root, socket_dir=sockets)

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def db(self) -> Path:
        return self.root / "db"

    @property
    def dev(self) -> Path:
        """Empty files standing in for GPU device files in gres.conf."""
        return self.root / "dev"

    @property
    def slurm_conf(self) -> Path:
        # slurm/client.py's devcluster_conf() looks exactly here.
        return self.etc / "slurm.conf"

    @property
    def gres_conf(self) -> Path:
        return self.etc / "gres.conf"

    @property
    def slurmdbd_conf(self) -> Path:
        # slurmdbd has no -f: it reads slurmdbd.conf next to $SLURM_CONF.
        return self.etc / "slurmdbd.conf"

    @property
    def mysql_init(self) -> Path:
        return self.etc / "mysql-init.sql"

    @property
    def db_secret(self) -> Path:
        return self.etc / "db-password"

    @property
    def munge_etc(self) -> Path:
        return self.etc / "munge"

    @property
    def munge_key(self) -> Path:
        return self.munge_etc / "munge.key"

    @property
    def munge_run(self) -> Path:
        """Owned by the munge user: munged writes its socket, pid and seed files here."""
        return self.socket_dir / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge_run / "munge.socket"

    @property
    def munge_pid(self) -> Path:
        return self.munge_run / "munged.pid"

    @property
    def munge_seed(self) -> Path:
        return self.munge_run / "munged.seed"

    @property
    def munge_log_dir(self) -> Path:
        return self.log / "munge"

    @property
    def munge_log(self) -> Path:
        return self.munge_log_dir / "munged.log"

    @property
    def mysql_socket(self) -> Path:
        return self.socket_dir / "mysqld.sock"

    @property
    def mysql_pid(self) -> Path:
        return self.run / "mysqld.pid"

    @property
    def mysql_log(self) -> Path:
        return self.log / "mysqld.log"

    @property
    def slurmdbd_pid(self) -> Path:
        return self.run / "slurmdbd.pid"

    @property
    def slurmdbd_log(self) -> Path:
        return self.log / "slurmdbd.log"

    @property
    def slurmctld_pid(self) -> Path:
        # slurm/client.py's devcluster_conf() checks this file to know the cluster is up.
        return self.run / "slurmctld.pid"

    @property
    def slurmctld_log(self) -> Path:
        return self.log / "slurmctld.log"

    @property
    def slurmd_spool(self) -> Path:
        """Parent of the per-node spool dirs, which hold slurmstepd's sockets."""
        return self.socket_dir / "slurmd"

    @property
    def state_save(self) -> Path:
        return self.spool / "ctld"

    def slurmd_pid(self, node: str) -> Path:
        return self.run / f"slurmd-{node}.pid"

    def slurmd_log(self, node: str) -> Path:
        return self.log / f"slurmd-{node}.log"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one shape, shared by every partition of the profile with that shape."""

    prefix: str
    partitions: tuple[str, ...]
    cpus: int
    mem_mb: int
    gpu_type: str | None
    gpus: int
    features: tuple[str, ...]
    nodes: tuple[str, ...]
    ports: tuple[int, ...]

    @property
    def gres(self) -> str | None:
        if self.gpus <= 0:
            return None
        return f"gpu:{self.gpu_type}:{self.gpus}" if self.gpu_type else f"gpu:{self.gpus}"


@dataclass(frozen=True)
class PartitionSpec:
    name: str
    nodes: tuple[str, ...]
    default: bool
    max_time_s: int
    default_time_s: int | None
    max_nodes: int | None
    def_mem_per_cpu: int
    allow_qos: str | None


@dataclass(frozen=True)
class QosSpec:
    name: str
    max_wall_s: int | None


@dataclass(frozen=True)
class ClusterPlan:
    """What the emulated cluster looks like: node groups, partitions, QOS, accounts."""

    profile: str
    nodes_per_group: int
    groups: tuple[NodeGroup, ...]
    partitions: tuple[PartitionSpec, ...]
    qos: tuple[QosSpec, ...]
    accounts: tuple[str, ...]
    ports: Ports = field(default_factory=Ports)

    @property
    def node_names(self) -> list[str]:
        return [n for g in self.groups for n in g.nodes]

    def node_ports(self) -> dict[str, int]:
        return {n: p for g in self.groups for n, p in zip(g.nodes, g.ports, strict=True)}


def _shape(p: Partition) -> tuple[int, int, str | None, int]:
    return (p.cpus_per_node, p.mem_per_node_mb, p.gpu_type if p.gpus_per_node else None,
            p.gpus_per_node)


def _stem(names: Sequence[str]) -> str:
    """The shared part of partition names before their last separator (sgpu_short -> sgpu)."""
    if len(names) == 1:
        return names[0]
    common = names[0]
    for n in names[1:]:
        while not n.startswith(common):
            common = common[:-1]
    cut = max(common.rfind(c) for c in "_-.")
    return common[:cut] if cut > 0 else common


def _hostname_prefix(stem: str) -> str:
    prefix = _HOSTNAME_CHARS.sub("-", stem.lower()).strip("-")
    if not prefix or not prefix[0].isalpha():
        prefix = "n" + prefix
    # Node names end up twice in slurmstepd's socket path, which must stay short.
    prefix = prefix[:_MAX_PREFIX].rstrip("-")
    # A trailing digit would run into the node index (a30 + 1 -> a301), so separate them.
    if prefix[-1].isdigit():
        prefix += "n"
    return prefix


def plan_cluster(profile: Profile, nodes_per_group: int = DEFAULT_NODES,
                 ports: Ports | None = None) -> ClusterPlan:
    """Group the profile's partitions by node shape and give each group its own nodes."""
    if nodes_per_group < 1:
        raise ValueError("nodes per partition must be at least 1")
    ports = ports or Ports()
    shapes: dict[tuple[int, int, str | None, int], list[Partition]] = {}
    for p in profile.partitions:
        shapes.setdefault(_shape(p), []).append(p)
    if len(shapes) * nodes_per_group > MAX_SLURMDS:
        raise ValueError(
            f"profile {profile.name} has {len(shapes)} node shapes; {nodes_per_group} nodes each "
            f"would start {len(shapes) * nodes_per_group} slurmd (at most {MAX_SLURMDS})"
        )
    groups: list[NodeGroup] = []
    used: set[str] = set()
    port = ports.slurmd_base
    for i, ((cpus, mem, gpu_type, gpus), parts) in enumerate(shapes.items(), start=1):
        names = [p.name for p in parts]
        prefix = "node" if len(shapes) == 1 else _hostname_prefix(_stem(names))
        if prefix in used:
            prefix = f"{prefix}g{i}"
        used.add(prefix)
        features: list[str] = []
        for p in parts:
            for f in [p.default_constraint, *(c.name for c in p.constraints)]:
                if f and f not in features:
                    features.append(f)
        nodes = tuple(f"{prefix}{k}" for k in range(1, nodes_per_group + 1))
        groups.append(
            NodeGroup(
                prefix=prefix,
                partitions=tuple(names),
                cpus=cpus,
                mem_mb=mem,
                gpu_type=gpu_type,
                gpus=gpus,
                features=tuple(features),
                nodes=nodes,
                ports=tuple(range(port, port + nodes_per_group)),
            )
        )
        port += nodes_per_group
    default = profile.default_partition.name
    by_partition = {name: g for g in groups for name in g.partitions}
    partitions = tuple(
        PartitionSpec(
            name=p.name,
            nodes=by_partition[p.name].nodes,
            default=p.name == default,
            max_time_s=p.max_seconds,
            default_time_s=_seconds(p.default_time),
            max_nodes=p.max_nodes,
            # Like real sites: a job without --mem gets its CPUs' share, not the whole node.
            def_mem_per_cpu=max(1, p.mem_per_node_mb // p.cpus_per_node),
            allow_qos=p.required_qos,
        )
        for p in profile.partitions
    )
    qos = tuple(QosSpec(q.name, _seconds(q.max_time)) for q in profile.qos)
    accounts = list(ACCOUNTS)
    if profile.default_account and profile.default_account not in accounts:
        accounts.append(profile.default_account)
    return ClusterPlan(
        profile=profile.name,
        nodes_per_group=nodes_per_group,
        groups=tuple(groups),
        partitions=partitions,
        qos=qos,
        accounts=tuple(accounts),
        ports=ports,
    )


def _seconds(text: str | None) -> int | None:
    return None if text is None else parse_time_seconds(text)


def render_slurm_conf(plan: ClusterPlan, layout: Layout, hostname: str) -> str:
    """slurm.conf for the emulated cluster; every path lives under the layout."""
    ports = plan.ports
    lines = [
        f"# Generated by `hpctrain devcluster up --profile {plan.profile}`; rewritten on each up.",
        f"# Emulates profile {plan.profile!r} with {plan.nodes_per_group} node(s) per node shape.",
        # Rendered scripts test $SLURM_CLUSTER_NAME = hpctrain-dev* to skip module loads.
        f"ClusterName={CLUSTER_NAME}",
        f"SlurmctldHost={hostname}(127.0.0.1)",
        f"SlurmctldPort={ports.slurmctld}",
        f"SlurmdPort={ports.slurmd_base}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # Our own munged on our own socket: a system munged (if any) is never touched.
        f"AuthInfo=socket={layout.munge_socket}",
        f"StateSaveLocation={layout.state_save}",
        # slurmd creates the last level (%n), not its parent; steps put sockets there.
        f"SlurmdSpoolDir={layout.slurmd_spool}/%n",
        f"SlurmctldPidFile={layout.slurmctld_pid}",
        f"SlurmdPidFile={layout.run}/slurmd-%n.pid",
        f"SlurmctldLogFile={layout.slurmctld_log}",
        f"SlurmdLogFile={layout.log}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # Trust the node shapes below, so a 2-core machine may emulate 72-core nodes.
        "SlurmdParameters=config_overrides",
        # No cgroups needed: processes tracked by parent pid, no task binding.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        # Memory is consumable as on real clusters, so --mem above a node's is refused.
        "SelectTypeParameters=CR_Core_Memory",
        "GresTypes=gpu",
        # Refuse over-limit jobs at submission (else they pend forever and --test-only says yes).
        "EnforcePartLimits=ALL",
        "ReturnToService=2",
        "SlurmctldTimeout=10",
        "SlurmdTimeout=30",
        "MessageTimeout=10",
        "InactiveLimit=0",
        "KillWait=5",
        "Waittime=0",
        "MinJobAge=30",
        "JobAcctGatherType=jobacct_gather/linux",
        "JobAcctGatherFrequency=30",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=127.0.0.1",
        f"AccountingStoragePort={ports.slurmdbd}",
        # Connections to slurmdbd take their munge socket from here, not from AuthInfo.
        f"AccountingStoragePass={layout.munge_socket}",
        # Unknown accounts and QOS are refused like on a real cluster.
        "AccountingStorageEnforce=associations,limits,qos",
        "AccountingStorageTRES=gres/gpu",
        "JobCompType=jobcomp/none",
        "",
    ]
    for g in plan.groups:
        lines.append(f"# node shape for partitions {', '.join(g.partitions)}")
        for node, port in zip(g.nodes, g.ports, strict=True):
            parts = [
                f"NodeName={node}",
                f"NodeHostname={hostname}",
                "NodeAddr=127.0.0.1",
                f"Port={port}",
                f"CPUs={g.cpus}",
                f"RealMemory={g.mem_mb}",
            ]
            if g.gres:
                parts.append(f"Gres={g.gres}")
            if g.features:
                parts.append(f"Feature={','.join(g.features)}")
            parts.append("State=UNKNOWN")
            lines.append(" ".join(parts))
    lines.append("")
    for p in plan.partitions:
        parts = [
            f"PartitionName={p.name}",
            f"Nodes={','.join(p.nodes)}",
            f"Default={'YES' if p.default else 'NO'}",
            f"MaxTime={format_time(p.max_time_s)}",
        ]
        if p.default_time_s is not None:
            parts.append(f"DefaultTime={format_time(p.default_time_s)}")
        if p.max_nodes is not None:
            parts.append(f"MaxNodes={p.max_nodes}")
        parts.append(f"DefMemPerCPU={p.def_mem_per_cpu}")
        if p.allow_qos:
            # Gilbreth's rule: the training partition only takes jobs with -q training.
            parts.append(f"AllowQos={p.allow_qos}")
        parts.append("State=UP")
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def gres_device_files(plan: ClusterPlan, layout: Layout) -> list[Path]:
    """The empty files gres.conf names as GPU devices (shared by all nodes on this host)."""
    most = max((g.gpus for g in plan.groups), default=0)
    return [layout.dev / f"gpu{i}" for i in range(most)]


def render_gres_conf(plan: ClusterPlan, layout: Layout) -> str:
    """gres.conf: each GPU backed by an empty file (File= is required, Count= alone goes INVAL)."""
    lines = ["# Generated by hpctrain devcluster: emulated GPUs, backed by empty files.",
             "AutoDetect=off"]
    for g in plan.groups:
        if g.gpus <= 0:
            continue
        files = f"{layout.dev}/gpu[0-{g.gpus - 1}]" if g.gpus > 1 else f"{layout.dev}/gpu0"
        type_part = f" Type={g.gpu_type}" if g.gpu_type else ""
        lines.append(f"NodeName={','.join(g.nodes)} Name=gpu{type_part} File={files}")
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(layout: Layout, ports: Ports, db_password: str) -> str:
    """slurmdbd.conf (must be mode 600: it holds the database password)."""
    return "\n".join(
        [
            "# Generated by hpctrain devcluster.",
            "AuthType=auth/munge",
            f"AuthInfo=socket={layout.munge_socket}",
            "DbdHost=localhost",
            "DbdAddr=127.0.0.1",
            f"DbdPort={ports.slurmdbd}",
            "SlurmUser=root",
            f"PidFile={layout.slurmdbd_pid}",
            f"LogFile={layout.slurmdbd_log}",
            "DebugLevel=info",
            "StorageType=accounting_storage/mysql",
            # With localhost the MySQL client library tries the default unix socket and fails.
            "StorageHost=127.0.0.1",
            f"StoragePort={ports.mysqld}",
            f"StorageUser={DB_USER}",
            f"StoragePass={db_password}",
            f"StorageLoc={DB_NAME}",
            "",
        ]
    )


def render_mysql_init(db_password: str) -> str:
    """SQL mysqld runs at every start (--init-file): the slurm user and its database."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", db_password):
        raise ValueError("database password must be letters, digits, '_' or '-'")
    return "\n".join(
        [
            f"CREATE DATABASE IF NOT EXISTS {DB_NAME};",
            f"CREATE USER IF NOT EXISTS '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{db_password}';",
            f"ALTER USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{db_password}';",
            f"GRANT ALL PRIVILEGES ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';",
            "FLUSH PRIVILEGES;",
            "",
        ]
    )


def hosts_line(names: Iterable[str]) -> str:
    return f"127.0.0.1 {' '.join(names)} {HOSTS_MARKER}"


def update_hosts(text: str, names: Sequence[str]) -> str:
    """/etc/hosts with exactly one marked line naming these nodes (others' lines untouched)."""
    kept = [line for line in text.splitlines() if not line.rstrip().endswith(HOSTS_MARKER)]
    if names:
        kept.append(hosts_line(names))
    return "\n".join(kept) + "\n"


def hosts_has_line(text: str, names: Sequence[str]) -> bool:
    return any(line.strip() == hosts_line(names) for line in text.splitlines())


# --- accounting: the sacctmgr commands that bring the database in line with a plan ---------


@dataclass(frozen=True)
class AccountingState:
    """What sacctmgr reports now (parsed from `sacctmgr -n -P show ...`)."""

    clusters: frozenset[str] = frozenset()
    qos: dict[str, str] = field(default_factory=dict)  # name -> "maxwall|flags"
    accounts: frozenset[str] = frozenset()
    # (user, account) -> comma-separated QOS list of the association
    associations: dict[tuple[str, str], str] = field(default_factory=dict)
    default_accounts: dict[str, str] = field(default_factory=dict)


def parse_accounting(clusters: str, qos: str, accounts: str, assocs: str, users: str
                     ) -> AccountingState:
    """Parse `sacctmgr -n -P show` outputs (cluster; qos name,maxwall,flags; account;
    assoc user,account,qos; user name,defaultaccount)."""
    qos_map: dict[str, str] = {}
    for line in qos.splitlines():
        if line.strip():
            name, _, rest = line.partition("|")
            qos_map[name] = rest
    assoc_map: dict[tuple[str, str], str] = {}
    for line in assocs.splitlines():
        cols = line.split("|")
        if len(cols) >= 3 and cols[0]:
            assoc_map[(cols[0], cols[1])] = ",".join(sorted(q for q in cols[2].split(",") if q))
    defaults: dict[str, str] = {}
    for line in users.splitlines():
        cols = line.split("|")
        if len(cols) >= 2 and cols[0]:
            defaults[cols[0]] = cols[1]
    return AccountingState(
        clusters=frozenset(x.strip() for x in clusters.splitlines() if x.strip()),
        qos=qos_map,
        accounts=frozenset(x.strip() for x in accounts.splitlines() if x.strip()),
        associations=assoc_map,
        default_accounts=defaults,
    )


def _maxwall_minutes(seconds: int | None) -> str:
    # sacctmgr takes MaxWall in minutes or [D-]HH:MM:SS; -1 clears the limit.
    return "-1" if seconds is None else format_time(seconds)


def accounting_commands(plan: ClusterPlan, state: AccountingState, users: Sequence[str]
                        ) -> list[list[str]]:
    """sacctmgr argv lists that make the accounting database match the plan (none if it does)."""
    cmds: list[list[str]] = []
    if CLUSTER_NAME not in state.clusters:
        cmds.append(["sacctmgr", "-i", "add", "cluster", CLUSTER_NAME])
    wanted = {q.name: q for q in plan.qos}
    # QOS `normal` always exists; a profile that does not limit it leaves it unlimited.
    wanted.setdefault("normal", QosSpec("normal", None))
    for q in wanted.values():
        maxwall = _maxwall_minutes(q.max_wall_s)
        want = (f"{format_time(q.max_wall_s)}" if q.max_wall_s is not None else "", "DenyOnLimit")
        # DenyOnLimit: a job over the QOS limit is refused at submission, not left pending.
        if q.name not in state.qos:
            cmds.append(["sacctmgr", "-i", "add", "qos", q.name, f"MaxWall={maxwall}",
                         "Flags=DenyOnLimit"])
        elif _qos_tuple(state.qos[q.name]) != want:
            cmds.append(["sacctmgr", "-i", "modify", "qos", "where", f"name={q.name}", "set",
                         f"MaxWall={maxwall}", "Flags=DenyOnLimit"])
    for acct in plan.accounts:
        if acct not in state.accounts:
            cmds.append(["sacctmgr", "-i", "add", "account", acct, f"Cluster={CLUSTER_NAME}",
                         "Description=hpctrain dev cluster", "Organization=hpctrain"])
    qos_list = ",".join(sorted(wanted))
    for user in users:
        missing = [a for a in plan.accounts if (user, a) not in state.associations]
        if missing:
            cmds.append(["sacctmgr", "-i", "add", "user", user, f"Account={','.join(missing)}",
                         f"DefaultAccount={DEFAULT_ACCOUNT}", f"Cluster={CLUSTER_NAME}"])
        stale = any(state.associations.get((user, a)) != qos_list for a in plan.accounts)
        if missing or stale:
            cmds.append(["sacctmgr", "-i", "modify", "user", "where", f"name={user}",
                         f"cluster={CLUSTER_NAME}", "set", f"QOS={qos_list}",
                         "DefaultQOS=normal"])
        if not missing and state.default_accounts.get(user) != DEFAULT_ACCOUNT:
            cmds.append(["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set",
                         f"DefaultAccount={DEFAULT_ACCOUNT}"])
    return cmds


def _qos_tuple(rest: str) -> tuple[str, str]:
    maxwall, _, flags = rest.partition("|")
    return (_normal_time(maxwall), flags)


def _normal_time(text: str) -> str:
    if not text:
        return ""
    try:
        return format_time(parse_time_seconds(text))
    except ValueError:
        return text
