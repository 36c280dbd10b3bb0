"""`hpctrain submit` and a cold `hpctrain status` as whole processes, side by side with submitit.

Needs the dev cluster (`hpctrain devcluster up`; found through SLURM_CONF or HPCTRAIN_HOME).
submitit is installed into a venv of its own (benchmarks/.venv-submitit) when missing, so that
it cannot change hpctrain's environment. Both sides run in alternating pairs, as whole
processes from a fresh interpreter, bytecode compiled (as a pip install leaves it):

- submit: one held job (`--hold`, cancelled afterwards: the cluster does no work) running
  `hostname`; hpctrain's default submit (plan, render, code snapshot, run directory, history,
  one sbatch) against submitit's `AutoExecutor.submit` of a function (its pickles, one sbatch);
- status: the state of `--jobs` finished jobs neither side has seen end: hpctrain's
  `status --all` of a history holding them as unfinished (cold: it asks SLURM), to a pipe,
  against submitit's `SlurmJob(folder, id).state` for each (its watcher asks sacct once).

Targets (issue 43): each hpctrain median at or below submitit's.

    python benchmarks/peers.py [--rounds 7] [--jobs 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpctrain.history import History, NewJob
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.runner import resolve_slurm_conf

HERE = Path(__file__).resolve().parent
SUBMITIT_VENV = HERE / ".venv-submitit"

SUBMITIT_SUBMIT = """
import sys, submitit
ex = submitit.AutoExecutor(folder=sys.argv[1], cluster="slurm")
ex.update_parameters(slurm_partition="debug", timeout_min=1, gpus_per_node=1,
                     slurm_additional_parameters={"hold": True})
print(ex.submit(print, "hostname").job_id)
"""
SUBMITIT_STATUS = """
import sys, submitit
jobs = [submitit.SlurmJob(sys.argv[1], i) for i in sys.argv[2].split(",")]
print(sum(j.state == "COMPLETED" for j in jobs))
"""


def _submitit_python() -> str:
    exe = SUBMITIT_VENV / "bin" / "python"
    if not exe.exists():
        print(f"installing submitit into {SUBMITIT_VENV} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(SUBMITIT_VENV)], check=True)
        subprocess.run([str(SUBMITIT_VENV / "bin" / "pip"), "install", "--quiet",
                        "--disable-pip-version-check", "submitit"], check=True)
        subprocess.run([str(exe), "-m", "compileall", "-q", str(SUBMITIT_VENV / "lib")],
                       check=False, stdout=subprocess.DEVNULL)
    return str(exe)


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    res = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
                         check=False)
    took = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed:\n{res.stderr}")
    return took, res.stdout


def _finished_jobs(client: SlurmClient, count: int) -> list[str]:
    """`count` jobs run to their end on the dev cluster, known to its accounting."""
    ids = [client.run(["sbatch", "--parsable", "--time=1", "--output=/dev/null", "--wrap", "true"]
                      ).stdout.strip().split(";")[0] for _ in range(count)]
    deadline = time.time() + 600
    while time.time() < deadline:
        done = client.run(["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,State",
                           "-j", ",".join(ids)]).stdout
        if sum(line.endswith("|COMPLETED") for line in done.splitlines()) == count:
            return ids
        time.sleep(2)
    raise SystemExit("the jobs did not all complete in 10 minutes")


def _cold_history(home: Path, cluster: str, ids: list[str]) -> None:
    """A history holding `ids` as submitted and never refreshed."""
    history = History(home / "state" / "history.sqlite3")
    for job_id in ids:
        history.add(NewJob(
            job_id=job_id, cluster=cluster, profile="local", job_name=f"bench{job_id}",
            partition="debug", nodes=1, gpus_per_node=1, total_gpus=1, command=["true"],
            run_dir=None, script_path=None, stdout_path=None, stderr_path=None, workdir="/",
            git_commit=None, git_dirty=None, time_limit_s=60))
    history.close()


def _pairs(rounds: int, sides: dict[str, tuple[list[str], dict[str, str], Path]],
           before: dict[str, object] | None = None) -> dict[str, list[float]]:
    """Each side once per round, the order alternating; `before` a side's set-up per run."""
    names = list(sides)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for k in range(rounds):
        for name in names if k % 2 == 0 else reversed(names):
            argv, env, cwd = sides[name]
            if before and callable(before.get(name)):
                before[name]()  # type: ignore[operator]
            samples[name].append(_timed(argv, env, cwd)[0])
    return samples


def measure(rounds: int, jobs: int) -> dict[str, object]:
    import compileall

    import hpctrain

    compileall.compile_dir(str(Path(hpctrain.__file__).parent), quiet=1)
    conf = resolve_slurm_conf()
    client = SlurmClient.local(conf)
    cluster = client.cluster_name() or "hpctrain-dev"
    peer = _submitit_python()
    with tempfile.TemporaryDirectory() as tmp_text:
        tmp = Path(tmp_text)
        project = tmp / "project"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        (project / "train.py").write_text("print('hello')\n")
        base = {**os.environ, "SLURM_CONF": str(conf), "COLUMNS": "160"}
        ours = {**base, "HPCTRAIN_HOME": str(tmp / "home")}
        submit = _pairs(rounds, {
            "hpctrain submit": ([sys.executable, "-m", "hpctrain", "submit", "-P", "local",
                                 "--time", "1", "--gpus-per-node", "1", "--no-monitor",
                                 "--sbatch-arg=--hold", "--", "hostname"], ours, project),
            "submitit submit": ([peer, "-c", SUBMITIT_SUBMIT, str(tmp / "submitit")], base,
                                project)})
        client.run(["scancel", "--user", os.environ.get("USER", "root"), "--state=PENDING"],
                   check=False)
        ids = _finished_jobs(client, jobs)
        homes = [tmp / f"cold{k}" for k in range(rounds)]
        for home in homes:
            _cold_history(home, cluster, ids)
        fresh = iter(homes)
        status_env = dict(ours)
        status = _pairs(rounds, {
            "hpctrain status": ([sys.executable, "-m", "hpctrain", "status", "--all"],
                                status_env, project),
            "submitit status": ([peer, "-c", SUBMITIT_STATUS, str(tmp / "submitit"),
                                 ",".join(ids)], base, project)},
            before={"hpctrain status": lambda: status_env.update(
                HPCTRAIN_HOME=str(next(fresh)))})
    medians = {k: statistics.median(v) for k, v in {**submit, **status}.items()}
    return {"median_ms": {k: round(v * 1000, 1) for k, v in medians.items()},
            "rounds": rounds, "jobs": jobs,
            "ok": medians["hpctrain submit"] <= medians["submitit submit"]
            and medians["hpctrain status"] <= medians["submitit status"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    got = measure(args.rounds, args.jobs)
    if args.json:
        print(json.dumps(got))
    else:
        ms: dict[str, float] = got["median_ms"]  # type: ignore[assignment]
        for verb in ("submit", "status"):
            ours, theirs = ms[f"hpctrain {verb}"], ms[f"submitit {verb}"]
            print(f"{verb:<7} hpctrain {ours:7.1f} ms  submitit {theirs:7.1f} ms  "
                  f"{ours / theirs:5.2f}x")
        print(f"medians of {args.rounds} alternating pairs; status of {args.jobs} finished "
              f"jobs, cold; target: hpctrain <= submitit -> {'OK' if got['ok'] else 'OVER'}")
    return 0 if got["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
