"""Trainer start-up against its baseline, side by side: process start to the first training step.

The target (issue 24): the trainer's start-up is at most 1.15x the baseline's, where the
baseline is what any Lightning script on the same data pays: `import lightning`, then the spiral
task's data on the device (`startup_baseline.py`). Each round runs, in a rotating order,
`python -c pass` (the interpreter alone), the baseline and the trainer (a one-epoch spiral run
whose metrics.json gives `startup_s`, `startup_imports_s` and the phases after the imports),
each timed from its process start as the kernel records it; the ratio is the median over rounds
of trainer / baseline within each round. `--importtime` adds one `-X importtime` run of each
side and sums every module's own import time by package (torch, lightning, torchmetrics,
hpctrain, pydantic...), so that torch's cost is not counted again under Lightning's.
Bytecode is compiled first, as a pip install does (this machine sets PYTHONDONTWRITEBYTECODE).

    python benchmarks/trainer_startup.py --rounds 5 --importtime
    python benchmarks/trainer_startup.py --json
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import hpctrain

HERE = Path(__file__).resolve().parent
TARGET = 1.15
# Packages shown by name; everything else is summed as "other".
SHOWN = ("torch", "lightning", "torchmetrics", "matplotlib", "sympy", "numpy",
         "lightning_utilities", "pydantic", "pydantic_core", "yaml", "hpctrain", "rich", "fsspec",
         "tensorboard", "tensorboardX", "torchvision")


def trainer_argv(samples: int, run_dir: Path) -> list[str]:
    return ["-m", "hpctrain.trainer", "--task", "spiral", "--max-epochs", "1",
            "--set", f"data.samples={samples}", "--set", "logging.progress=lines",
            "--set", "checkpoint.enabled=false", "--run-dir", str(run_dir), "--resume", "never"]


def import_times(stderr: str) -> dict[str, float]:
    """Seconds of import time per top-level package from `-X importtime` output."""
    totals: dict[str, float] = defaultdict(float)
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, self_us, _, name = (part.strip() for part in line.replace(":", "|", 1).split("|"))
        if not self_us.isdigit():
            continue  # the header line
        root = name.split(".")[0]
        totals[root if root in SHOWN else "other"] += int(self_us) / 1e6
    return dict(totals)


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def interpreter() -> dict[str, float]:
    """`python -c pass`, start to exit: what every side pays before its first import."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return {"python_s": time.perf_counter() - start}


def baseline(samples: int, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, *flags, str(HERE / "startup_baseline.py"), "--samples", str(samples)],
        env=_env(), capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    if flags:
        result["imports"] = import_times(done.stderr)
    return result


def trainer(samples: int, tmp: Path, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    done = subprocess.run([sys.executable, *flags, *trainer_argv(samples, run_dir)],
                          env=_env(), capture_output=True, text=True, check=True)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    result = {"startup_s": metrics["startup_s"], "imports_s": metrics["startup_imports_s"]}
    if flags:
        result["imports"] = import_times(done.stderr)
    return result


def rounds(n: int, samples: int, tmp: Path) -> list[dict[str, Any]]:
    """n rounds of the three sides, in a rotating order so that no side always runs first."""
    sides = [("python", interpreter), ("baseline", lambda: baseline(samples)),
             ("trainer", lambda: trainer(samples, tmp))]
    out = []
    for i in range(n):
        order = sides[i % 3:] + sides[:i % 3]
        out.append({name: run() for name, run in order})
    return out


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(side: str, key: str) -> float:
        return statistics.median(r[side][key] for r in runs)

    ratios = [r["trainer"]["startup_s"] / r["baseline"]["ready_s"] for r in runs]
    return {
        "rounds": len(runs),
        "python_s": median("python", "python_s"),
        "baseline_imports_s": median("baseline", "imports_s"),
        "baseline_ready_s": median("baseline", "ready_s"),
        "trainer_imports_s": median("trainer", "imports_s"),
        "trainer_startup_s": median("trainer", "startup_s"),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "target": TARGET,
    }


def by_package(samples: int, tmp: Path) -> dict[str, dict[str, float]]:
    """One -X importtime run of each side: own import time summed per package."""
    flags = ("-X", "importtime")
    return {"baseline": baseline(samples, flags)["imports"],
            "trainer": trainer(samples, tmp, flags)["imports"]}


def report(result: dict[str, Any]) -> None:
    print(f"process start -> first training step, medians of {result['rounds']} rounds:")
    print(f"  python -c pass                  {result['python_s']:6.2f} s")
    print(f"  baseline: import lightning      {result['baseline_imports_s']:6.2f} s")
    print(f"  baseline: + spiral data ready   {result['baseline_ready_s']:6.2f} s")
    print(f"  trainer: imports done           {result['trainer_imports_s']:6.2f} s")
    print(f"  trainer: first training step    {result['trainer_startup_s']:6.2f} s")
    verdict = "meets" if result["ratio"] <= TARGET else "MISSES"
    print(f"trainer / baseline: {result['ratio']:.3f} (per round: "
          f"{', '.join(f'{r:.3f}' for r in result['ratios'])}), {verdict} the target "
          f"<= {TARGET}")
    packages = result.get("imports_s")
    if packages:
        print("import time by package (-X importtime, own time of each module), "
              "baseline / trainer:")
        names = sorted(set(packages["baseline"]) | set(packages["trainer"]),
                       key=lambda k: -packages["trainer"].get(k, 0.0))
        for name in names:
            print(f"  {name:<22}{packages['baseline'].get(name, 0.0) * 1000:>8.0f} ms"
                  f"{packages['trainer'].get(name, 0.0) * 1000:>8.0f} ms")


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--samples", type=int, default=200000,
                   help="spiral points (the task's default)")
    p.add_argument("--importtime", action="store_true", help="add the per-package breakdown")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    compileall.compile_dir(str(Path(hpctrain.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory(prefix="hpctrain-startup-") as name:
        tmp = Path(name)
        result = summarize(rounds(args.rounds, args.samples, tmp))
        if args.importtime:
            result["imports_s"] = by_package(args.samples, tmp)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
