"""An account's usage, fair share and held GPU-hours, asked and shown (`free`,
`render --check`, every dry run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpctrain.cli.output import plain_columns

if TYPE_CHECKING:
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.slurm.usage import AccountUsage, Usage

DEFAULT_DAYS = 30


def _hours(value: float | None) -> str:
    return "?" if value is None else f"{value:,.1f}"


def _fair(a: AccountUsage) -> str:
    if a.fair_share is None:
        return "?"
    parts = [f"{a.fair_share:.3f}"]
    if a.shares is not None and a.usage is not None:
        parts.append(f"(shares {a.shares:.3f}, usage {a.usage:.3f})")
    return " ".join(parts)


def usage_text(label: str, found: Usage, days: float) -> str:
    """A table of the accounts, then what your jobs hold, as plain lines."""
    held = (f"{label}: your queued and running jobs hold {_hours(found.held_gpu_hours)} "
            "GPU-hours at most")
    if found.unavailable:
        return f"{held}\n{label}: no usage: the accounting did not answer ({found.unavailable})\n"
    columns: tuple[str, ...] = ("PROFILE", "ACCOUNT", f"GPU-H ({days:g} D)", "YOURS",
                                "FAIR SHARE")
    rows: list[tuple[str, ...]] = [
        (label, a.account, _hours(a.gpu_hours), _hours(a.your_gpu_hours), _fair(a))
        for a in found.accounts]
    if found.fair_share_orders is False:
        columns, rows = columns[:-1], [r[:-1] for r in rows]
        held += f"\n{label}: fair share does not order this queue ({found.ordering})"
    return plain_columns(columns, rows) + held + "\n"


def for_account(found: Usage, account: str | None) -> Usage:
    """The account a job charges (every one of yours where the job names none: SLURM then
    charges your default)."""
    from hpctrain.slurm.usage import only

    return only(found, [account]) if account else found


def charged(client: SlurmClient, account: str | None) -> Usage:
    """The accounting's view of the account a job charges, asked now."""
    return for_account(client.usage(DEFAULT_DAYS), account)


def show_usage(label: str, found: Usage) -> None:
    """The usage on stderr, beside a plan (stdout may be a script)."""
    from hpctrain.cli.output import err_console

    err_console.print(usage_text(label, found, DEFAULT_DAYS), end="", highlight=False,
                      markup=False, soft_wrap=True)
