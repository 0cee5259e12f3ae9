"""The reproduction report: one paragraph per claim of the paper, written as Markdown and HTML
from the studies' tables (every number in it comes from the run that wrote it)."""

from __future__ import annotations

import base64
import html
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import theory
from .experiment import Study, pull_shares
from .results import atomic_write_bytes

__all__ = ["Section", "claims", "write_report"]


@dataclass
class Section:
    title: str
    paragraphs: list[str]
    image: str | None = None  # path relative to the report's folder
    table: list[list[str]] = field(default_factory=list)  # header row first


def _ratio(a: float, sa: float, b: float, sb: float) -> tuple[float, float]:
    """a/b and its standard error for independent a and b (delta method)."""
    r = a / b
    return r, abs(r) * float(np.hypot(sa / a, sb / b))


def figure1_section(study: Study, image: str) -> Section:
    cfg = study.config
    K1 = cfg.K + 1
    rows = [["T", "EE-Grad E F(w_K+1)", "best oracle", "ratio ± SE", "fixed-oracle rows within 3 SE of the closed form"]]  # fmt: skip
    ratios = []
    for T in cfg.T:
        arms = study.extra["arms"][T]
        best = f"mbo{arms.n_star}"
        rule = study.rows[0]["method"]
        ee = study.column("gap_mean", T=T, method=rule)[-1]
        ee_se = study.column("gap_se", T=T, method=rule)[-1]
        b = study.column("gap_mean", T=T, method=best)[-1]
        b_se = study.column("gap_se", T=T, method=best)[-1]
        r, rse = _ratio(ee, ee_se, b, b_se)
        ratios.append(r)
        within = total = 0
        for n in arms.n:
            m = study.column("gap_mean", T=T, method=f"mbo{n}")
            se = study.column("gap_se", T=T, method=f"mbo{n}")
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


def theorem1_section(study: Study, image: str) -> Section:
    rows = [["c", "T where E‖G−∇F‖²/S + 2 SE ≤ Z_T", "T where the estimate exceeds Z_T",
             "identity within 3 SE", "regret at largest T"]]  # fmt: skip
    paras = []
    for c in sorted({r["c"] for r in study.rows if r["method"] == "eegrad"}):
        err = study.column("error_mean", method="eegrad", c=c)
        se = study.column("error_se", method="eegrad", c=c)
        z = study.column("Z_T", method="eegrad", c=c)
        diff = study.column("identity_diff_mean", method="eegrad", c=c)
        dse = study.column("identity_diff_se", method="eegrad", c=c)
        reg = study.column("regret", method="eegrad", c=c)
        under = int(np.sum(err + 2 * se <= z))
        ident = int(np.sum(np.abs(diff) <= 3 * dse))
        Tc = study.column("T", method="eegrad", c=c)
        over = ", ".join(str(t) for t in Tc[err > z]) or "none"
        rows.append([f"{c:g}", f"{under}/{err.size}", over, f"{ident}/{err.size}",
                     f"{reg[-1]:.3g}"])  # fmt: skip
    Ts = study.column("T", method="optimal")
    paras.append(
        "**Claim (Theorem 1).** E‖G − ∇F‖² ≤ Z_T(w) S(w) with Z_T = σ*²/T + C₁ ln T/T² + C₂/T², "
        "and the excess over the optimal oracle equals the pseudo-regret (1/T²) Σₙ Δₙ E γ_T(n) "
        f"S(w) (eq. gammaDelta). **Measured** at w = {study.config.w}, T from {Ts[0]} to "
        f"{Ts[-1]}, {study.config.realizations} realizations per point. The table counts the T "
        "at which the estimate plus 2 standard errors stays under Z_T, and at which both sides "
        "of eq. (gammaDelta) agree within 3 standard errors of their difference, and lists the T "
        "at which the measured error exceeds Z_T. The theorem holds for the true Hanson–Wright "
        "constant c, which the paper leaves unspecified: a value of c above the true constant "
        "makes Z_T too small, and a measured error above Z_T shows that c is too large for the "
        "guarantee, not that the identity fails."
    )
    return Section("Theorem 1: the estimate's variance", paras, image, rows)


def theorem2_section(study: Study, image: str) -> Section:
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


#: The recommended rule without memory, the one the single-iterate study reports on.
PER_ITERATE_RULE = "thompson"


