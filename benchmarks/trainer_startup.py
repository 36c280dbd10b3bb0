"""Trainer start-up against its baselines, side by side: process start to the first training step.

Two baselines (`startup_baseline.py`), each on the spiral task's data: a plain PyTorch script
(`import torch`, the device, the data, a model, up to its first step; issue 43's target: the
trainer at most 2.0x on a CPU machine, 1.5x on a GPU machine) and a Lightning script
(`import lightning`, then the data; issue 24's target: at most 1.15x). Each round runs, in a
rotating order, `python -c pass` (the interpreter alone), both baselines and the trainer (a
one-epoch spiral run whose metrics.json gives `startup_s` and `startup_imports_s`), each timed
from its process start as the kernel records it; a ratio is the median over rounds of trainer /
baseline within each round. Each side's whole-process CPU time (user + system) is reported
beside it: on a busy machine it moves far less than the wall clock (it includes the trainer's
one epoch and every side's exit, so keep `--samples` small to compare start-up by it).
`--full` adds the trainer with HPCTRAIN_LEAN_IMPORTS=0, importing torchmetrics whole as before
issue 43 (hpctrain/trainer/lean.py).

`--python` picks the interpreters, each a section of its own: the default is this one; the
realistic environment (torchvision, transformers and scipy beside torch and Lightning, as many
clusters' ML modules have) is the venv `bash scripts/realistic-venv.sh` builds and names.
hpctrain runs from this checkout in every one (PYTHONPATH). `--importtime` adds one
`-X importtime` run of each side and sums every module's own import time by package, so that
torch's cost is not counted again under Lightning's. Bytecode is compiled first, as a pip install
does (this machine sets PYTHONDONTWRITEBYTECODE).

    python benchmarks/trainer_startup.py --rounds 5 --importtime
    python benchmarks/trainer_startup.py --rounds 3 --full --python .venv/bin/python \\
        --python "$(bash scripts/realistic-venv.sh | tail -1)"
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hpctrain

HERE = Path(__file__).resolve().parent
SRC = Path(hpctrain.__file__).resolve().parents[1]
TARGETS = {"plain": 2.0, "lightning": 1.15}
# Packages shown by name; everything else is summed as "other".
SHOWN = ("torch", "lightning", "torchmetrics", "matplotlib", "sympy", "numpy",
         "lightning_utilities", "pydantic", "pydantic_core", "yaml", "hpctrain", "rich", "fsspec",
         "tensorboard", "tensorboardX", "torchvision", "transformers", "scipy", "PIL")
SIDES = ("python", "plain", "lightning", "trainer", "full")


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


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "PYTHONPATH": path, **(extra or {})}


def run_child(argv: list[str],
              env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run one side's process; also its CPU time (user + system, the whole process), which a
    busy machine disturbs far less than the wall clock."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


class Side:
    """One interpreter's sides: each run returns its figures (and, with flags, its imports)."""

    def __init__(self, python: str, samples: int, tmp: Path) -> None:
        self.python, self.samples, self.tmp = python, samples, tmp

    def python_alone(self, flags: tuple[str, ...] = ()) -> dict[str, Any]:
        """`python -c pass`, start to exit: what every side pays before its first import."""
        start = time.perf_counter()
        _, cpu = run_child([self.python, "-c", "pass"])
        return {"first_step_s": time.perf_counter() - start, "imports_s": 0.0, "cpu_s": cpu}

    def baseline(self, plain: bool, flags: tuple[str, ...] = ()) -> dict[str, Any]:
        argv = [self.python, *flags, str(HERE / "startup_baseline.py"),
                "--samples", str(self.samples), *(["--plain"] if plain else [])]
        done, cpu = run_child(argv, _env())
        result: dict[str, Any] = {**json.loads(done.stdout.splitlines()[-1]), "cpu_s": cpu}
        if flags:
            result["imports"] = import_times(done.stderr)
        return result

    def trainer(self, full: bool, flags: tuple[str, ...] = ()) -> dict[str, Any]:
        run_dir = Path(tempfile.mkdtemp(dir=self.tmp))
        env = _env({"HPCTRAIN_LEAN_IMPORTS": "0"} if full else None)
        done, cpu = run_child([self.python, *flags, *trainer_argv(self.samples, run_dir)], env)
        metrics = json.loads((run_dir / "metrics.json").read_text())
        result = {"first_step_s": metrics["startup_s"], "imports_s": metrics["startup_imports_s"],
                  "cpu_s": cpu}
        if flags:
            result["imports"] = import_times(done.stderr)
        return result

    def runs(self, full: bool) -> dict[str, Callable[..., dict[str, Any]]]:
        sides: dict[str, Callable[..., dict[str, Any]]] = {
            "python": self.python_alone,
            "plain": lambda flags=(): self.baseline(True, flags),
            "lightning": lambda flags=(): self.baseline(False, flags),
            "trainer": lambda flags=(): self.trainer(False, flags),
        }
        if full:
            sides["full"] = lambda flags=(): self.trainer(True, flags)
        return sides


