"""The login's side of a remote submit: the snapshot modules run by the login's python3
(snapshots/spec.py: script_source), answering in JSON on stdout."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from hpctrain.snapshots.freeze import existing_snapshot, freeze
from hpctrain.snapshots.gc import GC_GRACE_S, collect
from hpctrain.snapshots.model import SnapshotError
from hpctrain.snapshots.workdir import link_code


def main(argv: list[str]) -> int:
    """`freeze ROOT STORE CODE_DIR [--keep-out P]... [--in-place P]...`, the files to freeze
    NUL-separated on stdin; `link ROOT STORE CODE_DIR --snapshot ID [...]` links an existing
    snapshot (a rerun). Prints the snapshot (or the error) as JSON."""
    import argparse

    if argv[:1] == ["collect"]:
        return _collect_main(argv[1:])
    p = argparse.ArgumentParser(prog="hpctrain-snapshot")
    p.add_argument("action", choices=["freeze", "link"])
    p.add_argument("root")
    p.add_argument("store")
    p.add_argument("code_dir")
    p.add_argument("--keep-out", action="append", default=[])
    p.add_argument("--in-place", action="append", default=[])
    p.add_argument("--snapshot")
    a = p.parse_args(argv)
    root, store = Path(a.root).expanduser(), Path(a.store).expanduser()
    keep_out, in_place = tuple(a.keep_out), tuple(a.in_place)
    try:
        if a.action == "link":
            snap = existing_snapshot(store, a.snapshot, in_place)
        else:
            names = [n for n in sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
                     .split("\0") if n]
            snap = freeze(root, store, keep_out=keep_out, in_place=in_place, names=names)
        link_code(Path(a.code_dir).expanduser(), snap, root, keep_out)
    except SnapshotError as e:
        print(json.dumps({"error": e.what, "fix": e.fix}))
        return 3
    except OSError as e:
        print(json.dumps({"error": f"snapshot failed: {e}", "fix": "check the file system"}))
        return 3
    print(json.dumps(asdict(snap)))
    return 0


def _collect_main(argv: list[str]) -> int:
    """`collect STORE... --keep ID... --grace S [--dry-run]`: gc on a login (JSON list out)."""
    import argparse

    p = argparse.ArgumentParser(prog="hpctrain-snapshot collect")
    p.add_argument("stores", nargs="+")
    p.add_argument("--keep", action="append", default=[])
    p.add_argument("--grace", type=float, default=GC_GRACE_S)
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    done = [asdict(collect(Path(s).expanduser(), set(a.keep), dry_run=a.dry_run,
                           grace_s=a.grace))
            for s in a.stores if (Path(s).expanduser() / "manifests").is_dir()]
    print(json.dumps(done))
    return 0