def rules_section(study: Study, image: str) -> Section:
    cfg = study.config
    rec = PER_ITERATE_RULE
    rows = [["profile", "T", *[r["method"] for r in study.rows if r["profile"] ==
             study.rows[0]["profile"] and r["T"] == study.rows[0]["T"]], "Lai–Robbins"]]  # fmt: skip
    methods = rows[0][2:-1]
    for prof in [p.name for p in cfg.profiles]:
        for T in sorted({r["T"] for r in study.rows}):
            cells = [prof, str(T)]
            for m in methods:
                reg = study.column("regret", profile=prof, method=m, T=T)
                cells.append(f"{reg[0]:.3g}" if reg.size else "–")
            lr = study.column("lai_robbins", profile=prof, method=methods[0], T=T)
            cells.append(f"{lr[0]:.3g}")
            rows.append(cells)
    findings = []
    first = cfg.profiles[0].name

    def reg(method: str, T: int, prof: str = first) -> float | None:
        v = study.column("regret", profile=prof, method=method, T=T)
        return float(v[0]) if v.size else None

    for T, target in ((200, 0.4), (3000, 0.2)):
        a, b = reg(rec, T), reg("eegrad-c1", T)
        if a is not None and b is not None:
            ok = "meets" if a <= target * b else "misses"
            findings.append(f"at T = {T} its regret is {a / b:.2f}× the paper's rule with c = 1 "
                            f"on profile {first!r} ({ok} the target ≤ {target:g}×)")  # fmt: skip
    Tmax = max(cfg.T)
    a = reg(rec, Tmax)
    lr = study.column("lai_robbins", profile=first, method=rec, T=Tmax)
    if a is not None and lr.size:
        ok = "meets" if a <= 1.25 * lr[0] else "misses"
        findings.append(f"at T = {Tmax} it is {a / lr[0]:.2f}× the Lai–Robbins value ({ok} the "
                        "target ≤ 1.25×)")  # fmt: skip
    slopes = []
    for p in cfg.profiles:
        T = study.column("T", profile=p.name, method=rec).astype(float)
        r = study.column("regret", profile=p.name, method=rec)
        half = len(T) // 2
        slope = float(np.polyfit(np.log(T[half:]), np.log(r[half:]), 1)[0])
        slopes.append(f"{p.name}: {slope:.2f}")
    rel = study.column("regret_se", method=rec) / study.column("regret", method=rec)
    text = (
        "**Claim (ours, not the paper's).** Rules that need none of β, P, c can match or beat the "
        "paper's rule. **Measured** with "
        f"{cfg.realizations} realizations per point at w = {cfg.w} (isotropic M(w)): the "
        f"normalised regret Σₙ Δₙ E γ_T(n)/(T σ*²) of each rule (table). The recommended "
        f"rule without memory, `{rec}` (the per-iterate form of `eegrad.default_selector()`): "
        + "; ".join(findings)
        + ". Its "
        "normalised regret falls with T on every profile — slope of log-regret against log T "
        f"over the upper half of the grid: {', '.join(slopes)} (a regret that grows linearly "
        "in T would show a slope near 0). The largest standard error of the recommended rule's "
        f"regret in the table is {100 * float(np.max(rel)):.1f} % of the estimate."
    )
    return Section("Selection rules", [text], image, rows)


