"""The benchmark's report, from its rows alone: the headline at your FedAvg's rate, tables per
metric, what a user who retunes would see, and figures.

Every method of a setting runs the same R rounds within the same budget (your FedAvg's: the
guessed n for R rounds), at the client learning rate tuned for your FedAvg — a practitioner's
app as it is, the strategy swapped. Per setting and method, each seed's run gives the final
training loss and test accuracy (the model the run delivers), the worst training loss of any
round along the run (the model after each round, evaluated on the pooled training rows) and its
simulated wall clock. The fixed n are your FedAvg's n and those below it that last the R rounds
(under B a round, the whole grid); the best fixed n is the one of least mean final training
loss, the median fixed n the middle one when they are ranked so (a blind guess among them).
Every method of a seed runs on the same clients and data, so differences are paired by seed:
95 % intervals from Student's t over the seeds for differences, and from a bootstrap over the
seeds (:data:`BOOTSTRAP` resamples, each setting's seeds drawn with replacement, the same draw
for both methods) for ratios and their geometric means over the settings.

The settings come in three groups (:data:`GROUPS`): development (the rule may be tuned on
them), held-out (seen: frozen before the rule of rounds, then read by a rule study) and
held-out (fresh: frozen before the safe default ran on them); each is reported apart.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from .settings import SETTINGS

__all__ = ["BOOTSTRAP", "GROUPS", "TARGETS", "ratio_interval", "readme_table", "report",
           "summarise", "targets"]

#: The methods shown beside the fixed n, in the tables' order ("last": the best fixed n
#: given the default's last round).
SHOWN = ("default", "guess", "last", "grow", "decay", "isp", "bara", "noise-scale")
#: How the tables name the methods.
LABELS = {"guess": "your FedAvg", "last": "fixed n + last round", "bara": "BARA-style"}
#: The groups of settings (their ``split``) and how the report names them.
GROUPS = {"development": "development", "held-out": "held-out (seen)",
          "fresh": "held-out (fresh)"}  # fmt: skip
#: The default's targets against your FedAvg at your FedAvg's rate: in every setting its final
#: loss ratio at most ``setting``, the interval's lower end at most 1, its worst round at most
#: ``worst`` times your FedAvg's worst; over development at most ``development``, over each
#: held-out group at most ``held_out`` and ahead of ``rivals``.
TARGETS = {"setting": 1.02, "worst": 1.5, "development": 0.85, "held_out": 1.00,
           "rivals": ("grow", "decay", "isp", "bara")}  # fmt: skip
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
    """Per setting: its group, R, each method's per-seed finals (loss, accuracy, worst round's
    loss, wall clock, cost), the best and median fixed n."""
    runs: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        runs[(r["setting"], r["method"], int(r["seed"]))].append(r)
    out: dict[str, dict[str, Any]] = {}
    for (setting, method, seed), rs in runs.items():
        rs.sort(key=lambda r: int(r["round"]))
        known = SETTINGS.get(setting)  # a setting's group as defined now (a run keeps its own)
        split = known.split if known is not None else rs[0]["split"]
        s = out.setdefault(setting, {"split": split, "dataset": rs[0]["dataset"],
                                     "runs": defaultdict(dict)})  # fmt: skip
        s["runs"][method][seed] = rs
    for s in out.values():
        finals: dict[str, dict[str, Any]] = {}
        seeds = sorted(set.intersection(*(set(v) for v in s["runs"].values())))
        s["seeds"] = seeds
        for method, by_seed in s["runs"].items():
            last = [by_seed[k][-1] for k in seeds]
            worst = [max((float(r["train_loss"]) for r in by_seed[k] if int(r["round"]) > 0),
                         default=math.inf) for k in seeds]  # fmt: skip
            finals[method] = {"loss": np.array([float(r["train_loss"]) for r in last]),
                              "accuracy": np.array([float(r["test_accuracy"]) for r in last]),
                              "worst": np.array(worst),
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
    return out


def ratio_interval(pairs: list[tuple[np.ndarray, np.ndarray]], seed: int = 0,
                   resamples: int = BOOTSTRAP) -> tuple[float, float, float]:
    """The geometric mean over settings of the ratio of two methods' mean values (each setting
    a pair of per-seed arrays, paired by seed), and its 95 % bootstrap interval: each setting's
    seeds drawn with replacement, the same draw for both methods."""
    rng = np.random.default_rng(seed)
    point = float(np.exp(np.mean([np.log(a.mean() / b.mean()) for a, b in pairs])))
    draws = np.zeros(resamples)
    for a, b in pairs:
        idx = rng.integers(0, a.size, size=(resamples, a.size))
        draws += np.log(a[idx].mean(axis=1) / b[idx].mean(axis=1))
    draws = np.exp(draws / len(pairs))
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return point, float(lo), float(hi)


def _finite(f: dict[str, Any], *methods: str) -> bool:
    return all(m in f and np.all(np.isfinite(f[m]["loss"])) for m in methods)


def _versus(chosen: list[dict[str, Any]], method: str, key: str = "loss",
            against: str = "guess") -> tuple[int, float, float, float, float] | None:  # fmt: skip
    """Over the settings ``chosen`` that ran ``method`` and ``against``: their number, the
    geometric mean of ``method``'s mean ``key`` over ``against``'s with its 95 % bootstrap
    interval (:func:`ratio_interval`), and its mean accuracy less ``against``'s, in points;
    None where none ran both."""
    ran = [s["finals"] for s in chosen if _finite(s["finals"], method, against)]
    if not ran:
        return None
    r, lo, hi = ratio_interval([(f[method][key], f[against][key]) for f in ran])
    pts = float(np.mean([100 * (f[method]["accuracy"].mean() - f[against]["accuracy"].mean())
                         for f in ran]))  # fmt: skip
    return len(ran), r, lo, hi, pts


def _group(summary: dict[str, dict[str, Any]], split: str) -> list[dict[str, Any]]:
    return [s for s in summary.values() if s["split"] == split and "guess" in s["finals"]]


def _headline(summary: dict[str, dict[str, Any]], worst: bool = True) -> list[str]:
    """Per group and method: the geometric mean over the group's settings of the final loss
    over your FedAvg's, the accuracy difference and (``worst``) the worst round's loss over
    your FedAvg's worst and the settings where it is clearly worse (its interval above 1)."""
    head = ["group", "method", "settings", "final loss / your FedAvg's (95 %)",
            "accuracy − your FedAvg's (points)"]  # fmt: skip
    if worst:
        head += ["worst round / your FedAvg's worst", "clearly worse in"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for split, label in GROUPS.items():
        chosen = _group(summary, split)
        for m in (x for x in SHOWN if x != "guess"):
            versus = _versus(chosen, m)
            if versus is None:
                continue
            count, r, lo, hi, pts = versus
            cells = [label, LABELS.get(m, m), str(count), f"{r:.3f} ({lo:.3f}–{hi:.3f})",
                     f"{pts:+.1f}"]  # fmt: skip
            if worst:
                worse = [n for n, s in summary.items() if s["split"] == split and
                         _finite(s["finals"], m, "guess") and ratio_interval(
                             [(s["finals"][m]["loss"], s["finals"]["guess"]["loss"])])[1] > 1]
                cells += [f"{_versus(chosen, m, 'worst')[1]:.3f}", ", ".join(worse) or "none"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def readme_table(summary: dict[str, dict[str, Any]]) -> list[str]:
    """The README's table: per method, over each group, the geometric mean of its final loss
    over your FedAvg's (95 %) and its accuracy less your FedAvg's (points), at your FedAvg's
    rate — the headline's numbers (:func:`_headline`), side by side."""
    head = ["method"]
    for label in GROUPS.values():
        head += [f"{label}: loss (95 %)", "accuracy (points)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in (x for x in SHOWN if x != "guess"):
        cells = [LABELS.get(m, m)]
        for split in GROUPS:
            versus = _versus(_group(summary, split), m)
            cells += (["—", "—"] if versus is None else
                      [f"{versus[1]:.3f} ({versus[2]:.3f}–{versus[3]:.3f})", f"{versus[4]:+.1f}"])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _per_setting(summary: dict[str, dict[str, Any]], rates: dict[str, Any] | None) -> list[str]:
    """Per setting and method: final loss over your FedAvg's (95 %), accuracy difference
    (points, 95 %), worst round over your FedAvg's worst, and what it spent over what your
    FedAvg spent (the mean over the seeds of the ratio of their runs' costs)."""
    head = ["setting", "group", "R", "your FedAvg's rate", "method",
            "final loss / your FedAvg's (95 %)", "accuracy − your FedAvg's (points, 95 %)",
            "worst round / your FedAvg's worst (95 %)", "spend / your FedAvg's"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for split, label in GROUPS.items():
        for name, s in summary.items():
            f = s["finals"]
            if s["split"] != split or "guess" not in f:
                continue
            lr = (rates or {}).get(name, {}).get("guess")
            for m in (x for x in SHOWN if x != "guess"):
                if not _finite(f, m, "guess"):
                    continue
                r, lo, hi = ratio_interval([(f[m]["loss"], f["guess"]["loss"])])
                w, wlo, whi = ratio_interval([(f[m]["worst"], f["guess"]["worst"])])
                d, h = _paired(f[m]["accuracy"], f["guess"]["accuracy"])
                spend = float(np.mean(f[m]["cost"] / f["guess"]["cost"]))
                lines.append(f"| {name} | {label} | {s.get('R', '—')} | "
                             f"{'—' if lr is None else f'{lr:g}'} | {LABELS.get(m, m)} | "
                             f"{r:.3f} ({lo:.3f}–{hi:.3f}) | {100 * d:+.1f} ± {100 * h:.1f} | "
                             f"{w:.3f} ({wlo:.3f}–{whi:.3f}) | {spend:.3f} |")  # fmt: skip
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


def targets(summary: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The default's targets (:data:`TARGETS`), each measured: per setting its final loss
    ratio to your FedAvg's with the interval and its worst round's ratio; per group the
    geometric mean with its interval and the rivals it is ahead of (interval below 1)."""
    out: dict[str, Any] = {"settings": {}, "groups": {}}
    for name, s in summary.items():
        f = s["finals"]
        if not _finite(f, "default", "guess"):
            continue
        r, lo, hi = ratio_interval([(f["default"]["loss"], f["guess"]["loss"])])
        w = ratio_interval([(f["default"]["worst"], f["guess"]["worst"])])[0]
        out["settings"][name] = {"group": s["split"], "ratio": r, "low": lo, "high": hi,
                                 "worst": w, "met": r <= TARGETS["setting"] and lo <= 1.0
                                 and w <= TARGETS["worst"]}  # fmt: skip
    for split in GROUPS:
        chosen = [s for s in _group(summary, split) if _finite(s["finals"], "default", "guess")]
        if not chosen:
            continue
        _, r, lo, hi, pts = _versus(chosen, "default")
        ahead, behind = [], []
        for m in TARGETS["rivals"]:
            pairs = [(s["finals"]["default"]["loss"], s["finals"][m]["loss"])
                     for s in chosen if _finite(s["finals"], m)]  # fmt: skip
            if pairs:
                q, qlo, qhi = ratio_interval(pairs)
                (ahead if qhi < 1 else behind).append((m, q, qlo, qhi))
        goal = TARGETS["development" if split == "development" else "held_out"]
        best, oracle = hindsight(chosen)
        out["groups"][split] = {"ratio": r, "low": lo, "high": hi, "points": pts, "goal": goal,
                                "ahead": ahead, "behind": behind, "best_fixed": best,
                                "best_of_all": oracle, "settings": len(chosen)}  # fmt: skip
    return out


def _targets_text(summary: dict[str, dict[str, Any]]) -> list[str]:
    """The targets in words, each said met or not, from the numbers."""
    t = targets(summary)
    missed = [f"{n} {v['ratio']:.3f} ({v['low']:.3f}–{v['high']:.3f}), worst round {v['worst']:.2f}x"
              for n, v in t["settings"].items() if not v["met"]]
    lines = [(f"- Every setting: the default's final loss ≤ {TARGETS['setting']:g}× your FedAvg's "
             f"with the interval's lower end ≤ 1, and its worst round ≤ {TARGETS['worst']:g}× your "
             f"FedAvg's worst: met in {len(t['settings']) - len(missed)} of {len(t['settings'])}"
             f"{' (not in ' + '; '.join(missed) + ')' if missed else ''}.")]
    for split, g in t["groups"].items():
        verdict = "met" if g["ratio"] <= g["goal"] else "not met"
        ahead = ", ".join(f"{LABELS.get(m, m)} {q:.3f} ({lo:.3f}–{hi:.3f})"
                          for m, q, lo, hi in g["ahead"]) or "none"  # fmt: skip
        behind = ", ".join(f"{LABELS.get(m, m)} {q:.3f} ({lo:.3f}–{hi:.3f})"
                           for m, q, lo, hi in g["behind"]) or "none"  # fmt: skip
        lines.append(f"- {GROUPS[split].capitalize()} ({g['settings']} settings): the geometric "
                     f"mean ≤ {g['goal']:g}× your FedAvg's: {g['ratio']:.3f} (95 % "
                     f"{g['low']:.3f}–{g['high']:.3f}), {verdict}; accuracy {g['points']:+.1f} "
                     f"points. Ahead of (interval below 1): {ahead}; not shown ahead of: "
                     f"{behind}. For scale, chosen in hindsight setting by setting: the best "
                     f"fixed n reaches {g['best_fixed']:.3f}, the best of every method run there "
                     f"{g['best_of_all']:.3f} (no method can choose so).")
    return lines


def _table(summary: dict[str, dict[str, Any]], split: str, head: list[str],
           cells: Any) -> list[str]:  # fmt: skip
    """A Markdown table: ``head``, then ``cells(s)`` for each setting of ``split``."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in summary.items():
        if s["split"] == split and s["best"] is not None:
            lines.append("| " + " | ".join([name, *cells(s)]) + " |")
    return lines


def _names() -> list[str]:
    return [LABELS.get(m, m) for m in SHOWN]


def _loss_table(summary: dict[str, dict[str, Any]], split: str) -> list[str]:
    def cells(s: dict[str, Any]) -> list[str]:
        f, best, med = s["finals"], s["best"], s["median"]
        b = f[best]["loss"].mean()
        return [f"{best.removeprefix('fedavg-')}: {b:.4f}",
                f"{med.removeprefix('fedavg-')}: {f[med]['loss'].mean() / b:.3f}×",
                *(f"{f[m]['loss'].mean() / b:.3f}×" if m in f else "—" for m in SHOWN)]

    return _table(summary, split, ["setting", "best fixed n", "median fixed n", *_names()], cells)


def _accuracy_table(summary: dict[str, dict[str, Any]], split: str) -> list[str]:
    def cells(s: dict[str, Any]) -> list[str]:
        f, best, med = s["finals"], s["best"], s["median"]
        return [f"{best.removeprefix('fedavg-')}: {100 * f[best]['accuracy'].mean():.1f}",
                f"{med.removeprefix('fedavg-')}: {100 * f[med]['accuracy'].mean():.1f}",
                *(f"{100 * f[m]['accuracy'].mean():.1f}" if m in f else "—" for m in SHOWN)]

    return _table(summary, split, ["setting", "best fixed n", "median fixed n", *_names()], cells)


def _clock_table(summary: dict[str, dict[str, Any]], split: str) -> list[str]:
    def cells(s: dict[str, Any]) -> list[str]:
        f = s["finals"]
        return [f"{f[s['best']]['wall_clock'].mean():.0f}",
                f"{f[s['median']]['wall_clock'].mean():.0f}",
                *(f"{f[m]['wall_clock'].mean():.0f}" if m in f else "—" for m in SHOWN)]

    return _table(summary, split, ["setting", "best fixed n", "median fixed n", *_names()], cells)


def _rounds_line(summary: dict[str, dict[str, Any]]) -> list[str]:
    """Where your FedAvg ran fewer than R rounds in a seed (its budget ran short), said."""
    short = []
    for name, s in summary.items():
        if "guess" not in s["runs"]:
            continue
        rounds = [max(int(r["round"]) for r in rs) for rs in s["runs"]["guess"].values()]
        R = s.get("R", 0)
        if min(rounds) < R:
            short.append(f"{name} ({sum(x < R for x in rounds)} of {len(rounds)} seeds, "
                         f"at least {min(rounds)} of {R})")
    return [f"Your FedAvg ran its R rounds in every seed of every setting{'' if not short else ' but ' + '; '.join(short)}."]


def _retuned_table(summary: dict[str, dict[str, Any]]) -> list[str]:
    """Each method at its own tuned rate against your FedAvg at its rate, per group (the
    headline's table of these runs, :func:`_headline`), then the head of the per-setting
    table: what a user who retunes would see."""
    return [*_headline(summary, worst=False), "",
            "| setting | group | method | rate | final loss / your FedAvg's (95 %) |",
            "|---|---|---|---|---|"]


def _retuned_settings(summary: dict[str, dict[str, Any]], rates: dict[str, Any]) -> list[str]:
    lines = []
    for split, label in GROUPS.items():
        for name, s in summary.items():
            f = s["finals"]
            if s["split"] != split or "guess" not in f:
                continue
            for m in (x for x in SHOWN if x != "guess"):
                if _finite(f, m, "guess"):
                    r, lo, hi = ratio_interval([(f[m]["loss"], f["guess"]["loss"])])
                    lr = rates.get(name, {}).get(m)
                    lines.append(f"| {name} | {label} | {LABELS.get(m, m)} | "
                                 f"{'—' if lr is None else f'{lr:g}'} | {r:.3f} ({lo:.3f}–{hi:.3f}) |")
    return lines


def _rates_table(rates: dict[str, Any], grids: dict[str, Any] | None) -> list[str]:
    lines = ["| setting | method: learning rate (grid tried; * not admissible) |", "|---|---|"]
    for name, by_m in rates.items():
        cells = []
        for m, lr in by_m.items():
            g = (grids or {}).get(f"{name} {m}")
            tried = ""
            if g is not None:
                ok = set(g["admissible"])
                tried = " (" + ", ".join(f"{x:g}{'' if f'{x:g}' in ok else '*'}"
                                         for x in g["grid"]) + ")"  # fmt: skip
            cells.append(f"{LABELS.get(m, m)}: {lr:g}{tried}")
        lines.append(f"| {name} | " + "; ".join(cells) + " |")
    flagged = [k for k, g in (grids or {}).items() if g["at_edge"] or g["none_admissible"]]
    lines += ["", (f"Best rate still at an edge of its grid, or no rate admissible: "
                  f"{', '.join(flagged) or 'none'}.")]
    return lines


def _figures(summary: dict[str, dict[str, Any]], arms: list[dict[str, Any]], out: Path) -> list[str]:
    """Loss and accuracy along the rounds, and n over the rounds, one column per setting."""
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
                  s["median"]: f"median fixed ({s['median'].removeprefix('fedavg-')})",
                  "guess": "your FedAvg"}  # fmt: skip
        for i, m in enumerate(dict.fromkeys(methods)):
            runs = [s["runs"][m][k] for k in s["seeds"]]
            top = max(int(r[-1]["round"]) for r in runs)
            grid = np.arange(top + 1)
            for row, key in ((0, "train_loss"), (1, "test_accuracy")):
                ys = [np.interp(grid, [int(r["round"]) for r in rs],
                                [float(r[key]) for r in rs]) for rs in runs]  # fmt: skip
                axes[row, j].plot(grid, np.mean(ys, axis=0), color=PALETTE[i % len(PALETTE)],
                                  lw=1.3, label=labels.get(m, m))  # fmt: skip
        for i, m in enumerate(("default", "guess", "isp", "noise-scale")):
            pts = by_run.get((name, m, s["seeds"][0])) if s["seeds"] else None
            if pts:
                r, n = zip(*sorted(pts), strict=True)
                axes[2, j].step(r, n, where="mid", lw=1.2, color=PALETTE[(i + 2) % len(PALETTE)],
                                label=labels.get(m, m))  # fmt: skip
        axes[0, j].set_title(name, fontsize=9)
        axes[0, j].set_ylabel("training loss")
        axes[1, j].set_ylabel("test accuracy")
        axes[1, j].set_xlabel("server round")
        axes[2, j].set_xlabel("server round")
        axes[2, j].set_ylabel(f"n (seed {s['seeds'][0] if s['seeds'] else '—'})")
        for ax in axes[:, j]:
            ax.grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=6)
    axes[2, 0].legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, out / "bench")
    return ["![Loss, accuracy and n along the rounds](bench.png)"]


def _took(took: dict[str, Any] | None) -> list[str]:
    if not took:
        return []
    runs = took["runs"]
    return [(f"This bench took {took['seconds'] / 60:.1f} minutes with {took['jobs']} "
            f"process{'es' if took['jobs'] > 1 else ''}: {runs['run']} runs run "
            f"({took['running_seconds'] / 60:.1f} minutes), {runs['table']} taken from the "
            f"table of baseline runs ({took['table']}), {runs['store']} from its store.")]


def report(rows: list[dict[str, Any]], arms: list[dict[str, Any]], out: Path,
           command: str, tuning: dict[str, Any], grids: dict[str, Any] | None = None, *,
           retuned: list[dict[str, Any]] | None = None,
           took: dict[str, Any] | None = None) -> Path:  # fmt: skip
    """Write ``out/report.md`` (and ``bench.png``); returns its path. ``rows``: the runs at
    your FedAvg's rate; ``retuned``: each method at its own (``tuning``: the rates)."""
    from ..results import atomic_write_bytes

    summary = summarise(rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    present = [split for split in GROUPS if any(s["split"] == split for s in summary.values())]
    text = [("# Field bench: your app as it is — eegrad's default against your FedAvg, fixed n, "
             "cohort schedules, ISP and BARA-style at your FedAvg's rate, rounds and spend"), "",
            (f"Generated by `{command}` ({len(seeds)} seeds per setting). Every method runs at "
             "the client learning rate tuned for your FedAvg (the guessed n, 10 % of K, on "
             "separate tuning seeds; a rate whose runs diverge or end above the initial loss "
             "is never chosen), the same R rounds within the same total budget (your "
             "FedAvg's: the guessed n for R rounds spends it), and is judged on the model it "
             "delivers: a practitioner's app as it is, the strategy swapped. Fixed n: Flower's "
             "FedAvg at n below your FedAvg's (those that last the R rounds; under B a round, "
             "a grid over 1..K); 'fixed n + last round': the best of them given the default's "
             "ending. The worst round: the highest training loss of the model after any round "
             "(evaluated every round). Intervals are 95 %, paired by seed. Evaluations are not "
             "charged to the budget. Groups: development (the rule may be tuned on them), "
             "held-out (seen: each frozen before a rule ran on it, since read: seven before the "
             "rule of rounds, four before the anchored default, four before the default that "
             "keeps your n, four before the default whose last rounds are kept for the worst "
             "case), held-out (fresh: frozen before the default that draws among your FedAvg's "
             "clients ran on them)."), "",
            *_took(took), ""]
    text += ["## Targets", "", *_targets_text(summary), "", *_rounds_line(summary), ""]
    text += ["## At your FedAvg's rate: over each group", "", *_headline(summary), ""]
    text += ["## At your FedAvg's rate: per setting", "", *_per_setting(summary, tuning), ""]
    if retuned:
        own = summarise(retuned)
        text += ["## What a user who retunes would see: each method at its own rate", "",
                 ("Each method's rate tuned for it on the tuning seeds as your FedAvg's is, "
                  "against your FedAvg at its rate:"), "", *_retuned_table(own),
                 *_retuned_settings(own, tuning), ""]
    for split in present:
        text += [f"## {GROUPS[split].capitalize()} settings", "",
                 "Final training loss (best fixed n: its loss; the others: over it):", "",
                 *_loss_table(summary, split), "",
                 "Test accuracy at the budget (%):", "", *_accuracy_table(summary, split), "",
                 "Simulated wall clock at the budget (s):", "", *_clock_table(summary, split), ""]
    text += ["## Tuned learning rates", "", *_rates_table(tuning, grids)]
    text += ["", "## Figures", "", *_figures(summary, arms, out), ""]
    atomic_write_bytes(out / "readme-table.md", ("\n".join(readme_table(summary)) + "\n").encode())
    path = out / "report.md"
    atomic_write_bytes(path, "\n".join(text).encode())
    return path
