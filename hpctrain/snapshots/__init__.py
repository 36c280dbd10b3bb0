"""Code snapshots: every job runs the project as it was when it was submitted (docs/jobs.md,
"Code snapshots"). `store.py` freezes and links, here and (run as a script) on a login."""
