"""Run the packaged trainer: `python -m hpctrain.trainer --help`."""

from hpctrain.trainer.entry import leave, main

leave(main())
