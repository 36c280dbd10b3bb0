"""Shared fixtures: the local dev cluster for tests marked `cluster`.

`devcluster` (session) yields a DevClusterHandle for the running dev cluster with the `local`
profile and 2 nodes, bringing it up if needed, and sets SLURM_CONF for the session.
`devcluster_with` (session) yields a function `switch(profile, nodes=2) -> DevClusterHandle`
that restarts the cluster with another profile; the next test that asks for `devcluster`
(and the end of the session) gets `local` back. HPCTRAIN_SKIP_CLUSTER=1 skips cluster tests;
otherwise a cluster that will not come up is an error, never a skip.
Before each cluster test, a cheap check (the pointer file, the daemons' pids, one sinfo) finds
whether an earlier test left the shared cluster broken; if so it is repaired (only what is
dead restarts) and a ClusterRepairedWarning names the test that ran before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hpctrain.devcluster import DevCluster
from hpctrain.devcluster.nodes import READY_STATES
from hpctrain.errors import HpctrainError
from hpctrain.slurm.client import SlurmClient

REPO = Path(__file__).resolve().parents[1]
# One stable home for the dev cluster, shared with the README's commands and scripts/test.sh:
# read once at import, before any test monkeypatches HPCTRAIN_HOME for its own files.
CLUSTER_HOME = Path(os.environ.get("HPCTRAIN_HOME") or REPO / ".hpctrain")
SKIP_ENV = "HPCTRAIN_SKIP_CLUSTER"
CLUSTER_FIXTURES = {"devcluster", "devcluster_with"}
# The test that ran last (any test): named when the next cluster test finds the cluster broken.
_LAST_TEST: list[str] = ["(none: the first test of this session)"]
# One thread per training process, for this session and the jobs it submits (sbatch exports
# the submitting environment; a value set there wins over the batch script's default). That
# default gives each rank the CPUs it holds, and the dev cluster emulates 4 CPUs per node on
# what may be a 2-core machine shared by three test lanes: a 2x2 job's four ranks would run two
# threads each. tests/cluster/test_tutorial_patterns.py submits without it and checks the default.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
for _var in THREAD_VARS:
    os.environ.setdefault(_var, "1")
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def _skip_requested() -> bool:
    return os.environ.get(SKIP_ENV, "") not in ("", "0")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marker it adds
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use the cluster fixtures are `cluster` tests; skip them all only on request."""
    skip = pytest.mark.skip(reason=f"{SKIP_ENV}=1 is set: dev-cluster tests skipped on request")
    for item in items:
        if CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)
        if _skip_requested() and item.get_closest_marker("cluster"):
            item.add_marker(skip)
    items[:] = _fewer_switches(items)


def _fewer_switches(items: list[pytest.Item]) -> list[pytest.Item]:
    """Collection order, except that the cluster tests that switch profiles come last.

    A test that switches the shared dev cluster to another profile makes the next test that
    wants `local` restart it: modules with a switching test run after every module without one,
    and inside such a module the tests that keep `local` run first. Modules stay whole (their
    fixtures are set up once) and keep their order within each group.
    """
    def switches(item: pytest.Item) -> bool:
        return "devcluster_with" in getattr(item, "fixturenames", ())

    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    keep = [m for m in modules.values() if not any(switches(i) for i in m)]
    switching = [sorted(m, key=switches) for m in modules.values() if any(switches(i) for i in m)]
    return [item for module in keep + switching for item in module]


def _under_home(home: Path, where: Callable[[], Path]) -> Path:
    """A hpctrain.files.paths location as it resolves under `home`."""
    saved = os.environ.get("HPCTRAIN_HOME")
    os.environ["HPCTRAIN_HOME"] = str(home)
    try:
        return where()
    finally:
        if saved is None:
            del os.environ["HPCTRAIN_HOME"]
        else:
            os.environ["HPCTRAIN_HOME"] = saved


def devcluster_dir(home: Path) -> Path:
    """paths.devcluster_dir() as it resolves under `home`."""
    from hpctrain.files import paths

    return _under_home(home, paths.devcluster_dir)


