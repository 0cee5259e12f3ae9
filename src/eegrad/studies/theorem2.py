"""Study ``theorem2``: one-step contraction against Theorem 2's τ(η).

E F(w₂)/E F(w₁) of the optimal oracle (against τ°(η)) and of EE-Grad for each c (against
τ(η) = τ° + mLη²O_T) over a grid of step sizes, with the edges of the step-size condition.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import theory
from ..config import ExperimentConfig, check_arms_table, need
from ..experiment import (
    build_objective,
    build_oracle,
    build_selector,
    c_values,
    config_stream,
    eegrad_constants,
    initial_iterates,
    method_id,
)
from ..selectors import OptimalArm
from ..sgd import run_sgd
from .base import Progress, Section, Study, StudyKind, c_grid_options, register_study

THEOREM2_COLUMNS = (
    "eta", "method", "c", "contraction_mean", "contraction_se", "tau_bound", "eta_max",
    "realizations",
)  # fmt: skip


def run(cfg: ExperimentConfig, tick: Progress) -> Study:
    """One-step contraction E F(w_2)/E F(w_1) against τ(η) (EE-Grad) and τ°(η) (optimal)."""
    study = Study(cfg, THEOREM2_COLUMNS)
    R = cfg.realizations
    T = cfg.T[0]
    oracle = build_oracle(cfg, T)
    arms = oracle.arms
    obj = oracle.objective  # with known m and L (checked when the configuration is read)
    sel_cfg = cfg.selector
    w0 = initial_iterates(cfg, oracle.d, 0)
    gap0 = obj.gap(w0)
    m, L = obj.m, obj.L
    weights, excess = _excess(cfg, oracle, w0)
    derive(study)
    for ei, eta in enumerate(cfg.eta):
        methods = [("optimal", float("nan"), OptimalArm())]
        methods += [("eegrad", c, build_selector(sel_cfg, c=c)) for c in c_values(cfg)]
        for name, c, sel in methods:
            out = run_sgd(oracle, sel, w0, 1, T, eta,
                          rng=config_stream(cfg, 1 + ei, method_id(f"{name}{c}")),
                          engine=cfg.engine)  # fmt: skip
            gap1 = out.gaps[:, 1]
            rho = gap1.mean() / gap0.mean()
            se = float((gap1 - rho * gap0).std(ddof=1) / (np.sqrt(R) * gap0.mean()))
            if name == "optimal":
                bound = float(theory.tau_opt(eta, arms.sigma2_star, T, m, L))
                edge = float(theory.eta_max(arms.sigma2_star / T, L))
            else:
                # τ(w) depends on w through Z_T(w): the bound on E F(w_2) is E[τ(w_1) F(w_1)].
                O = excess[c]
                bound = float(np.sum(weights * theory.tau(eta, arms.sigma2_star, T, O, m, L)))
                z = arms.sigma2_star / T + study.extra["O"][c]
                edge = float(theory.eta_max(z, L))
            study.rows.append(
                {"eta": eta, "method": name, "c": c, "contraction_mean": float(rho),
                 "contraction_se": se, "tau_bound": bound, "eta_max": edge, "realizations": R}
            )  # fmt: skip
            tick(R * T)
    return study


def plot(study: Study) -> Any:
    from matplotlib.figure import Figure

    from .figures import colours

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
    colour = colours([f"c{c}" for c in cs])
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


def section(study: Study, image: str) -> Section:
    opt = study.column("contraction_mean", method="optimal")
    opt_se = study.column("contraction_se", method="optimal")
    tau_o = study.column("tau_bound", method="optimal")
    eta = study.column("eta", method="optimal")
    exact = int(np.sum(np.abs(opt - tau_o) <= 3 * opt_se))
    rows = [["c", "η inside the condition", "measured ≤ τ(η) + 2 SE there", "measured < 1 at η = 0.85"]]  # fmt: skip
    for c in sorted({r["c"] for r in study.rows if r["method"] == "eegrad"}):
        m = study.column("contraction_mean", method="eegrad", c=c)
        se = study.column("contraction_se", method="eegrad", c=c)
        tau = study.column("tau_bound", method="eegrad", c=c)
        e = study.column("eta", method="eegrad", c=c)
        edge = study.column("eta_max", method="eegrad", c=c)[0]
        inside = e < edge
        ok = int(np.sum((m <= tau + 2 * se)[inside]))
        at = np.isclose(e, 0.85)
        below = "yes" if at.any() and m[at][0] < 1 else ("–" if not at.any() else "no")
        rows.append([f"{c:g}", f"{int(inside.sum())}/{e.size} (η < {edge:.3g})",
                     f"{ok}/{int(inside.sum())}", below])  # fmt: skip
    text = (
        "**Claim (Theorem 2).** For η inside eq. (assumptionEta), J_{k+1} ≤ τ°(η) J_k for the "
        "optimal mini-batch SGD and J_{k+1} ≤ τ(η) J_k for EE-Grad, τ = τ° + mLη²O_T. "
        f"**Measured** one step from w₁ ~ N(0, I) with {study.config.realizations} "
        f"realizations at T = {study.config.T[0]}: on F = ½‖w‖² the optimal oracle's contraction "
        f"equals τ°(η) exactly, and the measurement agrees within 3 SE at {exact}/{eta.size} "
        "step sizes. For EE-Grad the bound holds wherever the step-size condition does (table); "
        "with small c the condition admits only small η, while the measured contraction stays "
        "below 1 far beyond it — the bound is conservative."
    )
    return Section("Theorem 2: linear convergence", [text], image, rows)


def _excess(cfg: ExperimentConfig, oracle: Any, w0: np.ndarray) -> tuple[np.ndarray, dict]:
    """The weights F(w₁)/Σ F(w₁) and, per c, O_T(w₁) of each realization: τ(w) depends on w
    through Z_T(w), so the bound on E F(w₂) is E[τ(w₁) F(w₁)]."""
    arms, T = oracle.arms, cfg.T[0]
    gap0 = oracle.objective.gap(w0)
    S = oracle.at(w0).S
    beta, P = eegrad_constants(cfg.selector, arms, S)
    alpha = cfg.selector.value("alpha")
    excess = {c: theory.O_T(T, arms.sigma2, S, alpha, beta, P, c, oracle.d) for c in c_values(cfg)}
    return gap0 / gap0.sum(), excess


def derive(study: Study) -> None:
    """σ*², m, L and the F-weighted O_T per c (the figure's bounds τ(η))."""
    cfg = study.config
    oracle = build_oracle(cfg, cfg.T[0])
    weights, excess = _excess(cfg, oracle, initial_iterates(cfg, oracle.d, 0))
    study.extra.update(sigma2_star=oracle.arms.sigma2_star, m=oracle.objective.m,
                       L=oracle.objective.L,
                       O={c: float(np.sum(weights * O)) for c, O in excess.items()})  # fmt: skip


def check(cfg: ExperimentConfig, where: str) -> None:
    """The arms table, EE-Grad as the selector (τ is its), an objective with known m and L."""
    check_arms_table(cfg, where)
    need(cfg.selector.rule == "eegrad", "selector.rule", where,
         "'eegrad' for study 'theorem2' (τ is EE-Grad's)", cfg.selector.rule)  # fmt: skip
    obj = build_objective(cfg)
    need(obj.m is not None and obj.L is not None, "objective", where,
         "an objective with known m and L for study 'theorem2'", cfg.objective.kind)  # fmt: skip


def work(cfg: ExperimentConfig) -> int:
    return cfg.realizations * cfg.T[0] * len(cfg.eta) * (len(c_values(cfg)) + 1)


KIND = register_study(StudyKind(
    name="theorem2", preset="theorem2", columns=THEOREM2_COLUMNS, run=run, work=work, plot=plot,
    section=section, derive=derive, options=c_grid_options, check=check,
    keys=("T", "eta", "noise", "init_scale", "objective", "arms", "selector", "c_values"),
    summary=("one-step contraction against tau(eta) over a grid of step sizes."),
    small={"realizations": 50, "eta": [0.2, 0.85]}, rank=3,
))  # fmt: skip
