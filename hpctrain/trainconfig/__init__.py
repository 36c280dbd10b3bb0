"""The trainer's settings, shared by the trainer (inside a job) and the job side (which checks
them before it queues): `model` declares them, `load` builds them from defaults, file and flags,
`options` declares the command-line options of both the trainer and `hpctrain train`.

This package's own import is light (no pydantic, no YAML): the command line's --help reads
declarations from here without paying for the models.
"""

from typing import Literal

# Choices that are both a config field's and a flag's (trainconfig/options.py): one list.
ScaleLr = Literal["none", "linear"]
