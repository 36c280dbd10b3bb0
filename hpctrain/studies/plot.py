"""The studies' plots, drawn into PNG files: a scaling study's speedup and efficiency, a sweep's
metric against each swept setting. matplotlib is optional and loaded only here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def _pyplot() -> Any | None:
    """matplotlib's pyplot on the file-only backend; None where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def can_plot() -> bool:
    """True when matplotlib is installed (the plots' optional dependency)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _errors(rows: Sequence[dict[str, Any]], factor: Callable[[dict[str, Any]], float]
            ) -> list[list[float]]:
    """matplotlib's yerr (below, above) from each row's speedup range, times `factor`."""
    return [[factor(r) * (r["speedup"] - r["speedup_range"][0]) for r in rows],
            [factor(r) * (r["speedup_range"][1] - r["speedup"]) for r in rows]]


def scaling(rows: Sequence[dict[str, Any]], path: Path, title: str) -> Path | None:
    """Speedup against GPUs with the ideal line, and efficiency, each with its min..max; an
    implausible efficiency is a hollow marker, not a point of the line. None without
    matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    shown = sorted((r for r in rows if r["speedup"] is not None), key=lambda r: r["gpus"])
    if not shown:
        return None
    good = [r for r in shown if not r["implausible"]]
    odd = [r for r in shown if r["implausible"]]
    base = shown[0]["gpus"]  # the table's base: the fewest GPUs measured
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    ideal = sorted({base, *(r["gpus"] for r in shown)})
    ax1.plot(ideal, [g / base for g in ideal], "--", color="grey", label="ideal")
    ax2.axhline(100, linestyle="--", color="grey", label="ideal")
    if good:
        ax1.errorbar([r["gpus"] for r in good], [r["speedup"] for r in good], fmt="o-",
                     yerr=_errors(good, lambda r: 1.0), capsize=3,
                     label="measured (median, min..max)")
        ax2.errorbar([r["gpus"] for r in good], [100 * r["efficiency"] for r in good],
                     fmt="o-", color="C1", yerr=_errors(good, lambda r: 100 * base / r["gpus"]),
                     capsize=3, label="measured (median, min..max)")
    if odd:
        ax1.plot([r["gpus"] for r in odd], [r["speedup"] for r in odd], "o", mfc="none",
                 color="C3", label="implausible, not a result")
        ax2.plot([r["gpus"] for r in odd], [100 * r["efficiency"] for r in odd], "o",
                 mfc="none", color="C3", label="implausible, not a result")
    for r in shown:
        mark = " (noisy)" if r["noisy"] else ""
        ax1.annotate(r["topology"] + mark, (r["gpus"], r["speedup"]),
                     textcoords="offset points", xytext=(4, -12), fontsize=8)
    for ax, label in ((ax1, "speedup (samples/s vs the first)"), (ax2, "efficiency (%)")):
        ax.set_xlabel("GPUs (nodes x GPUs per node)")
        ax.set_ylabel(label)
        ax.set_xticks(ideal)
        ax.margins(x=0.12)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    ax2.set_ylim(0, max(110, *(100 * r["efficiency"] + 10 for r in shown)))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sweep(rows: Sequence[dict[str, Any]], keys: Sequence[str], measured: str, path: Path,
         title: str) -> Path | None:
    """The metric's best value against each swept setting, one panel per key (log scale for
    a positive range over two decades; `measured` labels the value axis); None without
    matplotlib or a measured point."""
    plt = _pyplot()
    if plt is None:
        return None
    good = [r for r in rows if r["best"] is not None]
    if not good or not keys:
        return None
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.8), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        _panel(ax, good, key, measured)
    failed = len(rows) - len(good)
    fig.suptitle(title + (f"\n{failed} point(s) without a value" if failed else ""),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _panel(ax: Any, rows: Sequence[dict[str, Any]], key: str, measured: str) -> None:
    raw = [r["settings"].get(key) for r in rows]
    numbers = [_number(v) for v in raw]
    y = [r["best"] for r in rows]
    if all(n is not None for n in numbers):
        xs = [float(n) for n in numbers if n is not None]
        ax.scatter(xs, y, alpha=0.8)
        if min(xs) > 0 and max(xs) / min(xs) >= 100:
            ax.set_xscale("log")
    else:
        labels = list(dict.fromkeys(str(v) for v in raw))
        ax.scatter([labels.index(str(v)) for v in raw], y, alpha=0.8)
        ax.set_xticks(range(len(labels)), labels, rotation=30)
    ax.set_xlabel(key)
    ax.set_ylabel(measured)
    ax.grid(True, alpha=0.3)


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
