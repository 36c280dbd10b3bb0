"""Why a job ended as it did, from its accounting, logs, metrics and monitor (pure)."""
