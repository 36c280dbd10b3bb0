"""Run the packaged trainer: `python -m hpctrain.trainer --help`."""

from hpctrain import timeline

# First: the start-up timeline names the packages the imports went to (hpctrain.timeline).
timeline.watch_imports()

from hpctrain.trainer.entry import leave, main  # noqa: E402

leave(main())
