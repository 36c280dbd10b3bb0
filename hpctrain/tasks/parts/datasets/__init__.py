"""Datasets of the built-in tasks; `fetch` (downloads) imports neither torch nor numpy."""
