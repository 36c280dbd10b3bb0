"""The start-up baselines: a script's way to its first training step on the spiral data.

What any script on the spiral data pays before its first step, with none of hpctrain's own code
in the way: run by `trainer_startup.py` side by side with the trainer. The Lightning baseline
imports Lightning (`import lightning`, which imports torchmetrics as Lightning does); with
`--plain` it is a plain PyTorch script (issue 43): `import torch`, the device, the data, a model
and its optimizer, up to the start of the first step, which is where the trainer's `startup_s`
ends too. Prints one JSON line: seconds from the process start (the kernel's record, as the
trainer measures) to the end of the imports, to the data being ready and to the first step.

    python benchmarks/startup_baseline.py --samples 200000 --seed 42
    python benchmarks/startup_baseline.py --plain
"""

import argparse
import json
import sys

if "--plain" not in sys.argv:
    import lightning  # noqa: F401  (what the Lightning baseline measures)
import torch

# Plain torch and os/time: what a plain script would write itself, at the same cost.
from hpctrain.tasks.parts.datasets.points import make_spiral
from hpctrain.timeline import process_age

imported = process_age()


def first_step(x: torch.Tensor, y: torch.Tensor) -> float | None:
    """Build the spiral MLP and its optimizer; the process age at the first step's start (then
    take that step, as a script would)."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    model = model.to(x.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    at = process_age()
    loss = torch.nn.functional.cross_entropy(model(x[:32]), y[:32])
    loss.backward()
    optimizer.step()
    return at


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=200000)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--plain", action="store_true", help="plain PyTorch: no Lightning import")
    args = p.parse_args()
    x, y = make_spiral(args.samples, 0.02, 1.5, args.seed)
    x, y = x.to(args.device), y.to(args.device)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    ready = process_age()
    step = first_step(x, y)
    print(json.dumps({"imports_s": imported, "ready_s": ready, "first_step_s": step}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
