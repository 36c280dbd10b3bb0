"""Print what hpctrain[train,dev] needs, one requirement a line, from pyproject.toml.

Read by scripts/setup.sh and scripts/slurm-root.sh, which install these into a venv shared by
every clone on the machine and key that venv by this list (not by the rest of pyproject.toml,
whose tool settings change often and install nothing). The build requirements come too, with
editables (what hatchling asks for an editable build): the clone's own editable install is
built without isolation, so without a round to the package index.

`--names EXTRA...`: only the distribution names that hpctrain and those extras need at run
time, one a line: what setup.sh checks in a .venv it did not make before using it as it is.

`--installed`: what an editable install of hpctrain itself is made from (the [project] table:
its console scripts, entry points, metadata; the build system and hatch's settings), as one
line of JSON: what the stamps of the clone's .venv and of the 24.11 root's install hash.
"""

import json
import re
import sys
import tomllib
from pathlib import Path

toml = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
project = toml["project"]
extras = project.get("optional-dependencies", {})
if sys.argv[1:2] == ["--names"]:
    for req in project["dependencies"] + [r for x in sys.argv[2:] for r in extras[x]]:
        name = re.match(r"[A-Za-z0-9._-]+", req)
        print(name.group(0) if name else req)
    sys.exit(0)
if sys.argv[1:] == ["--installed"]:
    hatch = toml.get("tool", {}).get("hatch")
    print(json.dumps([project, toml.get("build-system"), hatch], sort_keys=True))
    sys.exit(0)
build = toml.get("build-system", {}).get("requires", [])
for req in project["dependencies"] + extras["train"] + extras["dev"] + build + ["editables"]:
    print(req)
