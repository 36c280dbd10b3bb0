r"""Record what `hpctrain profiles discover|check` reads from the dev cluster, per profile.

    flock /tmp/hpctrain-cluster.lock bash -c 'set -eu; export HPCTRAIN_HOME=$PWD/.hpctrain; \
        trap ".venv/bin/hpctrain devcluster up --profile local --nodes 2 --replace" EXIT; \
        for p in gilbreth raven marvin local; do \
            .venv/bin/hpctrain devcluster up --profile $p --replace; \
            SLURM_CONF=$HPCTRAIN_HOME/state/devcluster/etc/slurm.conf \
            .venv/bin/python tests/profiles/recorded/record.py $p; \
        done'

(the trap gives the shared cluster its usual profile back, whatever happens); on SLURM 24.11 the
same loop inside the Debian 13 root (README.md beside this file). Every command
is made by hpctrain's own client methods (slurm_version, partition_limits, node_inventory on
either path, config, qos_limits, associations), so each recording holds the command line the
client builds. Each goes to `slurm-<version>/<profile>/<name>.json` with its entry in
MANIFEST.json; tests/profiles/test_inventory.py feeds them to hpctrain.slurm.inventory.
`sacctmgr_off` is sacctmgr reading a copy of the cluster's slurm.conf with
`AccountingStorageType=accounting_storage/none` (a site without accounting).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hpctrain.errors import SlurmError  # noqa: E402
from hpctrain.slurm.client import SlurmClient  # noqa: E402
from hpctrain.slurm.versions import dialect_for  # noqa: E402
from tests.recorded import (  # noqa: E402
    Recorder,
    RecordingClient,
    machine_of,
    parse_args,
    slurm_set,
    slurm_version,
)

HERE = Path(__file__).resolve().parent


def main() -> int:
    args = parse_args(__doc__, profile=True)
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        print("set SLURM_CONF to the dev cluster's slurm.conf", file=sys.stderr)
        return 2
    plain = SlurmClient.local(conf, timeout_s=30)
    version = slurm_version(plain)
    rec = Recorder(slurm_set(HERE, version), slurm_version=version,
                   machine=machine_of(plain.cluster_name(), args.profile))
    p = args.profile
    c = RecordingClient(rec, slurm_conf=conf)
    with c.saving(f"{p}/sinfo_version"):
        c.slurm_version()
    with c.saving(f"{p}/partitions"):
        c.partition_limits()
    text = dialect_for(None, {})
    with c.saving(f"{p}/nodes", "the node path of SLURM before sinfo --json"):
        c.node_inventory(text)
    if (dialect := c.dialect()).nodes_argv() != text.nodes_argv():
        with c.saving(f"{p}/nodes_json", f"the node path of {dialect.describe()}"):
            c.node_inventory(dialect)
    if dialect.json:
        with c.saving(f"{p}/partitions_json",
                      "kept to show why partitions stay on the text path (versions.py)"):
            c.run(["scontrol", "show", "partition", "--json"])
    with c.saving(f"{p}/config"):
        c.config()
    with c.saving(f"{p}/qos", f"as {getpass.getuser()}"):
        c.qos_limits()
    with c.saving(f"{p}/assoc", f"as {getpass.getuser()}"):
        c.associations(getpass.getuser())
    _record_accounting_off(rec, conf, p)
    return 0


def _record_accounting_off(rec: Recorder, conf: str, profile: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        off = Path(tmp) / "slurm.conf"
        off.write_text(re.sub(r"(?m)^AccountingStorageType=.*$",
                              "AccountingStorageType=accounting_storage/none",
                              Path(conf).read_text()))
        client = RecordingClient(rec, slurm_conf=str(off))
        how = ("SLURM_CONF: a copy of the cluster's slurm.conf with "
               "AccountingStorageType=accounting_storage/none")
        with client.saving(f"{profile}/sacctmgr_off", how), contextlib.suppress(SlurmError):
            client.qos_limits()


if __name__ == "__main__":
    sys.exit(main())
