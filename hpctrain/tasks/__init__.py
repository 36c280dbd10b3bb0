"""What is trained: the tasks, one module each, found by `registry.py`.

`hpctrain/tasks/<name>.py` declares a task (`TASK = Task(...)`: its defaults, how it is built,
what it reports); `parts/` holds the building blocks the declarations use (hpctrain's
Classifier and its fast step, the networks, the datasets, the user's classes of task custom).
How a task is trained (launch, Lightning Trainer, checkpoints, safe stop, records) is
`hpctrain/trainer/`, which this package never imports.
"""
