"""The packaged Lightning trainer that runs inside jobs.

Entry points: `python -m hpctrain.trainer` (what sbatch scripts run) and `hpctrain train` (the
same on the local machine). Importing this package loads neither torch nor Lightning: the
config, launch and fetch modules are light, and `runner` (the only heavy one) is imported when
training starts.
"""
