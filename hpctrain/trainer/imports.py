"""The installed distributions behind the modules a run imported (imports.json): the versions
the job ran with, where environment.json lists everything that was installed."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

from hpctrain.trainer.callbacks import atomic_write_text
from hpctrain.values.rundir import RunDir


def imported_distributions(modules: Iterable[str]) -> dict[str, str]:
    """{distribution: version} of the distributions that provide `modules`' top-level names
    (the standard library and modules of no installed distribution are left out)."""
    from importlib import metadata

    owners = metadata.packages_distributions()
    found: dict[str, str] = {}
    for top in {name.partition(".")[0] for name in modules}:
        for dist in owners.get(top, ()):
            try:
                found[dist.lower()] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    return dict(sorted(found.items()))


def write_imports(run_dir: Path) -> None:
    """Record what this process has imported so far (the task, its data, Lightning, torch)."""
    packages = imported_distributions(list(sys.modules))
    atomic_write_text(RunDir(run_dir).imports,
                      json.dumps({"python": sys.version.split()[0], "packages": packages},
                                 indent=1) + "\n")
