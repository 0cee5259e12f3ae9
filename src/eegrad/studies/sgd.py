"""Study ``sgd`` (preset ``figure1``): the paper's Figure 1.

Expected gaps E F(w_k) − F*, k = 1..K+1, of the configured rule, its overlays and every fixed
mini-batch oracle at each T; the fixed oracles against their closed form J₁ρₙᵏ⁻¹.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .. import theory
from ..arms import Arms
from ..config import ExperimentConfig, SelectorConfig, check_arms_table, need
from ..experiment import (
    build_arms,
    build_oracle,
    config_stream,
    initial_iterates,
    mean_se,
    method_id,
    methods_of,
)
from ..sgd import run_sgd
from .base import (
    Progress,
    Section,
    Study,
    StudyKind,
    check_methods,
    ratio_se,
    register_study,
)

SGD_COLUMNS = ("T", "method", "k", "gap_mean", "gap_se", "realizations")


def _fixed(n: int) -> SelectorConfig:
    """The fixed oracle MBO(n) as a method."""
    return SelectorConfig("fixed", params={"n": int(n)})


def _methods(cfg: ExperimentConfig, arms: Arms) -> list[SelectorConfig]:
    """The selector, the ``[[rules]]`` and, with ``baselines``, each fixed oracle MBO(n)."""
    return methods_of(cfg, [_fixed(n) for n in arms.n] if cfg.baselines else [])


def run(cfg: ExperimentConfig, tick: Progress) -> Study:
    """Expected gaps E F(w_k) − F*, k = 1..K+1, of each method at each T (Figure 1)."""
    study = Study(cfg, SGD_COLUMNS)
    R = cfg.realizations
    eta = cfg.eta[0]
    derive(study)
    for ti, T in enumerate(cfg.T):
        oracle = build_oracle(cfg, T)
        w0 = initial_iterates(cfg, oracle.d, ti, 0)
        for method in _methods(cfg, oracle.arms):
            name = method.name
            out = run_sgd(
                oracle,
                method.build(rounds=cfg.K * T),
                w0,
                cfg.K,
                T,
                eta,
                rng=config_stream(cfg, ti, 1, method_id(name)),
                engine=cfg.engine,
            )
            for k in range(cfg.K + 1):
                mean, se = mean_se(out.gaps[:, k])
                study.rows.append(
                    {"T": T, "method": name, "k": k + 1, "gap_mean": mean, "gap_se": se,
                     "realizations": R}
                )  # fmt: skip
            tick(R * cfg.K * T)
    return study


def plot(study: Study) -> Any:
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    from .figures import colours, legends

    cfg = study.config
    Ts = list(cfg.T)
    methods = list(dict.fromkeys(r["method"] for r in study.rows))
    colour = colours(methods)
    known = {m.name: m for T in Ts for m in _methods(cfg, study.extra["arms"][T])}
    label = legends(known.values())
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
            fixed = known[m].rule == "fixed"
            lw = 2.2 if not fixed else 1.4
            ax.plot(k, mean, marker="o", ms=3.5, lw=lw, color=colour[m], label=label[m])
            # ±2 SE of log(mean) by the delta method (SE/mean): a band that stays positive.
            spread = np.exp(2 * se / mean)
            ax.fill_between(k, mean / spread, mean * spread, color=colour[m], alpha=0.18, lw=0)
            if closed_form and fixed:
                n = int(known[m].value("n"))
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


def section(study: Study, image: str) -> Section:
    cfg = study.config
    K1 = cfg.K + 1
    rows = [["T", "EE-Grad E F(w_K+1)", "best oracle", "ratio ± SE", "fixed-oracle rows within 3 SE of the closed form"]]  # fmt: skip
    ratios = []
    for T in cfg.T:
        arms = study.extra["arms"][T]
        best = _fixed(arms.n_star).name
        rule = study.rows[0]["method"]
        ee = study.column("gap_mean", T=T, method=rule)[-1]
        ee_se = study.column("gap_se", T=T, method=rule)[-1]
        b = study.column("gap_mean", T=T, method=best)[-1]
        b_se = study.column("gap_se", T=T, method=best)[-1]
        r, rse = ratio_se(ee, ee_se, b, b_se)
        ratios.append(r)
        within = total = 0
        for n in arms.n:
            fixed = _fixed(n).name
            m = study.column("gap_mean", T=T, method=fixed)
            se = study.column("gap_se", T=T, method=fixed)
            if m.size == 0:
                continue
            rho = (1 - cfg.eta[0]) ** 2 + cfg.eta[0] ** 2 * arms.sigma2[n - 1] / T
            J = m[0] * rho ** np.arange(K1)
            within += int(np.sum(np.abs(m - J) <= 3 * se + 1e-15))
            total += K1
        rows.append([str(T), f"{ee:.4g}", f"{b:.4g} (MBO({arms.n_star}))", f"{r:.3g} ± {rse:.2g}",
                     f"{within}/{total}" if total else "–"])  # fmt: skip
    shrinks = all(x >= y for x, y in itertools.pairwise(ratios))
    verdict = "agrees" if shrinks else "does not agree in every panel"
    text = (
        f"**Claim (Section 6, Figure 1).** EE-Grad's expected gap is close to that of the optimal "
        f"mini-batch oracle, and the difference shrinks as T grows. **Measured** with "
        f"{cfg.realizations} realizations, K = {cfg.K}, η = {cfg.eta[0]}, selector "
        f"{_selector_text(cfg)}: the ratio of EE-Grad's final expected gap to the optimal "
        f"oracle's is {', '.join(f'{x:.3g}' for x in ratios)} at T = "
        f"{', '.join(map(str, cfg.T))}. The measurement {verdict} with the claim. The fixed "
        "oracles' curves are checked against their closed form J₁ρₙᵏ⁻¹, "
        "ρₙ = (1 − η)² + η²σₙ²/T (dashed in the figure)."
    )
    return Section("Figure 1: expected gaps", [text], image, rows)


def _selector_text(cfg) -> str:
    s = cfg.selector
    if s.rule == "eegrad":
        return (f"EE-Grad with α = {s.value('alpha')}, β = {s.value('beta')}, "
                f"P = {s.value('P')}, c = {s.value('c')}")  # fmt: skip
    return s.rule


def derive(study: Study) -> None:
    """The arms at each T (the report's best oracle, the figure's closed forms)."""
    study.extra["arms"] = {T: build_arms(study.config, T) for T in study.config.T}


def work(cfg: ExperimentConfig) -> int:
    n_methods = 1 + len(cfg.rules) + (len(build_arms(cfg, cfg.T[0]).n) if cfg.baselines else 0)
    return sum(cfg.realizations * cfg.K * T * n_methods for T in cfg.T)


def check(cfg: ExperimentConfig, where: str) -> None:
    check_arms_table(cfg, where)
    need(len(cfg.eta) == 1, "eta", where, "one step size for study 'sgd'", cfg.eta)
    check_methods(cfg, where, iterates=True)


KIND = register_study(StudyKind(
    name="sgd", preset="figure1", columns=SGD_COLUMNS, run=run, work=work, plot=plot,
    section=section, check=check, derive=derive, options=dict,
    keys=("T", "K", "eta", "noise", "init_scale", "baselines", "objective", "arms", "selector",
          "rules"),
    merge=(("T", "method", "k"), (("gap_mean", "gap_se"),), ()),
    summary=("the paper's Section 6 (d = 2, F = w'w/2, M(w) = diag(w^2), Gaussian noise, "
            "sigma^2 = (50, 26, 16.7) at T = 50 scaled by T/50, T = 50, 200, 3000, K = 5, "
            "eta = 0.85, R = 2000, w_1 ~ N(0, I)); writes figure1.png/.pdf, figure1.csv "
            "(T,method,k,gap_mean,gap_se,realizations) and metadata.json."),
    small={"realizations": 8, "T": [50]}, rank=1,
))  # fmt: skip
