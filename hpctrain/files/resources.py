"""Where the data files beside the package live: the Jinja templates and the shipped profiles.

A checkout and an editable install find them next to the package (`templates/`,
`cluster_profiles/` at the repository's top level); an installed wheel carries them inside the
package as `hpctrain/_data/` (pyproject.toml's force-include). One lookup serves all three.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hpctrain.errors import HpctrainError

_PACKAGE = Path(__file__).resolve().parent.parent


@cache
def _data_root() -> Path:
    bundled = _PACKAGE / "_data"
    for root in (bundled, _PACKAGE.parent):
        if (root / "templates").is_dir() and (root / "cluster_profiles").is_dir():
            return root
    raise HpctrainError(
        f"hpctrain's data files (templates/, cluster_profiles/) are missing next to {_PACKAGE}",
        "reinstall hpctrain (pip install --force-reinstall hpctrain)",
    )


def templates_dir() -> Path:
    """The Jinja templates: the sbatch script and the dev cluster's config files."""
    return _data_root() / "templates"


def profiles_dir() -> Path:
    """The shipped cluster profiles (raven, gilbreth, marvin, local)."""
    return _data_root() / "cluster_profiles"
