"""hpctrain: SLURM training jobs from cluster profiles."""

__version__ = "0.1.0"
