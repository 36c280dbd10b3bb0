"""Record what `hpctrain profiles discover|check` reads from the dev cluster, per profile.

    flock /work/notes/devcluster.lock sh -c 'HPCTRAIN_HOME=$PWD/.hpctrain \
        .venv/bin/hpctrain devcluster up --profile raven --replace && \
        SLURM_CONF=$PWD/.hpctrain/state/devcluster/etc/slurm.conf \
        .venv/bin/python tests/profiles/recorded/record.py raven'

Each command's argv, return code, stdout and stderr go to `<profile>/<name>.json`, exactly as
SLURM printed them; tests/profiles/test_inventory.py feeds them to hpctrain.slurm.inventory.
`sacctmgr_off` is sacctmgr reading a copy of the cluster's slurm.conf with
`AccountingStorageType=accounting_storage/none` (a site without accounting).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.inventory import ASSOC_FORMAT, QOS_FORMAT

HERE = Path(__file__).resolve().parent


def main() -> int:
    conf = os.environ.get("SLURM_CONF")
    if not conf or len(sys.argv) != 2:
        print("usage: SLURM_CONF=... record.py PROFILE", file=sys.stderr)
        return 2
    out = HERE / sys.argv[1]
    out.mkdir(exist_ok=True)
    user = getpass.getuser()
    commands = {
        "sinfo_version": ["sinfo", "--version"],
        "partitions": ["scontrol", "--oneliner", "show", "partition"],
        "nodes": ["scontrol", "--oneliner", "show", "node"],
        "sinfo_json": ["sinfo", "--json"],
        "config": ["scontrol", "show", "config"],
        "qos": ["sacctmgr", "-P", "-n", "show", "qos", f"format={QOS_FORMAT}"],
        "assoc": ["sacctmgr", "-P", "-n", "show", "assoc", f"user={user}",
                  f"format={ASSOC_FORMAT}"],
    }
    client = SlurmClient.local(conf, timeout_s=30)
    for name, argv in commands.items():
        _save(out / f"{name}.json", client.run(argv, check=False))
    with tempfile.TemporaryDirectory() as tmp:
        off = Path(tmp) / "slurm.conf"
        text = Path(conf).read_text()
        off.write_text(re.sub(r"(?m)^AccountingStorageType=.*$",
                              "AccountingStorageType=accounting_storage/none", text))
        res = SlurmClient.local(str(off), timeout_s=30).run(commands["qos"], check=False)
        _save(out / "sacctmgr_off.json", res)
    return 0


def _save(path: Path, res: object) -> None:
    data = {k: getattr(res, k) for k in ("argv", "returncode", "stdout", "stderr")}
    data["argv"] = list(data["argv"])
    path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
