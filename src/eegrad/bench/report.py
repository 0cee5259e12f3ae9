"""The benchmark's report, from its rows alone: tables per metric and figures.

Every method of a setting runs the same R rounds within the same budget (your FedAvg's: the
guessed n for R rounds). Per setting and method, each seed's run gives: the final training loss
and test accuracy (the model the run delivers), the cost at which it first reached the
setting's target accuracy (95 % of the best fixed n's mean final accuracy; infinite where
never), and its simulated wall clock. The fixed n are those that last the R rounds (at most the
guess, your FedAvg's n, which is among them); the best fixed n is the one of least mean final
training loss, the median fixed n the middle one when they are ranked so (a blind guess among
them). Every method of a seed runs on the same clients and data, so differences are paired by
seed: 95 % intervals from Student's t over the seeds for differences, and from a bootstrap over
the seeds (:data:`BOOTSTRAP` resamples, each setting's seeds drawn with replacement, the same
draw for both methods) for ratios and their geometric means over the settings.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BOOTSTRAP", "TARGET_SHARE", "ratio_interval", "report", "summarise"]

#: The target accuracy: this share of the best fixed n's mean final test accuracy.
TARGET_SHARE = 0.95
#: The methods shown beside the fixed n, in the tables' order ("last": the best fixed n
#: given the default's last round).
SHOWN = ("default", "guess", "last", "grow", "decay", "isp", "bara", "noise-scale")
#: How the tables name the methods.
LABELS = {"guess": "your FedAvg", "last": "fixed n + last round", "bara": "BARA-style"}
#: Bootstrap resamples of the seeds for a ratio's interval.
BOOTSTRAP = 2000


def _t95(k: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, k - 1)) if k > 1 else math.inf


def _paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Mean of a − b and the half-width of its 95 % interval."""
    d = a - b
    if d.size < 2:
        return float(d.mean()), math.inf
    return float(d.mean()), _t95(d.size) * float(d.std(ddof=1) / np.sqrt(d.size))


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per setting: its split, each method's per-seed finals, the best and median fixed n,
    the target accuracy and each run's cost to reach it."""
    runs: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        runs[(r["setting"], r["method"], int(r["seed"]))].append(r)
    out: dict[str, dict[str, Any]] = {}
    for (setting, method, seed), rs in runs.items():
        rs.sort(key=lambda r: (float(r["cost"]), int(r["round"])))
        s = out.setdefault(setting, {"split": rs[0]["split"], "dataset": rs[0]["dataset"],
                                     "runs": defaultdict(dict)})  # fmt: skip
        s["runs"][method][seed] = rs
    for s in out.values():
        finals: dict[str, dict[str, np.ndarray]] = {}
        seeds = sorted(set.intersection(*(set(v) for v in s["runs"].values())))
        s["seeds"] = seeds
        for method, by_seed in s["runs"].items():
            last = [by_seed[k][-1] for k in seeds]
            finals[method] = {"loss": np.array([float(r["train_loss"]) for r in last]),
                              "accuracy": np.array([float(r["test_accuracy"]) for r in last]),
                              "wall_clock": np.array([float(r["wall_clock"]) for r in last]),
                              "cost": np.array([float(r["cost"]) for r in last])}  # fmt: skip
        fixed = sorted((m for m in finals if m == "guess" or
                        (m.startswith("fedavg-") and not m.endswith("-last"))),
                       key=lambda m: finals[m]["loss"].mean())  # fmt: skip
        lasts = sorted((m for m in finals if m.endswith("-last")),
                       key=lambda m: finals[m]["loss"].mean())  # fmt: skip
        if lasts:  # the best fixed n given the default's ending
            finals["last"] = {**finals[lasts[0]], "name": lasts[0]}
        s["finals"], s["fixed"] = finals, fixed
        if "guess" in s["runs"]:  # R: your FedAvg's rounds
            s["R"] = max(int(r["round"]) for rs in s["runs"]["guess"].values() for r in rs)
        s["best"], s["median"] = (fixed[0], fixed[len(fixed) // 2]) if fixed else (None, None)
        if s["best"] is not None:
            s["target"] = TARGET_SHARE * float(finals[s["best"]]["accuracy"].mean())
            for method, by_seed in [*s["runs"].items(), *(
                    [("last", s["runs"][finals["last"]["name"]])] if "last" in finals else [])]:
                reach = []
                for k in seeds:
                    hit = [float(r["cost"]) for r in by_seed[k]
                           if float(r["test_accuracy"]) >= s["target"]]  # fmt: skip
                    reach.append(hit[0] if hit else math.inf)
                finals[method]["to_target"] = np.array(reach)
    return out


def _fmt(x: float, digits: int = 3) -> str:
    return "—" if not math.isfinite(x) else f"{x:.{digits}f}"


def _table(summary: dict[str, dict[str, Any]], split: str, head: list[str],
           cells: Any) -> list[str]:  # fmt: skip
    """A Markdown table: ``head``, then ``cells(name, s)`` for each setting of ``split``."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in summary.items():
        if s["split"] == split and s["best"] is not None:
            lines.append("| " + " | ".join([name, *cells(s)]) + " |")
    return lines


def _vs_median(f: dict[str, Any], med: str, key: str, scale: float, unit: str) -> str:
    """The default's paired difference to the median fixed n, ± its 95 % half-width."""
    if "default" not in f:
        return "—"
    d, h = _paired(f["default"][key], f[med][key])
    return f"{scale * d:+.1f} ± {scale * h:.1f}{unit}"


def _loss_table(summary: dict[str, dict[str, Any]], split: str) -> list[str]:
    def cells(s: dict[str, Any]) -> list[str]:
        f, best, med = s["finals"], s["best"], s["median"]
        b = f[best]["loss"].mean()
        return [f"{best.removeprefix('fedavg-')}: {b:.4f}",
                f"{med.removeprefix('fedavg-')}: {f[med]['loss'].mean() / b:.3f}×",
                *(f"{f[m]['loss'].mean() / b:.3f}×" if m in f else "—" for m in SHOWN),
                _vs_median(f, med, "loss", 100 / b, "")]  # fmt: skip

    return _table(summary, split, ["setting", "best fixed n", "median fixed n", *_names(),
                                   "default − median (% of best, 95 %)"], cells)  # fmt: skip


def _accuracy_table(summary: dict[str, dict[str, Any]], split: str) -> list[str]:
    def cells(s: dict[str, Any]) -> list[str]:
        f, best, med = s["finals"], s["best"], s["median"]
        return [f"{best.removeprefix('fedavg-')}: {100 * f[best]['accuracy'].mean():.1f}",
                f"{med.removeprefix('fedavg-')}: {100 * f[med]['accuracy'].mean():.1f}",
                *(f"{100 * f[m]['accuracy'].mean():.1f}" if m in f else "—" for m in SHOWN),
                _vs_median(f, med, "accuracy", 100, "")]  # fmt: skip

    return _table(summary, split, ["setting", "best fixed n", "median fixed n", *_names(),
                                   "default − median (points, 95 %)"], cells)  # fmt: skip


def _median_cost(x: np.ndarray) -> float:
    return float(np.median(x)) if x.size else math.inf


def _target_table(summary: dict[str, dict[str, Any]], split: str) -> list[str]:
    def cells(s: dict[str, Any]) -> list[str]:
        f = s["finals"]
        return [f"{100 * s['target']:.1f} %", _fmt(_median_cost(f[s["best"]]["to_target"]), 1),
                *(_fmt(_median_cost(f[m]["to_target"]), 1) if m in f else "—" for m in SHOWN)]

    return _table(summary, split, ["setting", "target accuracy", "best fixed n", *_names()],
                  cells)  # fmt: skip


def _clock_table(summary: dict[str, dict[str, Any]], split: str) -> list[str]:
    def cells(s: dict[str, Any]) -> list[str]:
        f = s["finals"]
        return [f"{f[s['best']]['wall_clock'].mean():.0f}",
                f"{f[s['median']]['wall_clock'].mean():.0f}",
                *(f"{f[m]['wall_clock'].mean():.0f}" if m in f else "—" for m in SHOWN)]

    return _table(summary, split, ["setting", "best fixed n", "median fixed n", *_names()],
                  cells)  # fmt: skip


def _names() -> list[str]:
    return [LABELS.get(m, m) for m in SHOWN]


def ratio_interval(pairs: list[tuple[np.ndarray, np.ndarray]], seed: int = 0,
                   resamples: int = BOOTSTRAP) -> tuple[float, float, float]:
    """The geometric mean over settings of the ratio of two methods' mean final losses (each
    setting a pair of per-seed arrays, paired by seed), and its 95 % bootstrap interval: each
    setting's seeds drawn with replacement, the same draw for both methods."""
    rng = np.random.default_rng(seed)
    point = float(np.exp(np.mean([np.log(a.mean() / b.mean()) for a, b in pairs])))
    draws = np.zeros(resamples)
    for a, b in pairs:
        idx = rng.integers(0, a.size, size=(resamples, a.size))
        draws += np.log(a[idx].mean(axis=1) / b[idx].mean(axis=1))
    draws = np.exp(draws / len(pairs))
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return point, float(lo), float(hi)


def _headline(summary: dict[str, dict[str, Any]]) -> list[str]:
    """The practitioner's comparison: the default against your FedAvg (and the other methods)
    at equal rounds and spend, per setting and over each split, with 95 % intervals."""
    head = ["setting", "split", "R", "method", "final loss / your FedAvg's (95 %)",
            "accuracy − your FedAvg's (points, 95 %)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    others = [m for m in SHOWN if m != "guess"]
    for split in ("development", "held-out"):
        chosen = {n: s for n, s in summary.items() if s["split"] == split and
                  "guess" in s["finals"]}  # fmt: skip
        for name, s in chosen.items():
            f = s["finals"]
            for m in others:
                if m not in f:
                    continue
                r, lo, hi = ratio_interval([(f[m]["loss"], f["guess"]["loss"])])
                d, h = _paired(f[m]["accuracy"], f["guess"]["accuracy"])
                lines.append(f"| {name} | {split} | {s.get('R', '—')} | {LABELS.get(m, m)} | "
                             f"{r:.3f} ({lo:.3f}–{hi:.3f}) | {100 * d:+.1f} ± {100 * h:.1f} |")
        for m in others:
            versus = _versus_your_fedavg(list(chosen.values()), m)
            if versus is None:
                continue
            count, r, lo, hi, pts = versus
            lines.append(f"| **geometric mean** ({count}) | {split} | | {LABELS.get(m, m)} "
                         f"| {r:.3f} ({lo:.3f}–{hi:.3f}) | {pts:+.1f} |")
    return lines


def _versus_your_fedavg(chosen: list[dict[str, Any]], method: str,
                        ) -> tuple[int, float, float, float, float] | None:  # fmt: skip
    """Over the settings ``chosen`` that ran ``method`` (and your FedAvg): their number, the
    geometric mean of its final loss over your FedAvg's with its 95 % bootstrap interval
    (:func:`ratio_interval`), and its mean accuracy less your FedAvg's, in points; None where
    none ran it."""
    ran = [s["finals"] for s in chosen if method in s["finals"] and "guess" in s["finals"]]
    if not ran:
        return None
    r, lo, hi = ratio_interval([(f[method]["loss"], f["guess"]["loss"]) for f in ran])
    pts = float(np.mean([100 * (f[method]["accuracy"].mean() - f["guess"]["accuracy"].mean())
                         for f in ran]))  # fmt: skip
    return len(ran), r, lo, hi, pts


def overall(summary: dict[str, dict[str, Any]], split: str | None = None) -> dict[str, Any]:
    """Over the settings (of one split, or all): each method's geometric mean of its final
    loss over the best fixed n's, its mean accuracy difference to the best fixed n (points),
    and the settings where it reaches the target at no more cost than the best fixed n."""
    out: dict[str, Any] = {}
    chosen = [s for s in summary.values() if s["best"] is not None and
              (split is None or s["split"] == split)]  # fmt: skip
    for m in (*SHOWN, "median"):  # "last": the best fixed n given the default's ending
        ratios, points, cheaper, n = [], [], 0, 0
        for s in chosen:
            f = s["finals"]
            key = s["median"] if m == "median" else m
            if key not in f:
                continue
            ratios.append(f[key]["loss"].mean() / f[s["best"]]["loss"].mean())
            points.append(100 * (f[key]["accuracy"].mean() - f[s["best"]]["accuracy"].mean()))
            cheaper += _median_cost(f[key]["to_target"]) <= _median_cost(f[s["best"]]["to_target"])
            n += 1
        if n:
            out[m] = {"loss": float(np.exp(np.mean(np.log(ratios)))),
                      "points": float(np.mean(points)), "cheaper": cheaper, "settings": n}  # fmt: skip
    return out


def _overall_table(summary: dict[str, dict[str, Any]]) -> list[str]:
    head = ["method", "split", "final loss / best fixed n (geometric mean)",
            "accuracy − best fixed n (points)", "settings at ≤ the best's cost to target"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for split in ("development", "held-out", None):
        table = overall(summary, split)
        for m, v in table.items():
            name = "median fixed n" if m == "median" else m
            lines.append(f"| {name} | {split or 'all'} | {v['loss']:.3f} | {v['points']:+.1f} | "
                         f"{v['cheaper']} of {v['settings']} |")
    return lines


def hindsight(chosen: list[dict[str, Any]]) -> tuple[float, float]:
    """Over the settings ``chosen`` (each with your FedAvg's runs), the geometric mean of the
    best fixed n's mean final loss over your FedAvg's, and of the lowest mean final loss of any
    method run there (fixed n, with or without the default's last round, and every rival) over
    your FedAvg's: what a choice made in hindsight, setting by setting, would reach."""
    best, oracle = [], []
    for s in chosen:
        f = s["finals"]
        guess = f["guess"]["loss"].mean()
        best.append(f[s["best"]]["loss"].mean() / guess)
        oracle.append(min(v["loss"].mean() for v in f.values()) / guess)
    return float(np.exp(np.mean(np.log(best)))), float(np.exp(np.mean(np.log(oracle))))


def _targets(summary: dict[str, dict[str, Any]]) -> list[str]:
    """The issue's targets, each said met or not, from the numbers above (at equal rounds and
    spend; "met" only where the 95 % interval says so)."""
    lines = []
    below, above = [], []
    for name, s in summary.items():
        f = s["finals"]
        if "default" not in f or s["median"] is None:
            continue
        d, h = _paired(f["default"]["loss"], f[s["median"]]["loss"])
        a, ha = _paired(f["default"]["accuracy"], f[s["median"]]["accuracy"])
        if d + h <= 0 and a - ha >= 0:
            below.append(name)
        else:
            above.append(name)
    lines.append(f"- The default below the median fixed n on loss and above it on accuracy, the "
                 f"95 % interval clear of 0: met in {len(below)} of {len(below) + len(above)} "
                 f"settings{' (not in ' + ', '.join(above) + ')' if above else ''}.")
    for split in ("development", "held-out"):
        chosen = [s for s in summary.values() if s["split"] == split and
                  {"default", "guess"} <= set(s["finals"])]  # fmt: skip
        if not chosen:
            continue
        _, r, lo, hi, pts = _versus_your_fedavg(chosen, "default")
        verdict = "met" if hi <= 0.95 else ("not met: its interval reaches past 0.95"
                                            if lo <= 0.95 else "not met")  # fmt: skip
        best, oracle = hindsight(chosen)
        lines.append(f"- {split.capitalize()}: the default's final loss ≤ 0.95× your FedAvg's "
                     f"on the geometric mean: {r:.3f} (95 % {lo:.3f}–{hi:.3f}), {verdict}; "
                     f"accuracy {pts:+.1f} points. For scale, chosen in hindsight setting by "
                     f"setting: the best fixed n reaches {best:.3f}, and the best of every "
                     f"method run there {oracle:.3f} (no method can choose so).")
        ahead, behind = [], []
        for m in ("grow", "decay", "isp", "bara", "last"):
            pairs = [(s["finals"]["default"]["loss"], s["finals"][m]["loss"])
                     for s in chosen if m in s["finals"]]  # fmt: skip
            if not pairs:
                continue
            r, lo, hi = ratio_interval(pairs)
            (ahead if hi < 1 else behind).append(f"{LABELS.get(m, m)} {r:.3f} ({lo:.3f}–{hi:.3f})")
        lines.append(f"- {split.capitalize()}, the default's loss over each rival's: ahead "
                     f"(interval below 1) of {', '.join(ahead) or 'none'}; not shown ahead of "
                     f"{', '.join(behind) or 'none'}.")
    return lines


def _figures(summary: dict[str, dict[str, Any]], arms: list[dict[str, Any]], out: Path) -> list[str]:
    """Loss and accuracy against cost, and n over the rounds, one column per setting."""
    from matplotlib.figure import Figure

    from ..plots import save_figure
    from ..studies.figures import PALETTE

    names = [n for n, s in summary.items() if s["best"] is not None]
    if not names:
        return []
    fig = Figure(figsize=(3.4 * len(names), 9.0))
    axes = fig.subplots(3, len(names), squeeze=False)
    by_run: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for a in arms:
        by_run[(a["setting"], a["method"], int(a["seed"]))].append((int(a["round"]), int(a["n"])))
    for j, name in enumerate(names):
        s = summary[name]
        methods = [s["best"], s["median"], *(m for m in SHOWN if m in s["runs"])]
        labels = {s["best"]: f"best fixed ({s['best'].removeprefix('fedavg-')})",
                  s["median"]: f"median fixed ({s['median'].removeprefix('fedavg-')})"}
        for i, m in enumerate(dict.fromkeys(methods)):
            runs = [s["runs"][m][k] for k in s["seeds"]]
            top = max(float(r[-1]["cost"]) for r in runs)
            grid = np.linspace(0, top, 40)
            for row, key in ((0, "train_loss"), (1, "test_accuracy")):
                ys = [np.interp(grid, [float(r["cost"]) for r in rs],
                                [float(r[key]) for r in rs]) for rs in runs]  # fmt: skip
                axes[row, j].plot(grid, np.mean(ys, axis=0), color=PALETTE[i % len(PALETTE)],
                                  lw=1.3, label=labels.get(m, m))  # fmt: skip
        for i, m in enumerate(("default", "isp", "noise-scale")):
            pts = by_run.get((name, m, s["seeds"][0])) if s["seeds"] else None
            if pts:
                r, n = zip(*sorted(pts), strict=True)
                axes[2, j].step(r, n, where="mid", lw=1.2, color=PALETTE[(i + 2) % len(PALETTE)],
                                label=m)  # fmt: skip
        axes[0, j].set_title(name, fontsize=9)
        axes[0, j].set_ylabel("training loss")
        axes[1, j].set_ylabel("test accuracy")
        axes[1, j].set_xlabel("cost spent")
        axes[2, j].set_xlabel("server round")
        axes[2, j].set_ylabel(f"n (seed {s['seeds'][0] if s['seeds'] else '—'})")
        for ax in axes[:, j]:
            ax.grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=6)
    axes[2, 0].legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, out / "bench")
    return ["![Loss, accuracy and n against cost](bench.png)"]


def report(rows: list[dict[str, Any]], arms: list[dict[str, Any]], out: Path,
           command: str, tuning: dict[str, Any],
           grids: dict[str, Any] | None = None) -> Path:  # fmt: skip
    """Write ``out/report.md`` (and ``bench.png``); returns its path."""
    from ..results import atomic_write_bytes

    summary = summarise(rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    text = [("# Field bench: eegrad's default against your FedAvg, fixed n, cohort schedules "
             "and ISP, at equal rounds and spend"), "",
            (f"Generated by `{command}` ({len(seeds)} seeds per setting; every method runs the "
             "same R rounds within the same total budget, those of your FedAvg: the guessed n, "
             "10 % of K, for R rounds spends the budget; the model each run delivers). Fixed n: "
             "Flower's FedAvg, those that last the R rounds (n at most your FedAvg's); a fixed n "
             "whose budget runs short asks fewer clients in its last rounds, as the budget left "
             "affords. 'fixed n + last round': the best fixed n whose last round asks the most "
             "clients the budget left affords, as the default's may. Every method's client "
             "learning rate (each fixed n's) is tuned on separate tuning seeds over a grid of "
             "three, extended past an edge where the best rate was there (below). Intervals are 95 %, paired by seed (the module's notes). Evaluations are "
             "not charged to the budget (the server's, of the pooled training and test data, "
             "for this report alone)."), ""]
    text += ["## Targets", "", *_targets(summary), ""]
    text += ["## Equal rounds and spend: against your FedAvg", "", *_headline(summary), ""]
    text += ["## Over the settings, against the best fixed n in hindsight", "",
             *_overall_table(summary), ""]
    for split in ("development", "held-out"):
        text += [f"## {split.capitalize()} settings", "",
                 "Final training loss (best fixed n: its loss; the others: over it):", "",
                 *_loss_table(summary, split), "",
                 "Test accuracy at the budget (%):", "", *_accuracy_table(summary, split), "",
                 (f"Cost to reach {100 * TARGET_SHARE:.0f} % of the best fixed n's accuracy "
                  "(median over seeds; — never):"), "", *_target_table(summary, split), "",
                 "Simulated wall clock at the budget (s):", "", *_clock_table(summary, split), ""]
    text += ["## Tuned learning rates", "", "| setting | method: learning rate |", "|---|---|"]
    for name, lrs in tuning.items():
        text.append(f"| {name} | " + ", ".join(f"{m}: {lr:g}" for m, lr in lrs.items()) + " |")
    edges = [key for key, g in (grids or {}).items() if g["at_edge"]]
    extended = [f"{key} ({', '.join(f'{lr:g}' for lr in g['grid'])})"
                for key, g in (grids or {}).items() if len(g["grid"]) > 3]  # fmt: skip
    if grids is not None:
        text += ["", (f"Grids extended past an edge: {'; '.join(extended) or 'none'}. Best "
                      f"rate still at an edge after the extensions: "
                      f"{', '.join(edges) or 'none'}.")]
    text += ["", "## Figures", "", *_figures(summary, arms, out), ""]
    path = out / "report.md"
    atomic_write_bytes(path, "\n".join(text).encode())
    return path
