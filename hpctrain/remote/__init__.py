"""The ssh side of working from a laptop: one OpenSSH ControlMaster per login (connection.py)
and the project's sync to it (sync.py); a login's SLURM commands run over the master through
places/login.py's SshTransport."""
