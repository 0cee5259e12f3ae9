"""Figure helpers shared by the studies' figures (Matplotlib's object API, no global state)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._extras import missing_extra
from ..config import SelectorConfig

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _figure_class() -> Any:
    """Matplotlib's Figure, imported when a figure is drawn (the 'cli' extra): the studies'
    registry imports this module with the others, and the core runs without Matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # the 'cli' extra
        raise missing_extra(exc, "eegrad's studies (their figures)") from exc
    return Figure

from .base import Study

__all__ = ["PALETTE", "colours", "legend_below", "legends", "profile_panels"]

#: One colour per method, stable across panels and figures.
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip


def legends(methods: Iterable[SelectorConfig]) -> dict[str, str]:
    """Each method's name in figures, by its name in the rows: its
    :attr:`~eegrad.config.SelectorConfig.legend`, or its name where two methods would share a
    legend."""
    methods = list(methods)
    taken = Counter(m.legend for m in methods)
    return {m.name: m.legend if taken[m.legend] == 1 else m.name for m in methods}


def colours(methods: list[str]) -> dict[str, str]:
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}


def profile_panels(
    study: Study, rows: int = 1
) -> tuple[list[str], list[str], dict[str, str], Figure, Any]:
    """One panel per arm profile (and per row), room below for a shared legend."""
    profiles = [p.name for p in study.config.profiles]
    methods = list(dict.fromkeys(r["method"] for r in study.rows))
    fig = _figure_class()(figsize=(4.6 * len(profiles), 4.8 + 3.4 * (rows - 1)))
    bottom = 0.25 if rows == 1 else 0.16
    fig.subplots_adjust(left=0.06, right=0.99, bottom=bottom, top=0.86 if rows == 1 else 0.91,
                        wspace=0.2, hspace=0.35)  # fmt: skip
    axes = fig.subplots(rows, len(profiles), squeeze=False)
    return profiles, methods, colours(methods), fig, axes[0] if rows == 1 else axes


def legend_below(fig: Figure, ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8,
               frameon=False)  # fmt: skip

