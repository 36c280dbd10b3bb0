"""Monitoring: the per-node sampler jobs run, and the stats it summarises (docs/monitoring.md)."""
