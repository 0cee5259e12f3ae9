"""B a round: the default rule against the fixed n, with the clients' local steps reported or not.

A study of the paper's model in the bench (``mode="round"``: B a round, each of the n clients
asked trains E epochs of mini-batches on the samples its share (B − D(n))/n buys), on the
bench's development setting ``digits-softmax-20-round`` and on three of this study alone, the
bench's development federations ``mnist1d-mlp-50``, ``digits-mlp-20`` and
``mnist5k-softmax-100`` with B a round (:data:`STUDY`): no new data set or model family, so
that the rule may be studied on them. Methods: ``default`` (the bench's), ``default+steps`` (the same rule,
its clients reporting their local steps as ``local-steps``, as
:func:`eegrad.flower.budgeted_train` does and the bench's clients do not), ``default+samples``
(the same with the samples each used reported in place of its steps), ``guess`` (the
guessed n, 10 % of K) and every fixed n of the bench's grid. Each at every learning rate of
``--lrs`` on the seeds given (the bench's tuning seeds by default, never its reported ones):
the table gives each method's mean final training loss at its best rate, over the guess's::

    python benchmarks/round_mode_study.py --jobs 2

Runs are not stored; about 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from eegrad.bench.settings import SETTINGS, BenchSetting

#: The study's own settings (registered in each process; not the bench's): the bench's
#: development federations of MNIST-1D's MLP, digits' MLP and MNIST-5k's softmax, with B a round.
STUDY = (
    BenchSetting("mnist1d-mlp-50-round", "development", "mnist1d", "mlp", 50, "dirichlet-1.0",
                 mode="round"),
    BenchSetting("digits-mlp-20-round", "development", "digits", "mlp", 20, "dirichlet-0.1",
                 mode="round"),
    BenchSetting("mnist5k-softmax-100-round", "development", "mnist-5k", "softmax", 100,
                 "dirichlet-0.1", mode="round"),
)  # fmt: skip


def _register() -> None:
    for setting in STUDY:
        SETTINGS.setdefault(setting.name, setting)


def one(job: tuple[str, str, int, float]) -> dict:
    """One run: the final training loss and test accuracy, and the n of every round."""
    from eegrad.bench.runner import run_one

    _register()
    setting, method, seed, lr = job
    report = {"default+steps": "steps", "default+samples": "samples"}.get(method)
    rows, arms = run_one(setting, "default" if report else method, seed, lr,
                         report_steps=report)  # fmt: skip
    return {"setting": setting, "method": method, "seed": seed, "lr": lr,
            "loss": float(rows[-1]["train_loss"]), "accuracy": float(rows[-1]["test_accuracy"]),
            "arms": [int(a["n"]) for a in arms]}  # fmt: skip


def main() -> None:
    from eegrad.bench.runner import TUNING_SEEDS, fixed_counts

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--settings", nargs="+",
                   default=["digits-softmax-20-round", *(s.name for s in STUDY)])  # fmt: skip
    p.add_argument("--lrs", nargs="+", type=float, default=[0.1, 0.3, 1.0, 3.0])
    p.add_argument("--seeds", nargs="+", type=int, default=[*TUNING_SEEDS, 1002])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", help="write every run here")
    a = p.parse_args()
    _register()
    jobs = []
    for name in a.settings:
        counts = fixed_counts(SETTINGS[name].K, per_round=True)
        methods = ["default", "default+steps", "default+samples", "guess", *(f"fedavg-{n}" for n in counts)]
        jobs += [(name, m, s, lr) for m in methods for lr in a.lrs for s in a.seeds]
    with ProcessPoolExecutor(a.jobs, initializer=_register) as ex:
        runs = list(ex.map(one, jobs))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(runs, fh)
    print(f"Mean final training loss over seeds {a.seeds} at each method's best rate of "
          f"{a.lrs} (a diverged rate: inf), and over the guess's; the median n of the "
          "rounds after the first four (the warm-up).\n")
    print("| setting | method | best rate | loss | × guess | accuracy (%) | median n |")
    print("|---|---|---|---|---|---|---|")
    for name in a.settings:
        mine = [r for r in runs if r["setting"] == name]
        best: dict[str, tuple[float, float]] = {}
        for method in dict.fromkeys(r["method"] for r in mine):
            means = {lr: np.mean([r["loss"] if np.isfinite(r["loss"]) else np.inf
                                  for r in mine if r["method"] == method and r["lr"] == lr])
                     for lr in a.lrs}  # fmt: skip
            lr = min(means, key=lambda k: (means[k], k))
            best[method] = (lr, float(means[lr]))
        for method, (lr, loss) in best.items():
            chosen = [r for r in mine if r["method"] == method and r["lr"] == lr]
            acc = 100 * np.mean([r["accuracy"] for r in chosen])
            n = np.median([x for r in chosen for x in r["arms"][4:]])
            print(f"| {name} | {method} | {lr:g} | {loss:.4f} | {loss / best['guess'][1]:.3f} "
                  f"| {acc:.1f} | {n:g} |")


if __name__ == "__main__":
    main()
