"""srun's words about a task that ended badly, read by the supervisor (an attempt's cause) and by
`why` (diagnosis/logscan.py) alike: one pattern, so that both read the same lines."""

from __future__ import annotations

import re

# "srun: error: node2: task 3: Killed", "srun: error: node1: tasks 0-1: Exited with exit code 1"
SRUN_TASK = re.compile(r"srun: error: (?P<node>[^:\s]+): tasks? (?P<task>[\d,\-]+): "
                       r"(?P<what>.+)$")
