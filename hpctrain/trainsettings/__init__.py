"""The trainer's settings' types, below both the tasks that read them and trainconfig, which
checks them against the tasks: this package imports neither, so neither imports the other back.

This package's own import is light (no pydantic): the command line's --help reads `ScaleLr`
from here without paying for the models (`sections`).
"""

from typing import Literal

# Choices that are both a config field's and a flag's (trainconfig/options.py): one list.
ScaleLr = Literal["none", "linear"]
