"""Domain values shared by every layer, pure: the run directory's one definition, SLURM's
notations (times, sizes, topologies), the global batch split, did-you-mean spelling."""
