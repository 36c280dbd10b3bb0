"""Working from a laptop: one OpenSSH ControlMaster per login, project sync, remote SLURM."""
