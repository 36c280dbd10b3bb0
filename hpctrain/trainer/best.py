"""Which logged metric best.ckpt follows (never a name the module does not log), and its mode."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpctrain.values import rundir

# Words in metric names where smaller is better, when checkpoint.mode is not set.
_LOWER_IS_BETTER = {"mse", "rmse", "mae", "nll", "ppl", "wer", "cer", "ce", "bce", "kl", "entropy"}
_LOWER_PREFIXES = ("loss", "err", "dist", "perplex")


def guess_mode(metric: str) -> str:
    """min for losses and errors, max for everything else (accuracy, F1, AUC, ...)."""
    words = [w for w in re.split(r"[^a-z0-9]+", metric.lower()) if w]
    lower = any(
        w in _LOWER_IS_BETTER or w.startswith(_LOWER_PREFIXES) or w.endswith("loss") for w in words
    )
    return "min" if lower else "max"


@dataclass
class BestChoice:
    """The metric best.ckpt follows once it is known, and what to tell the user about it."""

    configured: str | None
    configured_mode: str | None
    metric: str | None = None
    mode: str | None = None
    note: str | None = None
    settled: bool = False

    def restore(self, metric: str | None, mode: str | None) -> bool:
        """Take a resumed run's choice; False when the config now names another metric."""
        if metric is None or (self.configured is not None and self.configured != metric):
            return False
        self.metric, self.mode, self.settled = metric, self.configured_mode or mode, True
        return True

    def settle(self, logged: list[str], validation: list[str], validated: bool) -> str | None:
        """Decide once validation has run (or never will); returns a line to print, if any."""
        if self.settled:
            return None
        if self.configured is not None and self.configured in logged:
            return self._pick(self.configured, "as configured")
        if not validated:
            return None
        choices = ", ".join(logged) or "nothing"
        if self.configured is not None:
            self.settled = True
            self.note = (
                f"checkpoint.monitor {self.configured!r} is not logged by the module "
                f"(it logs: {choices}); only {rundir.LAST_CKPT} is saved"
            )
            return f"warning: {self.note} - set checkpoint.monitor to one of those"
        if "val_loss" in validation:
            return self._pick("val_loss", "the module logs val_loss")
        if validation:
            return self._pick(validation[0], "the first validation metric the module logs")
        self.settled = True
        self.note = f"the module logs no validation metric; only {rundir.LAST_CKPT} is saved"
        hint = f"set checkpoint.monitor to one of: {choices}" if logged else "it logs no metric"
        return f"note: {self.note} ({hint})"

    def _pick(self, metric: str, why: str) -> str | None:
        guessed = self.configured_mode is None
        self.settled = True
        self.metric, self.mode = metric, self.configured_mode or guess_mode(metric)
        if self.configured is not None and not guessed:
            return None
        how = f"{self.mode}, guessed from the name" if guessed else self.mode
        return (
            f"{rundir.BEST_CKPT} follows {metric} ({how}): {why}; "
            "set checkpoint.monitor / checkpoint.mode to change"
        )