def rounds(n: int, sides: dict[str, Callable[..., dict[str, Any]]]) -> list[dict[str, Any]]:
    """n rounds of the sides, in a rotating order so that no side always runs first."""
    order = list(sides.items())
    out = []
    for i in range(n):
        turn = order[i % len(order):] + order[:i % len(order)]
        out.append({name: run() for name, run in turn})
    return out


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per side, and the trainer's ratios to each baseline (and the full trainer's)."""
    sides = [s for s in SIDES if s in runs[0]]
    result: dict[str, Any] = {"rounds": len(runs), "sides": {}}
    for side in sides:
        result["sides"][side] = {
            key: statistics.median(r[side][key] for r in runs if r[side][key] is not None)
            for key in ("imports_s", "first_step_s", "cpu_s")}
    ratios: dict[str, list[float]] = {}
    for trainer in [s for s in ("trainer", "full") if s in sides]:
        for base in ("plain", "lightning"):
            ratios[f"{trainer}/{base}"] = [r[trainer]["first_step_s"] / r[base]["first_step_s"]
                                           for r in runs]
            ratios[f"{trainer}/{base} CPU"] = [r[trainer]["cpu_s"] / r[base]["cpu_s"]
                                               for r in runs]
    result["ratios"] = {k: {"median": statistics.median(v), "rounds": v}
                        for k, v in ratios.items()}
    return result


def measure(python: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One interpreter's section: its versions, the rounds' medians, the import breakdown."""
    probe = ("import importlib.metadata as m, sys\n"
             "def v(d):\n"
             "    try: return m.version(d)\n"
             "    except m.PackageNotFoundError: return None\n"
             "print(sys.version.split()[0], *[f'{d}={v(d)}' for d in "
             "('torch', 'lightning', 'torchmetrics', 'torchvision', 'transformers', 'scipy')])")
    versions = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                              check=True).stdout.split()
    compileall.compile_dir(str(Path(hpctrain.__file__).parent), quiet=1)
    sides = Side(python, args.samples, tmp).runs(args.full)
    result = {"python": python, "versions": versions, **summarize(rounds(args.rounds, sides))}
    if args.importtime:
        flags = ("-X", "importtime")
        result["imports_by_package"] = {name: run(flags)["imports"]
                                        for name, run in sides.items() if name != "python"}
    return result


LABELS = {"python": "python -c pass", "plain": "plain PyTorch script",
          "lightning": "Lightning script", "trainer": "trainer",
          "full": "trainer, torchmetrics whole"}


def report(section: dict[str, Any]) -> None:
    print(f"{section['python']}: {' '.join(section['versions'])}")
    print(f"  process start -> first training step, medians of {section['rounds']} rounds:")
    for side, fig in section["sides"].items():
        print(f"    {LABELS[side]:<30} imports {fig['imports_s']:6.2f} s   first step "
              f"{fig['first_step_s']:6.2f} s   process CPU {fig['cpu_s']:6.2f} s")
    for name, ratio in section["ratios"].items():
        target = TARGETS.get(name.split("/")[1]) if name.startswith("trainer/") else None
        verdict = "" if target is None else (
            f", {'meets' if ratio['median'] <= target else 'MISSES'} <= {target}")
        print(f"  {name}: {ratio['median']:.2f} (rounds: "
              f"{', '.join(f'{r:.2f}' for r in ratio['rounds'])}){verdict}")
    packages = section.get("imports_by_package")
    if packages:
        print("  import time by package (-X importtime, own time of each module), ms:")
        names = sorted(set().union(*packages.values()),
                       key=lambda k: -max(p.get(k, 0.0) for p in packages.values()))
        print("    " + " " * 22 + "".join(f"{side:>10}" for side in packages))
        for name in names:
            print(f"    {name:<22}" + "".join(f"{p.get(name, 0.0) * 1000:>10.0f}"
                                            for p in packages.values()))
        print(f"    {'total':<22}" + "".join(f"{sum(p.values()) * 1000:>10.0f}"
                                           for p in packages.values()))


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--samples", type=int, default=200000,
                   help="spiral points (the task's default)")
    p.add_argument("--python", action="append",
                   help="an interpreter to measure in (repeatable; default: this one)")
    p.add_argument("--full", action="store_true",
                   help="add the trainer importing torchmetrics whole (HPCTRAIN_LEAN_IMPORTS=0)")
    p.add_argument("--importtime", action="store_true", help="add the per-package breakdown")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hpctrain-startup-") as name:
        sections = [measure(python, args, Path(name)) for python in args.python or [sys.executable]]
    if args.json:
        print(json.dumps(sections, indent=2))
    else:
        for section in sections:
            report(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
