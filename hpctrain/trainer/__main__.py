"""Run the packaged trainer: `python -m hpctrain.trainer --help`."""

import sys

from hpctrain.trainer.entry import main

sys.exit(main())
