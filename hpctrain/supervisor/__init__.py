"""The in-job supervisor (`--restarts`): the launch step started again inside the allocation."""
