"""`hpctrain why` on a failed job with 100 MB of logs from 16 ranks, beside the plain way.

Needs the dev cluster (`hpctrain devcluster up`; found through SLURM_CONF or HPCTRAIN_HOME).
A real job fails on the cluster (a ZeroDivisionError); its stdout and stderr are then grown to
`--mb` MB in all by lines of 16 ranks (`[rankN]: epoch ... loss ...`, as a chatty DDP run
prints them) written before the job's own lines, so that the failure is at the end, where it
is in life. Then, in alternating rounds, each as a whole process:
- `hpctrain why JOB --json`;
- the plain way: `sacct -j JOB` and `tail -n 20000` of both logs (what one runs by hand,
  without reading a line of it).
Target (issue 28): `why` answers within 2 s, with the right diagnosis.

    python benchmarks/why_logs.py [--mb 100] [--rounds 5] [--json]
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

from hpctrain.slurm.client import SlurmClient

TARGET_S = 2.0
RANKS = 16


def _grow(path: Path, megabytes: float) -> None:
    """Put `megabytes` of 16 ranks' training lines before the file's own lines."""
    own = path.read_bytes()
    line = "[rank{r}]: epoch {e} step {s} loss 0.{s:06d} lr 0.001 samples/s 12345.6\n"
    chunk = "".join(line.format(r=i % RANKS, e=i // 1000, s=i) for i in range(20_000)).encode()
    with path.open("wb") as f:
        for _ in range(max(1, int(megabytes * 1024 * 1024 // len(chunk)))):
            f.write(chunk)
        f.write(own)


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=300)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return took, done.stdout


def _failed_job(env: dict[str, str], cwd: Path) -> dict[str, str]:
    (cwd / "pkg").mkdir()
    (cwd / "pkg" / "__init__.py").write_text("")
    (cwd / "pkg" / "exc.py").write_text("def ratio(x):\n    return 1 / x\n\n\nratio(0)\n")
    _, out = _timed([sys.executable, "-m", "hpctrain", "submit", "--profile", "local", "--time",
                     "2", "--json", "--", "python", "-m", "pkg.exc"], env, cwd)
    job: dict[str, str] = json.loads(out)
    for _ in range(300):
        _, shown = _timed([sys.executable, "-m", "hpctrain", "status", "--json",
                           str(job["job_id"])], env, cwd)
        if json.loads(shown)["jobs"][0]["terminal"]:
            return job
        time.sleep(1)
    raise SystemExit(f"job {job['job_id']} did not end")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    client = SlurmClient.from_environment()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        env = {**os.environ, "HPCTRAIN_HOME": str(cwd / "home")}
        if client.transport.conf_path():
            env["SLURM_CONF"] = str(client.transport.conf_path())
        subprocess.run([sys.executable, "-m", "compileall", "-q",
                        str(Path(__file__).resolve().parents[1] / "hpctrain")], check=False)
        job = _failed_job(env, cwd)
        logs = [Path(job["stdout"]), Path(job["stderr"])]
        for log in logs:
            _grow(log, a.mb / 2)
        size_mb = sum(p.stat().st_size for p in logs) / 1024 / 1024
        why = [sys.executable, "-m", "hpctrain", "why", str(job["job_id"]), "--json"]
        plain = ["sh", "-c", 'sacct -j "$1" >/dev/null && tail -n 20000 "$2" "$3" >/dev/null',
                 "plain", str(job["job_id"]), *map(str, logs)]
        times: dict[str, list[float]] = {"hpctrain why": [], "sacct + tail": []}
        cause = ""
        for r in range(a.rounds):
            for name in (list(times) if r % 2 == 0 else list(times)[::-1]):
                took, out = _timed(why if name == "hpctrain why" else plain, env, cwd)
                times[name].append(took)
                if name == "hpctrain why":
                    cause = json.loads(out)["cause"]
    median = {k: round(statistics.median(v), 3) for k, v in times.items()}
    result = {"log_mb": round(size_mb, 1), "ranks": RANKS, "rounds": a.rounds,
              "median_s": median, "cause": cause,
              "target": f"within {TARGET_S:g} s, the cause found (exception)"}
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return 0 if median["hpctrain why"] <= TARGET_S and cause == "exception" else 1


if __name__ == "__main__":
    sys.exit(main())
