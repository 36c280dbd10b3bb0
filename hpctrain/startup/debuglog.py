"""Debug lines (`--debug` shows them) without importing logging where nobody listens.

logging, with the traceback and textwrap modules it imports, is 3 ms of a submit's start-up.
Whoever listens to a debug line (`--debug` in cli/root.py, a test's caplog, a program that
embeds hpctrain) has imported logging and set a handler and a level first; where logging was
never imported, no handler exists and logging would drop the line too.
"""

from __future__ import annotations

import sys


def debug(name: str, message: str, *args: object) -> None:
    """logging.getLogger(name).debug(message, *args), where logging is loaded."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger(name).debug(message, *args)
