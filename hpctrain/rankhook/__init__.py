"""What hpctrain loads into every rank of a job, without an edit of the user's program.

`site/sitecustomize.py` is found by Python at start-up (the batch script puts `SITE_DIR` on
PYTHONPATH for the launch line); it installs `hook`. Standard library only.
"""

from __future__ import annotations

import os

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")
