"""Compiled Jinja templates (see hpctrain/render/templating.py)."""
