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

__all__ = ["RUN_COLUMNS", "plot_results", "plot_run", "plot_study", "replot", "save_figure"]


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




#: The columns a federated run's records must have for :func:`plot_run` (the records
#: :class:`~eegrad.flower.EEGradStrategy` writes to its ``csv_path``).
RUN_COLUMNS = ("server_round", "arm", "cost")


def plot_run(records: str | Path, evaluations: str | Path | None = None,
             out: str | Path | None = None) -> Path:  # fmt: skip
    """The figure of one federated run from its records: n over the server rounds (left), and
    every evaluated metric against the cost spent (right; from the evaluations' table,
    ``<stem>-evaluation.csv`` beside the records unless given), or the cost over the rounds
    where nothing was evaluated. Writes ``<stem>.png`` and ``.pdf`` beside the records (or
    ``out``); returns the PNG's path."""
    from .config import ConfigError
    from .results import evaluations_beside, read_table

    path = Path(records)
    if not path.is_file():
        raise ConfigError(f"No records table at {str(path)!r}.")
    rows = read_table(path)
    missing = [c for c in RUN_COLUMNS if not rows or c not in rows[0]]
    if missing:
        raise ConfigError(f"{path.name} is not a run's records: no column {missing[0]!r} (a "
                          f"run's records have {', '.join(RUN_COLUMNS)}; for a sweep's results "
                          "give --x and --y).")  # fmt: skip
    rounds = np.array([float(r["server_round"]) for r in rows])
    arms = np.array([float(r["arm"]) for r in rows])
    cost = np.array([float(r["cost"]) for r in rows])
    evaluations = evaluations_beside(path) if evaluations is None else Path(evaluations)
    evaluated = read_table(evaluations) if evaluations.is_file() else []

    fig = Figure(figsize=(10.0, 4.0))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.9, wspace=0.28)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    left.step(rounds, arms, where="mid", color=PALETTE[0], lw=1.6)
    left.plot(rounds, arms, "o", ms=3, color=PALETTE[0])
    left.set_xlabel("server round")
    left.set_ylabel("n, clients asked")
    left.set_title("clients a round asks", fontsize=10)
    series: dict[str, list[tuple[float, float]]] = {}
    for r in evaluated:
        series.setdefault(f"{r['metric']} ({r['source']})", []).append(
            (float(r["cost"]), float(r["value"])))
    if series:
        for i, (label, points) in enumerate(sorted(series.items())):
            xs, ys = np.array(sorted(points)).T
            right.plot(xs, ys, marker="o", ms=3, lw=1.4, color=PALETTE[i % len(PALETTE)],
                       label=label)  # fmt: skip
        right.set_xlabel("cost spent")
        right.set_ylabel("evaluated metric")
        right.set_title("evaluations against the cost spent", fontsize=10)
        right.legend(fontsize=8)
    else:
        right.plot(rounds, cost, color=PALETTE[1], lw=1.6)
        right.set_xlabel("server round")
        right.set_ylabel("cost spent")
        right.set_title(f"cost (nothing evaluated: no {evaluations.name})", fontsize=10)
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
    target = Path(out) if out else path.with_suffix(".png")
    save_figure(fig, target.with_suffix(""))
    return target.with_suffix(".png")
