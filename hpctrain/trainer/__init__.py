"""The packaged Lightning trainer that runs inside jobs: how a task is trained (launch,
Lightning Trainer, checkpoints, safe stop, records); what is trained is `hpctrain/tasks/`.

Entry points: `python -m hpctrain.trainer` (what sbatch scripts run) and `hpctrain train` (the
same on the local machine). Importing this package loads neither torch nor Lightning: the
launch modules are light, and `runner` (the only heavy one) is imported when
training starts.
"""
