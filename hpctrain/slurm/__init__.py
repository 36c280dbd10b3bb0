"""The one SLURM client and its pure output parsers."""
