"""The directory image the container tests' jobs run in (scripts/container-image.sh).

scripts/test.sh makes it before the lanes start and names it in HPCTRAIN_TEST_CONTAINER_IMAGE:
the 24.11 lane's tests run inside the Debian 13 root, where the script (which builds that root)
cannot run, and two lanes making it at once would race. Run alone, a test makes it itself.
"""

from __future__ import annotations

import os
import subprocess
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The file the script writes at the image's root (its stamp): a process that reads it through
# its root is inside the image.
MARKER = "hpctrain-container-image"


@cache
def container_image() -> Path:
    named = os.environ.get("HPCTRAIN_TEST_CONTAINER_IMAGE")
    if named:
        return Path(named)
    # Once per machine: the root's links, seconds (the root itself: scripts/slurm-root.sh).
    out = subprocess.run(["bash", str(REPO / "scripts" / "container-image.sh")],
                         capture_output=True, text=True, timeout=900, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


@cache
def image_stamp() -> str:
    """The marker's text, as a rank inside the image reads it."""
    return (container_image() / MARKER).read_text()