def memory_section(study: Study, image: str) -> Section:
    cfg = study.config
    methods = list(dict.fromkeys(r["method"] for r in study.rows))
    memory = [m for m in methods if m.startswith("memory")]
    anytime = [m for m in memory if "-h" not in m]
    told = [m for m in memory if "-h" in m]
    rows = [["profile", "T", *methods, "lock-in (memory rules)", "ideal misranking"]]

    def value(col: str, prof: str, m: str, T: int) -> float:
        return float(study.column(col, profile=prof, method=m, T=T)[0])

    Ts = sorted({r["T"] for r in study.rows})
    for p in cfg.profiles:
        for T in Ts:
            cells = [p.name, str(T)]
            for m in methods:
                cells.append(f"{value('final_gap_ratio', p.name, m, T):.2f} ± "
                             f"{value('final_gap_ratio_se', p.name, m, T):.2f}")  # fmt: skip
            cells.append(", ".join(f"{value('lock_in', p.name, m, T):.1%}" for m in memory))
            floor = theory.misranking_floor(p.sigma2, cfg.K * T, cfg.objective.d)
            cells.append(f"{floor:.1%}")
            rows.append(cells)
    first = cfg.profiles[0].name
    findings = []
    for T, target in ((50, 1.7), (200, 1.2)):
        if T in Ts and anytime:
            best = min(anytime, key=lambda m, T=T: value("final_gap_ratio", first, m, T))
            r, se = value("final_gap_ratio", first, best, T), value("final_gap_ratio_se", first,
                                                                      best, T)  # fmt: skip
            ok = "meets" if r <= target else "misses"
            findings.append(f"at T = {T} the best rule not told K, `{best}`, has {r:.2f} ± "
                            f"{se:.2f} ({ok} the target ≤ {target:g})")  # fmt: skip
    if 50 in Ts and told:
        r, se = (value(c, first, told[0], 50) for c in ("final_gap_ratio", "final_gap_ratio_se"))
        ok = "meets" if r <= 1.5 else "misses"
        findings.append(f"told the horizon K·T, `{told[0]}` has {r:.2f} ± {se:.2f} at T = 50 "
                        f"({ok} the target ≤ 1.5)")  # fmt: skip
    locks = []
    for p in cfg.profiles:
        worst = max(value("lock_in", p.name, m, T) for m in memory for T in Ts)
        floor = theory.misranking_floor(p.sigma2, cfg.K * min(Ts), cfg.objective.d)
        locks.append(f"{p.name} {worst:.1%} (ideal misranking at T = {min(Ts)}: {floor:.1%})")
    per_iter = [m for m in methods if m not in memory]
    gain = [value("final_gap_ratio", first, m, min(Ts)) for m in per_iter]
    best = int(np.argmin(cfg.profiles[0].sigma2)) + 1

    def share(m: str) -> str:
        v = pull_shares(study, first, min(Ts), m, best)
        return f"`{m}` {v[0]:.0%} → {v[-1]:.0%}"

    shares = "; ".join(share(m) for m in methods)
    text = (
        "**Claim (ours).** Keeping the evidence of past iterates — σ_n² does not depend on w — "
        "pays for exploration once instead of K times. **Measured** in the Figure 1 setting "
        f"(K = {cfg.K}, η = {cfg.eta[0]}, {cfg.realizations} realizations sharing initial "
        "iterates and noise streams): the final expected gap of each rule divided by the "
        "optimal oracle's closed form, ± its standard error. The final gap of one run is a "
        "product of K random factors and heavy-tailed, so the estimate takes the last step in "
        "expectation and uses a control variate — the same run's standardised noises replayed "
        "with the optimal oracle, whose mean is known in closed form (`eegrad.estimators`); the "
        "standard error is a delete-a-group jackknife, and the plain mean "
        "(`final_gap_ratio_direct` in the CSV) stays beside it. Findings on profile "
        f"{first!r}: " + "; ".join(findings) + ". The per-iterate rules need "
        f"{min(gain):.1f}–{max(gain):.1f}× the optimal gap at T = {min(Ts)}. Why (lower panels): "
        f"the best arm's share of the pulls at T = {min(Ts)}, iterate 1 → iterate {cfg.K}: "
        + shares
        + ". Lock-in — the "
        "share of runs in which the best arm gets under half of the last iterate's pulls — at "
        "worst over T, per profile: " + "; ".join(locks) + ". The last column is the chance "
        "that ideal evidence (all K·T pulls split evenly between the two best arms, means and "
        "scales known) ranks them wrongly: where it is large no rule can commit to the right "
        "arm reliably, and the target lock-in ≤ 2 % is out of reach on that profile."
    )
    return Section("Selection with memory across iterates", [text], image, rows)


SECTION_BUILDERS = {"figure1": figure1_section, "theorem1": theorem1_section,
                    "theorem2": theorem2_section, "rules": rules_section,
                    "memory": memory_section}  # fmt: skip


def claims(studies: dict[str, tuple[Study, str]]) -> list[Section]:
    """Sections for the studies given as name -> (study, image path relative to the report)."""
    out = []
    for name, (study, image) in studies.items():
        builder = SECTION_BUILDERS.get(name)
        if builder is not None:
            out.append(builder(study, image))
    return out


def _md_table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines) + "\n"


def write_report(folder: str | Path, sections: list[Section], command: str) -> None:
    """Write ``report.md`` and ``report.html`` (figures embedded) into ``folder``."""
    folder = Path(folder)
    md = ["# EE-Grad: reproduction report\n", f"Produced by `{command}`.\n"]
    body = [(f"<h1>EE-Grad: reproduction report</h1><p>Produced by <code>{html.escape(command)}"
            "</code>.</p>")]  # fmt: skip
    for s in sections:
        md.append(f"## {s.title}\n")
        body.append(f"<h2>{html.escape(s.title)}</h2>")
        for p in s.paragraphs:
            md.append(p + "\n")
            body.append("<p>" + _md_inline_to_html(p) + "</p>")
        if s.table:
            md.append(_md_table(s.table))
            body.append(_html_table(s.table))
        if s.image:
            md.append(f"![{s.title}]({s.image})\n")
            data = base64.b64encode((folder / s.image).read_bytes()).decode("ascii")
            body.append(f'<img alt="{html.escape(s.title)}" style="max-width:100%" '
                        f'src="data:image/png;base64,{data}">')  # fmt: skip
    atomic_write_bytes(folder / "report.md", "\n".join(md).encode("utf-8"))
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>EE-Grad reproduction"
            "</title><style>body{font-family:sans-serif;max-width:1100px;margin:auto;}"
            "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 8px}"
            "</style></head><body>" + "\n".join(body) + "</body></html>\n")  # fmt: skip
    atomic_write_bytes(folder / "report.html", page.encode("utf-8"))


def _md_inline_to_html(text: str) -> str:
    parts = html.escape(text).split("**")
    return "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))


def _html_table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:]
    )
    return f"<table><tr>{head}</tr>{body}</table>"
