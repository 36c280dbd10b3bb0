"""Programs that fail the way researchers' programs fail, shared by the cluster tests and the
script that records their jobs' output (tests/diagnosis/recorded/record.py)."""

from __future__ import annotations

from pathlib import Path

PROGRAMS = {
    "imp.py": "import numpy\nimport nosuchmodule_for_why\n",
    "exc.py": "def ratio(x):\n    return 1 / x\n\n\nratio(0)\n",
    "miss.py": "with open('data/train.csv') as f:\n    f.read()\n",
    # Rank 1 never reaches the all-reduce; rank 0 waits for it under a 10 s timeout.
    "hang.py": (
        "import datetime, os, time\n"
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=10))\n"
        "if dist.get_rank() == 1:\n"
        "    time.sleep(120)\n"
        "dist.all_reduce(torch.ones(1))\n"),
}


def write_project(root: Path) -> None:
    """The programs as the package `pkg` of a project at `root`."""
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "__init__.py").write_text("")
    for name, text in PROGRAMS.items():
        (root / "pkg" / name).write_text(text)
