"""Every failed test of a run, read from the stages' JUnit files, printed last.

    python3 scripts/failures.py FILE.xml [FILE.xml...]

The stages run side by side and each one's output is printed as a block when it ends, so a
failure in an early stage scrolls far above the run's last lines; CI keeps only those. This
lists each failure and error again at the very end, with the stage, the test and the tail of
its report. Exits 0 either way: the run's exit status is scripts/test.sh's.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TAIL_LINES = 25


def failures(path: Path) -> list[tuple[str, str, str]]:
    """(test id, message, the report's last lines) for each failed or erred test in `path`."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        return [(path.name, f"unreadable JUnit file: {e}", "")]
    found = []
    for case in root.iter("testcase"):
        for bad in [*case.findall("failure"), *case.findall("error")]:
            test = f"{case.get('classname', '')}::{case.get('name', '')}"
            lines = (bad.text or "").rstrip().splitlines()
            found.append((test, bad.get("message", ""), "\n".join(lines[-TAIL_LINES:])))
    return found


def main(argv: list[str]) -> int:
    rows = [(Path(f).stem, *row) for f in argv for row in failures(Path(f))]
    if not rows:
        return 0
    print(f"\n{len(rows)} failed test(s), again here because a stage's output scrolls away:")
    for stage, test, message, tail in rows:
        print(f"\n[{stage}] FAILED {test}\n  {message[:500]}")
        for line in tail.splitlines():
            print(f"  | {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
