"""Run the packaged trainer: `python -m hpctrain.trainer --help`."""

import os
import sys

from hpctrain.trainer.entry import main
from hpctrain.trainer.signals import EXIT_REQUEUE


def _leave(code: int) -> None:
    """Exit at once, everything being on disk, instead of tearing down the interpreter.

    A stop (EXIT_REQUEUE): srun --kill-on-bad-exit kills ranks that are still exiting, and
    tearing down live process groups can hang. A finished DDP run: with gloo, a rank whose
    interpreter tears down after a peer has gone may abort in a background thread ("terminate
    called without an active exception", exit 134), failing a job whose every rank finished;
    the barrier makes all ranks finish first (examples/tutorials/ranks.py does the same).
    """
    if code == 0:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            sys.exit(0)
        dist.barrier()
    elif code != EXIT_REQUEUE:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


_leave(main())
