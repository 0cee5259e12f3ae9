"""Figures of the studies (Matplotlib's object API, no global state, no display needed)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from . import theory
from .experiment import Study, pull_shares
from .results import atomic_write_bytes

__all__ = ["plot_results", "plot_study", "save_figure"]

#: One colour per method, stable across panels and figures.
_PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip


def _label(method: str) -> str:
    if method.startswith("mbo"):
        return f"MBO({method[3:]})"
    if method.startswith("eegrad-c"):
        return f"EE-Grad, c = {method[8:]}"
    if method.startswith("memory_kl_lcb-h"):
        told = method[len("memory_kl_lcb-h") :]
        return f"kl-LCB with memory, told {'K·T' if told == 'KT' else told}"
    from .selectors import all_rules

    return {info.name: info.label for info in all_rules()}.get(method, method)


def _colours(methods: list[str]) -> dict[str, str]:
    return {m: _PALETTE[i % len(_PALETTE)] for i, m in enumerate(methods)}


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
    """The figure of a study."""
    return {"sgd": _plot_sgd, "theorem1": _plot_theorem1, "theorem2": _plot_theorem2,
            "rules": _plot_rules, "memory": _plot_memory}[study.config.study](study)  # fmt: skip


def _plot_sgd(study: Study) -> Figure:
    cfg = study.config
    Ts = list(cfg.T)
    methods = list(dict.fromkeys(r["method"] for r in study.rows))
    colour = _colours(methods)
    # Fixed margins rather than a layout engine, and no minor ticks on the log axis: each
    # costs a full extra draw, and together they dominated the command's wall time.
    fig = Figure(figsize=(4.2 * len(Ts), 3.8))
    fig.subplots_adjust(left=0.07 if len(Ts) > 1 else 0.16, right=0.99, bottom=0.13, top=0.84,
                        wspace=0.06)  # fmt: skip
    axes = fig.subplots(1, len(Ts), sharey=True, squeeze=False)[0]
    closed_form = cfg.objective.kind == "quadratic"
    for ax, T in zip(axes, Ts, strict=True):
        arms = study.extra["arms"][T]
        for m in methods:
            k = study.column("k", T=T, method=m)
            mean = study.column("gap_mean", T=T, method=m)
            se = study.column("gap_se", T=T, method=m)
            lw = 2.2 if not m.startswith("mbo") else 1.4
            ax.plot(k, mean, marker="o", ms=3.5, lw=lw, color=colour[m], label=_label(m))
            # ±2 SE of log(mean) by the delta method (SE/mean): a band that stays positive.
            spread = np.exp(2 * se / mean)
            ax.fill_between(k, mean / spread, mean * spread, color=colour[m], alpha=0.18, lw=0)
            if closed_form and m.startswith("mbo"):
                n = int(m[3:])
                J = theory.fixed_oracle_gaps(mean[0], cfg.eta[0], arms.sigma2[n - 1], T, cfg.K)
                ax.plot(k, J, ls="--", lw=1.0, color=colour[m])
        ax.set_yscale("log")
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xticks(range(1, cfg.K + 2))
        ax.set_xlabel("SGD iteration k")
        ax.set_title(f"T = {T}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("expected gap  E F(wₖ) − F*")
    handles, labels = axes[0].get_legend_handles_labels()
    if closed_form:
        handles.append(Line2D([], [], ls="--", color="k", lw=1.0))
        labels.append("closed form J₁ρₙᵏ⁻¹")
    axes[-1].legend(handles, labels, fontsize=8, loc="lower left")
    fig.suptitle(
        f"Expected gaps of EE-Grad and the mini-batch oracles (K = {cfg.K}, η = {cfg.eta[0]}, "
        f"{cfg.realizations} realizations; bands ±2 SE on the log scale)",
        fontsize=10,
    )
    return fig


def _plot_theorem1(study: Study) -> Figure:
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    T = study.column("T", method="optimal").astype(float)
    opt = study.column("error_mean", method="optimal")
    opt_se = study.column("error_se", method="optimal")
    ax.plot(T, study.column("sigma2_star_over_T", method="optimal"), "k-", lw=1.2,
            label=r"optimal oracle $\sigma_*^2/T$")  # fmt: skip
    ax.errorbar(T, opt, yerr=2 * opt_se, fmt="ko", ms=3, label="optimal oracle, measured")
    cs = sorted({r["c"] for r in study.rows if r["method"] == "eegrad"})
    colour = _colours([f"c{c}" for c in cs])
    for c in cs:
        Tc = study.column("T", method="eegrad", c=c).astype(float)
        col = colour[f"c{c}"]
        ax.errorbar(Tc, study.column("error_mean", method="eegrad", c=c),
                    yerr=2 * study.column("error_se", method="eegrad", c=c), fmt="o-", ms=3.5,
                    color=col, label=f"EE-Grad, c = {c:g}")  # fmt: skip
        ax.plot(Tc, study.column("Z_T", method="eegrad", c=c), ls="--", color=col,
                label=f"bound $Z_T$, c = {c:g}")  # fmt: skip
        ax2.errorbar(Tc, study.column("regret", method="eegrad", c=c),
                     yerr=2 * study.column("regret_se", method="eegrad", c=c), fmt="o-", ms=3.5,
                     color=col, label=f"EE-Grad, c = {c:g}")  # fmt: skip
    lr = study.extra["lai_robbins"]
    ax2.plot(list(lr), list(lr.values()), "k--", label="Lai–Robbins asymptote")
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("rounds per iterate T")
        a.grid(True, which="both", alpha=0.25)
    ax.set_ylabel(r"$E\|G - \nabla F\|^2 / S(w)$")
    ax.set_title("Theorem 1: estimate error against the bound $Z_T$")
    ax.set_ylim(bottom=0.5 * float(np.min(opt)))
    ax.legend(fontsize=7, ncol=2)
    ax2.set_ylabel(r"normalised regret  $\sum_n \Delta_n E\gamma_T(n) / (T\sigma_*^2)$")
    ax2.set_title("Regret of the rule, eq. (gammaDelta)")
    ax2.legend(fontsize=7)
    return fig


def _plot_theorem2(study: Study) -> Figure:
    cfg = study.config
    fig = Figure(figsize=(6.5, 4.4), layout="constrained")
    ax = fig.add_subplot()
    eta = study.column("eta", method="optimal")
    ex = study.extra
    T, s2star, m, L = cfg.T[0], ex["sigma2_star"], ex["m"], ex["L"]
    fine = np.linspace(0.0, eta.max() * 1.02, 400)
    ax.plot(fine, theory.tau_opt(fine, s2star, T, m, L), "k-", lw=1.2,
            label=r"$\tau^{\circ}(\eta)$ (optimal oracle)")  # fmt: skip
    ax.errorbar(eta, study.column("contraction_mean", method="optimal"),
                yerr=2 * study.column("contraction_se", method="optimal"), fmt="ko", ms=3.5,
                label="optimal oracle, measured")  # fmt: skip
    cs = sorted({r["c"] for r in study.rows if r["method"] == "eegrad"})
    colour = _colours([f"c{c}" for c in cs])
    for c in cs:
        col = colour[f"c{c}"]
        e = study.column("eta", method="eegrad", c=c)
        ax.errorbar(e, study.column("contraction_mean", method="eegrad", c=c),
                    yerr=2 * study.column("contraction_se", method="eegrad", c=c), fmt="s",
                    ms=3.5, color=col, label=f"EE-Grad, c = {c:g}, measured")  # fmt: skip
        # τ = τ° + mLη²O is linear in O, so the F-weighted O of the study gives E[τ F]/E F.
        bound = theory.tau(fine, s2star, T, ex["O"][c], m, L)
        ax.plot(fine, bound, ls="--", color=col, label=rf"$\tau(\eta)$, c = {c:g}")
        edge = study.column("eta_max", method="eegrad", c=c)[0]
        ax.axvline(edge, color=col, ls=":", lw=1)
    edge = study.column("eta_max", method="optimal")[0]
    ax.axvline(edge, color="k", ls=":", lw=1, label="step-size condition edges (eq. assumptionEta)")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylim(0, 1.6)
    ax.set_xlabel(r"step size $\eta$")
    ax.set_ylabel(r"one-step contraction  $E F(w_2) / E F(w_1)$")
    ax.set_title(f"Theorem 2 at T = {cfg.T[0]} ({cfg.realizations} realizations, ±2 SE)",
                 fontsize=10)  # fmt: skip
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.25)
    return fig


def _profile_panels(
    study: Study, rows: int = 1
) -> tuple[list[str], list[str], dict[str, str], Figure, Any]:
    """One panel per arm profile (and per row), room below for a shared legend."""
    profiles = [p.name for p in study.config.profiles]
    methods = list(dict.fromkeys(r["method"] for r in study.rows))
    fig = Figure(figsize=(4.6 * len(profiles), 4.8 + 3.4 * (rows - 1)))
    bottom = 0.25 if rows == 1 else 0.16
    fig.subplots_adjust(left=0.06, right=0.99, bottom=bottom, top=0.86 if rows == 1 else 0.91,
                        wspace=0.2, hspace=0.35)  # fmt: skip
    axes = fig.subplots(rows, len(profiles), squeeze=False)
    return profiles, methods, _colours(methods), fig, axes[0] if rows == 1 else axes


def _legend_below(fig: Figure, ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8,
               frameon=False)  # fmt: skip


def _plot_rules(study: Study) -> Figure:
    cfg = study.config
    profiles, methods, colour, fig, axes = _profile_panels(study)
    for ax, prof in zip(axes, profiles, strict=True):
        for m in methods:
            T = study.column("T", profile=prof, method=m)
            ax.errorbar(T, study.column("regret", profile=prof, method=m),
                        yerr=2 * study.column("regret_se", profile=prof, method=m),
                        color=colour[m], marker="o", ms=3, lw=1.4, label=_label(m))  # fmt: skip
        T = study.column("T", profile=prof, method=methods[0])
        ax.plot(T, study.column("lai_robbins", profile=prof, method=methods[0]), "k--", lw=1.2,
                label="Lai–Robbins asymptote")  # fmt: skip
        sigma2 = next(p.sigma2 for p in cfg.profiles if p.name == prof)
        ax.set_title(f"{prof}: σ² = ({', '.join(f'{x:g}' for x in sigma2)})", fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rounds T")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("normalised regret  Σₙ Δₙ E γ_T(n) / (T σ*²)")
    _legend_below(fig, axes[0])
    fig.suptitle(f"Selection rules: regret of one T-round estimate ({cfg.realizations} "
                 "realizations, ±2 SE)", fontsize=10)  # fmt: skip
    return fig


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
                    color=_PALETTE[i % len(_PALETTE)], label=str(label))  # fmt: skip
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


def _plot_memory(study: Study) -> Figure:
    cfg = study.config
    profiles, methods, colour, fig, grid = _profile_panels(study, rows=2)
    axes, below = grid[0], grid[1]
    width = 0.8 / len(methods)
    T_small = min(r["T"] for r in study.rows)
    ks = np.arange(1, cfg.K + 1)
    for ax, p in zip(below, cfg.profiles, strict=True):
        best = int(np.argmin(p.sigma2)) + 1
        for m in methods:
            share = pull_shares(study, p.name, T_small, m, best)
            ax.plot(ks, share, color=colour[m], marker="o", ms=3, lw=1.4)
        ax.set_ylim(0, 1.02)
        ax.set_xticks(ks)
        ax.set_xlabel("SGD iterate k")
        ax.grid(True, alpha=0.3)
    below[0].set_ylabel(f"best arm's share of pulls, T = {T_small}")
    for ax, prof in zip(axes, profiles, strict=True):
        Ts = sorted({r["T"] for r in study.rows if r["profile"] == prof})
        pos = np.arange(len(Ts))
        for j, m in enumerate(methods):
            ratio = [study.column("final_gap_ratio", profile=prof, method=m, T=T)[0] for T in Ts]
            se = [study.column("final_gap_ratio_se", profile=prof, method=m, T=T)[0] for T in Ts]
            ax.bar(pos + (j - (len(methods) - 1) / 2) * width, ratio, width, yerr=2 * np.array(se),
                   color=colour[m], label=_label(m), capsize=2, error_kw={"lw": 0.8})  # fmt: skip
        ax.axhline(1.0, color="k", lw=1)
        ax.set_xticks(pos, [f"T = {T}" for T in Ts])
        ax.set_title(prof, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("final expected gap ÷ optimal oracle's")
    _legend_below(fig, axes[0])
    fig.suptitle(f"Memory across iterates: E F(w_{cfg.K + 1}) relative to the optimal oracle "
                 f"(K = {cfg.K}, η = {cfg.eta[0]}, {cfg.realizations} realizations, ±2 SE)",
                 fontsize=10)  # fmt: skip
    return fig
