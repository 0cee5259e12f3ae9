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

    python studies/round_mode_study.py --jobs 2

Runs are not stored; a rate that diverges is a run of infinite loss, as in the bench. About
10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from eegrad.bench import _losses, _tune
from eegrad.bench.runner import job
from eegrad.bench.settings import SETTINGS, BenchSetting, register

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
        register(setting)


#: The study's methods that are the default with its clients reporting their local steps.
REPORTS = {"default+steps": "steps", "default+samples": "samples"}


def one(setting: str, method: str, seed: int, lr: float, quick: bool) -> tuple[list, list]:
    """One run (the bench's :func:`~eegrad.bench.runner.job`, not stored): its rows and arms."""
    _register()
    report = REPORTS.get(method)
    return job(None, setting, "default" if report else method, seed, lr, quick, report)


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
    todo = []
    for name in a.settings:
        counts = fixed_counts(SETTINGS[name].K, per_round=True)
        methods = ["default", *REPORTS, "guess", *(f"fedavg-{n}" for n in counts)]
        todo += [(name, m, s, lr, False) for m in methods for lr in a.lrs for s in a.seeds]
    with ProcessPoolExecutor(a.jobs, initializer=_register) as ex:
        results = list(ex.map(one, *zip(*todo, strict=True)))
    rates, losses = _tune(results, todo), _losses(results, todo)
    runs = [{"setting": name, "method": m, "seed": seed, "lr": lr,
             "accuracy": float(rows[-1]["test_accuracy"]), "arms": [int(x["n"]) for x in arms]}
            for (name, m, seed, lr, _), (rows, arms) in zip(todo, results, strict=True)]  # fmt: skip
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
        best = {m: (lr, losses[(name, m, lr)]) for m, lr in rates[name].items()}
        for method, (lr, loss) in best.items():
            chosen = [r for r in mine if r["method"] == method and r["lr"] == lr]
            acc = 100 * np.mean([r["accuracy"] for r in chosen])
            n = np.median([x for r in chosen for x in r["arms"][4:]])
            print(f"| {name} | {method} | {lr:g} | {loss:.4f} | {loss / best['guess'][1]:.3f} "
                  f"| {acc:.1f} | {n:g} |")


if __name__ == "__main__":
    main()
