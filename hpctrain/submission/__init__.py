"""What a submission queues: each kind planned as a value (the dry run), then run at a place."""
