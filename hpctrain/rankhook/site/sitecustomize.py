"""hpctrain's rank hook, loaded by every Python process of a job's launch step.

The batch script puts this folder first on PYTHONPATH for the launch line only, so Python
imports this file at start-up (site's `sitecustomize`). It runs the environment's own
sitecustomize first, if there is one, then installs hpctrain.rankhook (docs/why.md, "The rank
hook"). Nothing here may break the user's program: every failure is swallowed.
"""

import os
import sys


def _chain() -> None:
    """Run the sitecustomize this one hides, as Python would have without it."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _chain()
except Exception as e:  # noqa: BLE001 - Python would have printed it and gone on, as here
    print(f"hpctrain rank hook: the environment's sitecustomize failed: {e!r}", file=sys.stderr)

if os.environ.get("HPCTRAIN_RUN_DIR") and os.environ.get("HPCTRAIN_RANK_HOOK", "on") != "off":
    try:
        from hpctrain.rankhook import hook

        hook.install()
    except Exception:  # noqa: BLE001, S110 - the program runs on without the hook
        pass
