"""The trainer's settings, shared by the trainer (inside a job) and the job side (which checks
them before it queues): `model` checks them against the tasks, `load` builds them from
defaults, file and flags, `options` declares the command-line options of both the trainer and
`hpctrain train`. The settings' fields are in `hpctrain/trainsettings/`, below the tasks.

This package's own import is light (no pydantic, no YAML): the command line's --help reads
declarations from here without paying for the models.
"""
