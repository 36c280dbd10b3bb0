"""What became of queued jobs: the one watcher, which jobs a command means, logs, why."""
