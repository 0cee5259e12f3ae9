"""Figures: a study's (drawn by its module in :mod:`eegrad.studies`), a sweep's results table,
and writing them (Matplotlib's object API, no global state, no display needed)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ._extras import missing_extra

try:
    from matplotlib.figure import Figure
except ImportError as exc:  # the 'cli' extra
    raise missing_extra(exc, "eegrad.plots") from exc

from .results import atomic_write_bytes
from .studies import Study, load_study, study_kind
from .studies.figures import PALETTE

__all__ = ["plot_results", "plot_study", "replot", "save_figure"]


def save_figure(fig: Figure, stem: str | Path) -> list[Path]:
    """Write ``stem.png`` (150 dpi) and ``stem.pdf`` atomically; returns the paths."""
    paths = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        meta = {"Software": None} if ext == "png" else {"Creator": None, "Producer": None,
                                                         "CreationDate": None}  # fmt: skip
        fig.savefig(buf, format=ext, dpi=150, metadata=meta)
        path = Path(f"{stem}.{ext}")
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths


def plot_study(study: Study) -> Figure:
    """The figure of a study, drawn by its module."""
    return study_kind(study.config.study).plot(study)


def replot(folder: str | Path) -> list[Path]:
    """Redraw a study's figure from its results folder alone (:func:`eegrad.studies.load_study`);
    returns the files written (``NAME.png``, ``NAME.pdf``)."""
    study = load_study(folder)
    return save_figure(plot_study(study), Path(folder) / study.config.name)


def plot_results(
    results: str | Path,
    x: str,
    y: str,
    hue: str | None = None,
    where: list[str] | None = None,
    logx: bool = False,
    logy: bool = False,
    out: str | Path | None = None,
) -> Path:
    """Plot column ``y`` of a tidy results table against ``x``, one line per ``hue`` value,
    with ±2 SE bars where the table has a standard-error column for ``y``."""
    from .config import ConfigError
    from .results import read_table

    path = Path(results)
    csv_path = path / "results.csv" if path.is_dir() else path
    if not csv_path.exists():
        raise ConfigError(f"No results table at {str(csv_path)!r}.")
    rows = read_table(csv_path)
    columns = list(rows[0]) if rows else []
    for name, col in (("x", x), ("y", y), ("hue", hue)):
        if col is not None and col not in columns:
            raise ConfigError(f"The --{name} column {col!r} is not in {csv_path.name}; columns: "
                              f"{', '.join(columns)}.")  # fmt: skip
    for cond in where or []:
        col, _, value = cond.partition("=")
        if col not in columns:
            raise ConfigError(f"The --where column {col!r} is not in {csv_path.name}.")
        rows = [r for r in rows if r[col] == value]
    se_col = next((c for c in (f"{y}_se", y.replace("_mean", "_se")) if c in columns and c != y),
                  None)  # fmt: skip
    groups: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault(r[hue] if hue else y, []).append(r)

    def num(v: str) -> float:
        return float(v) if v != "" else float("nan")

    fig = Figure(figsize=(6.5, 4.4))
    fig.subplots_adjust(left=0.16, right=0.97, bottom=0.12, top=0.92)
    ax = fig.add_subplot()
    for i, (label, sub) in enumerate(groups.items()):
        sub = sorted(sub, key=lambda r: num(r[x]))
        xs = np.array([num(r[x]) for r in sub])
        ys = np.array([num(r[y]) for r in sub])
        err = 2 * np.array([num(r[se_col]) for r in sub]) if se_col else None
        ax.errorbar(xs, ys, yerr=err, marker="o", ms=3.5, lw=1.4,
                    color=PALETTE[i % len(PALETTE)], label=str(label))  # fmt: skip
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y + (" (±2 SE)" if se_col else ""))
    ax.grid(True, alpha=0.3)
    if hue:
        ax.legend(title=hue, fontsize=8)
    target = Path(out) if out else csv_path.parent / f"plot-{y}-vs-{x}.png"
    save_figure(fig, target.with_suffix(""))
    return target.with_suffix(".png")


