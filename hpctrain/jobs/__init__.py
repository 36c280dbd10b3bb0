"""The everyday job loop: submit, follow the state, read the log, cancel (no CLI here)."""
