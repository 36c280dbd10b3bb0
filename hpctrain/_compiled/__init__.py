"""Compiled Jinja templates (see hpctrain/templating.py)."""
