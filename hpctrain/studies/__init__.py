"""Runs read together: scaling studies, sweep reports, two runs compared, their plots."""
