"""Accounting: read what sacctmgr holds, and the sacctmgr commands that match it to a plan."""

from __future__ import annotations

import contextlib
import getpass
import os
import pwd
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hpctrain.devcluster.topology import CLUSTER_NAME, DEFAULT_ACCOUNT, ClusterPlan, QosSpec
from hpctrain.slurm.client import SlurmClient
from hpctrain.values.units import format_time, parse_time_seconds

_SHOW = ("-n", "-P", "show")
# Each `sacctmgr -n -P show` query parse_accounting reads, in its argument order.
_QUERIES = (
    ("cluster", "format=cluster"),
    ("qos", "format=name,maxwall,flags"),
    ("account", "format=account"),
    ("assoc", f"cluster={CLUSTER_NAME}", "format=user,account,qos"),
    ("user", "format=user,defaultaccount"),
)


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
    """Parse the `sacctmgr -n -P show` outputs of cluster, qos, account, assoc and user."""
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


def accounting_commands(plan: ClusterPlan, state: AccountingState, users: Sequence[str]
                        ) -> list[list[str]]:
    """sacctmgr argv lists that make the accounting database match the plan (none if it does)."""
    cmds: list[list[str]] = []
    if CLUSTER_NAME not in state.clusters:
        cmds.append(["sacctmgr", "-i", "add", "cluster", CLUSTER_NAME])
    wanted = {q.name: q for q in plan.qos}
    # QOS `normal` always exists; a profile that does not limit it leaves it unlimited.
    wanted.setdefault("normal", QosSpec("normal", None))
    cmds += _qos_commands(wanted.values(), state)
    cmds += [["sacctmgr", "-i", "add", "account", acct, f"Cluster={CLUSTER_NAME}",
              "Description=hpctrain dev cluster", "Organization=hpctrain"]
             for acct in plan.accounts if acct not in state.accounts]
    qos_list = ",".join(sorted(wanted))
    for user in users:
        cmds += _user_commands(user, plan.accounts, qos_list, state)
    return cmds


def _qos_commands(wanted: Iterable[QosSpec], state: AccountingState) -> list[list[str]]:
    cmds: list[list[str]] = []
    for q in wanted:
        maxwall = _maxwall(q.max_wall_s)
        want = (format_time(q.max_wall_s) if q.max_wall_s is not None else "", "DenyOnLimit")
        # DenyOnLimit: a job over the QOS limit is refused at submission, not left pending.
        if q.name not in state.qos:
            cmds.append(["sacctmgr", "-i", "add", "qos", q.name, f"MaxWall={maxwall}",
                         "Flags=DenyOnLimit"])
        elif _qos_tuple(state.qos[q.name]) != want:
            cmds.append(["sacctmgr", "-i", "modify", "qos", "where", f"name={q.name}", "set",
                         f"MaxWall={maxwall}", "Flags=DenyOnLimit"])
    return cmds


def _user_commands(user: str, accounts: Sequence[str], qos_list: str,
                   state: AccountingState) -> list[list[str]]:
    cmds: list[list[str]] = []
    missing = [a for a in accounts if (user, a) not in state.associations]
    if missing:
        cmds.append(["sacctmgr", "-i", "add", "user", user, f"Account={','.join(missing)}",
                     f"DefaultAccount={DEFAULT_ACCOUNT}", f"Cluster={CLUSTER_NAME}"])
    stale = any(state.associations.get((user, a)) != qos_list for a in accounts)
    if missing or stale:
        cmds.append(["sacctmgr", "-i", "modify", "user", "where", f"name={user}",
                     f"cluster={CLUSTER_NAME}", "set", f"QOS={qos_list}", "DefaultQOS=normal"])
    if not missing and state.default_accounts.get(user) != DEFAULT_ACCOUNT:
        cmds.append(["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set",
                     f"DefaultAccount={DEFAULT_ACCOUNT}"])
    return cmds


def _maxwall(seconds: int | None) -> str:
    # sacctmgr takes MaxWall in minutes or [D-]HH:MM:SS; -1 clears the limit.
    return "-1" if seconds is None else format_time(seconds)


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


def read_accounting(client: SlurmClient) -> AccountingState:
    """Ask sacctmgr for the clusters, QOS, accounts, associations and users it holds."""
    return parse_accounting(*(client.sacctmgr([*_SHOW, *query]) for query in _QUERIES))


def sync_accounting(client: SlurmClient, plan: ClusterPlan) -> None:
    """Register the cluster, its QOS, accounts and users where sacctmgr lacks them."""
    for argv in accounting_commands(plan, read_accounting(client), submitting_users()):
        client.sacctmgr(argv[1:])


def submitting_users() -> list[str]:
    """Who submits to the dev cluster: root, the invoking user and the sudo caller."""
    users = ["root"]
    try:
        me: str | None = getpass.getuser()
    except (KeyError, OSError):
        me = None
    for name in (me, os.environ.get("SUDO_USER")):
        if name and name not in users:
            with contextlib.suppress(KeyError):
                pwd.getpwnam(name)
                users.append(name)
    return users
