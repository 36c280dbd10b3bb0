"""Each shipped cluster's Apptainer job against what its sources document (docs/cluster-facts.md,
"Containers"): the golden jobs of tests/unit/test_containers.py, read for the site's own line.
None of this has run on a real Apptainer here; these are the lines a user of each site runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.test_containers import GOLDEN, _container_words, _script

# site -> (its source in docs/cluster-facts.md, the module its source loads first, if any)
SITES = {
    # GC1 (D): `apptainer exec IMAGE CMD`, Apptainer on PATH, no module.
    "gilbreth": ("GC1", None),
    # RC1 (S): `module load apptainer/1.2.2`, then `srun apptainer exec IMAGE CMD`.
    "raven": ("RC1", "apptainer/1.2.2"),
    # MC1 (S): Apptainer available, no module named for it.
    "marvin": ("MC1", None),
}
FACTS = Path(__file__).resolve().parents[2] / "docs" / "cluster-facts.md"


def _golden(site: str) -> tuple[str, dict[str, object]]:
    kw = dict(GOLDEN[f"container-{site}-apptainer"])
    kw.pop("profile")
    return _script(site, **kw), kw


@pytest.mark.parametrize("site", sorted(SITES))
def test_the_sites_documented_line_is_each_ranks_line(site: str, tmp_path: Path) -> None:
    text, kw = _golden(site)
    words = _container_words(text, tmp_path)
    # `apptainer exec [options] IMAGE`, then the command: the form every source shows.
    assert words[:2] == ["apptainer", "exec"] and words[-1] == kw["container"], words
    assert "--nv" in words  # every golden job has GPUs
    # srun starts each rank, the runtime's words just before the command (RC1's `srun apptainer
    # exec IMAGE CMD`, with srun's rank-variable wrapper outside the container).
    launch = next(line for line in text.splitlines() if "hpctrain-srun " in line)
    assert re.search(r'hpctrain-srun "\$\{hpctrain_container\[@\]\}" \S', launch), launch


@pytest.mark.parametrize("site", sorted(SITES))
def test_the_module_the_source_loads_is_loaded_before_the_launch(site: str) -> None:
    text, _ = _golden(site)
    source, module = SITES[site]
    loads = re.findall(r"^  module load (\S+) \|\|", text, flags=re.M)
    if module is None:
        assert not [m for m in loads if "apptainer" in m], loads
        return
    assert loads[-1] == module, loads
    assert text.index(f"module load {module}") < text.index("hpctrain-srun ")
    assert f"**{source}**" in FACTS.read_text()


def test_each_source_is_named_with_its_address() -> None:
    facts = FACTS.read_text()
    section = facts[facts.index("## Containers (issue 56)"):]
    for source, _ in SITES.values():
        entry = next(line for line in section.splitlines() if line.startswith(f"- **{source}**"))
        following = section[section.index(entry):].split("\n- **")[0]
        assert "https://" in following, entry