def slurm_conf_pointer(home: Path) -> Path:
    """paths.slurm_conf_pointer() as it resolves under `home`: where `up` publishes."""
    from hpctrain.files import paths

    return _under_home(home, paths.slurm_conf_pointer)


@dataclass
class DevClusterHandle:
    """A running dev cluster as the tests see it."""

    home: Path
    directory: Path
    slurm_conf: Path
    profile: str
    node_names: list[str] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for subprocesses (hpctrain CLI, raw sbatch) that use this cluster."""
        return {**os.environ, "HPCTRAIN_HOME": str(self.home),
                "SLURM_CONF": str(self.slurm_conf), **extra}

    def env_default_threads(self) -> dict[str, str]:
        """env() without this session's one thread a process: the batch script's own default."""
        return {k: v for k, v in self.env().items() if k not in THREAD_VARS}

    def cluster(self) -> DevCluster:
        return DevCluster(self.directory)

    def client(self, timeout_s: float = 30.0) -> SlurmClient:
        return SlurmClient.local(str(self.slurm_conf), timeout_s=timeout_s)

    def cli(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run `hpctrain ARGS` in a subprocess against this cluster's HPCTRAIN_HOME."""
        return subprocess.run(
            [sys.executable, "-m", "hpctrain", *args], env=self.env(), capture_output=True,
            text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, check=False,
        )

    def sbatch(self, script: Path, *options: str) -> str:
        """Submit a script; return its job id."""
        res = self.client().run(["sbatch", "--parsable", *options, str(script)],
                                cwd=script.parent)
        return res.stdout.strip().split(";")[0]

    def test_only(self, script: Path, *options: str) -> tuple[bool, str]:
        """`sbatch --test-only`: (accepted, SLURM's message)."""
        res = self.client().run(["sbatch", "--test-only", *options, str(script)],
                                check=False, cwd=script.parent)
        return res.returncode == 0, (res.stderr + res.stdout).strip()

    def wait_job(self, job_id: str, timeout_s: float = 90.0) -> dict[str, str]:
        """Poll sacct until the job is in a terminal state; return its sacct row."""
        fmt = "JobID,State,ExitCode,NodeList,AllocTRES,NNodes"
        deadline = time.monotonic() + timeout_s
        row: dict[str, str] = {}
        while time.monotonic() < deadline:
            out = self.client().run(
                ["sacct", "-n", "-P", "-X", "-j", job_id, f"--format={fmt}"], check=False
            ).stdout
            lines = [ln for ln in out.splitlines() if ln.strip()]
            if lines:
                row = dict(zip(fmt.split(","), lines[-1].split("|"), strict=False))
                if row.get("State", "").split()[0] in TERMINAL:
                    return row
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} not finished after {timeout_s} s: {row}")


class ClusterRepairedWarning(UserWarning):
    """A cluster test found the shared dev cluster broken by an earlier test and repaired it."""


