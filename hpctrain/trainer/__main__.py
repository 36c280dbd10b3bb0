"""Run the packaged trainer: `python -m hpctrain.trainer --help`."""

import os
import sys

from hpctrain.trainer.entry import main
from hpctrain.trainer.signals import EXIT_REQUEUE

code = main()
if code == EXIT_REQUEUE:
    # Everything is on disk. Exit at once instead of tearing down the interpreter: srun
    # --kill-on-bad-exit kills ranks that are still exiting, and tearing down live process
    # groups can hang.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
