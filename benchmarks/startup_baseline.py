"""The start-up baseline: `import lightning`, then the spiral task's data on the device.

What any Lightning script on the spiral data pays before its first step, with none of
hpctrain's own code in the way: run by `trainer_startup.py` side by side with the trainer.
Prints one JSON line: seconds from the process start (the kernel's record, as the trainer
measures) to the end of the imports and to the data being ready.

    python benchmarks/startup_baseline.py --samples 200000 --seed 42
"""

import argparse
import json
import sys

import lightning  # noqa: F401  (what the baseline measures)
import torch

# Plain torch and os/time: what a plain script would write itself, at the same cost.
from hpctrain.tasks.parts.datasets.points import make_spiral
from hpctrain.trainer.startup import process_age

imported = process_age()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=200000)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    x, y = make_spiral(args.samples, 0.02, 1.5, args.seed)
    x, y = x.to(args.device), y.to(args.device)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    print(json.dumps({"imports_s": imported, "ready_s": process_age()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
