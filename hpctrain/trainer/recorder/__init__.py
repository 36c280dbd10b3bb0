"""What a training run records: epoch metrics, throughput, start-up, restarts, checkpoints,
console lines and metrics.json, each in its own part; `run.RunRecorder` drives them.

Importing the package itself loads nothing heavy: `metrics_file`, `lines` and the records in
`hpctrain.trainer.records` are plain Python; the parts that read the training import torch.
"""