class _ClusterSession:
    """Brings the dev cluster to a profile and tracks whether a test switched it away."""

    def __init__(self) -> None:
        self.home = CLUSTER_HOME
        self.directory = devcluster_dir(self.home)
        self.pointer = slurm_conf_pointer(self.home)
        self.switched = False
        self.current: DevClusterHandle | None = None
        self.nodes = 2

    def ensure(self, profile: str, nodes: int = 2) -> DevClusterHandle:
        # replace=True: the session owns the cluster's profile; a no-op if already right.
        res = DevCluster(self.directory, pointer=self.pointer).up(profile, nodes, replace=True)
        os.environ["SLURM_CONF"] = str(res.slurm_conf)
        self.switched = profile != "local" or nodes != 2
        self.nodes = nodes
        self.current = DevClusterHandle(self.home, self.directory, res.slurm_conf, res.profile,
                                        list(res.node_names))
        return self.current

    def problem(self) -> str | None:
        """Why the cluster is not as this session last brought it up; None if it is."""
        want = self.current
        if want is None:
            return None  # not brought up yet: the `devcluster` fixture does that
        try:
            named = self.pointer.read_text().strip()
        except OSError:
            return f"the pointer file {self.pointer} is missing"
        if named != str(want.slurm_conf):
            return f"the pointer file names {named!r}, not {str(want.slurm_conf)!r}"
        status = DevCluster(self.directory, pointer=self.pointer).status(with_sinfo=False)
        if status.profile != want.profile:
            return f"it emulates profile {status.profile!r}, not {want.profile!r}"
        if not status.healthy:
            dead = [d.name for d in status.daemons if not d.alive]
            return f"daemons not running: {', '.join(dead) or '(no nodes recorded)'}"
        return self._node_problem(want)

    def _node_problem(self, want: DevClusterHandle) -> str | None:
        # One sinfo: slurmctld answers, and every node can take jobs.
        try:
            states = want.client(timeout_s=15).node_states()
        except HpctrainError as e:
            return f"sinfo failed: {e}"
        unready = {n: states.get(n, "missing") for n in want.node_names
                   if states.get(n) not in READY_STATES}
        return f"nodes not ready: {unready}" if unready else None

    def repair_if_broken(self, test: str) -> None:
        """Before `test`: if the cluster is broken, repair it and warn naming the test before."""
        why = self.problem()
        if why is None or self.current is None:
            return
        self.ensure(self.current.profile, self.nodes)
        warnings.warn(ClusterRepairedWarning(
            f"the dev cluster was broken before {test} ({why}); the test before it, "
            f"{_LAST_TEST[0]}, left it so; repaired"), stacklevel=1)


@pytest.fixture(scope="session")
def _cluster_session() -> _ClusterSession:
    if _skip_requested():
        pytest.skip(f"{SKIP_ENV}=1 is set: dev-cluster tests skipped on request")
    return _ClusterSession()


@pytest.fixture(scope="session")
def devcluster(_cluster_session: _ClusterSession) -> Iterator[DevClusterHandle]:
    """The dev cluster with the local profile (2 nodes); SLURM_CONF set for the session."""
    saved = os.environ.get("SLURM_CONF")
    handle = _cluster_session.ensure("local")
    yield handle
    if _cluster_session.switched:
        _cluster_session.ensure("local")
    if saved is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = saved


@pytest.fixture(scope="session")
def devcluster_with(
    _cluster_session: _ClusterSession, devcluster: DevClusterHandle
) -> Callable[..., DevClusterHandle]:
    """switch(profile, nodes=2): the dev cluster restarted to emulate that profile."""
    del devcluster  # requested for ordering: local is restored at its teardown
    return _cluster_session.ensure


@pytest.fixture(autouse=True)
def _healthy_cluster_for_cluster_tests(request: pytest.FixtureRequest) -> Iterator[None]:
    """Before a cluster test: `local` back after a switch, and a broken cluster repaired."""
    names = set(request.fixturenames)
    if CLUSTER_FIXTURES & names and not _skip_requested():
        session: _ClusterSession = request.getfixturevalue("_cluster_session")
        if session.switched and "devcluster_with" not in names:
            session.ensure("local")  # also repairs whatever is dead
        else:
            session.repair_if_broken(request.node.nodeid)
    yield
    _LAST_TEST[0] = request.node.nodeid


# --- per-test wall and CPU time, for scripts/slowest.py --------------------------------------
# HPCTRAIN_TEST_TIMES=FILE: every test's wall time and CPU time (this process and the children
# it waited for), written as JSON when the session ends. Waiting and computing told apart: a
# cluster test with little CPU waits for SLURM or its jobs (whose CPU is slurmd's, not ours).
_TIMES: dict[str, dict[str, float]] = {}


def _cpu_now() -> float:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    wall, cpu = time.monotonic(), _cpu_now()
    yield
    _TIMES[item.nodeid] = {"wall_s": round(time.monotonic() - wall, 3),
                           "cpu_s": round(_cpu_now() - cpu, 3)}


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("HPCTRAIN_TEST_TIMES")
    if target and _TIMES:
        import json

        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(json.dumps(_TIMES, indent=0))
