"""The trainer's settings, shared by the trainer (inside a job) and the job side (which checks
them before it queues): `model` declares them, `load` builds them from defaults, file and flags.

This package's own import is light (no pydantic, no YAML): the command line's --help reads
declarations from here without paying for the models.
"""
