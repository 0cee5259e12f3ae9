"""B a round, round by round: what the default rule's model sees when it chooses each n.

A trace of one run of the bench's default (``mode="round"``; :mod:`round_mode_study`'s
development federations, or the bench's ``digits-softmax-20-round``), for the first
realization at every ``--every``-th choice after the warm-up: the n asked, the curvature's
costs (Λ_g, Λ_ξ), the weight of their charge (1/√h where it applies), whether the clients'
local steps were told, and at a few n the fitted signal s_n, the fitted noise v_n and the
objective D_n. Then the run's final training loss and accuracy, and every n asked::

    python studies/round_mode_trace.py mnist1d-mlp-50-round --seed 1000 --lr 1

The seeds are the bench's tuning seeds (or others), never its reported ones.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import round_mode_study

from eegrad import ProgressThompson


def tracing(log: list[tuple[Any, ...]]) -> type[ProgressThompson]:
    """The default rule, appending each choice after the warm-up and its model's view to
    ``log``."""

    class Tracing(ProgressThompson):
        def _choose(self) -> np.ndarray:
            arms = super()._choose()
            m = self.model
            log.append((int(arms[0]) + 1, m.signal()[0], m.predicted()[0], m.curvature()[0],
                        float(self.curvature_weight()[0, 0]), self.predicted_progress()[0],
                        bool(m.steps_told()[0])))  # fmt: skip
            return arms

    return Tracing


def main() -> None:
    from eegrad.bench import runner

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("setting")
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--at", type=int, nargs="+", default=[1, 2, 4, 7, 14, 26, 32, 50],
                   help="the n shown")
    a = p.parse_args()
    round_mode_study._register()
    log: list[tuple[Any, ...]] = []
    rows, _ = runner.run_one(a.setting, "default", a.seed, a.lr, rule_class=tracing(log))
    print(f"{a.setting}, seed {a.seed}, rate {a.lr:g}: final training loss "
          f"{rows[-1]['train_loss']:.4f}, accuracy {100 * rows[-1]['test_accuracy']:.1f} %\n")
    N = len(log[0][1]) if log else 0
    shown = [n for n in a.at if n <= N]
    print("| choice | n asked | Λ_g | Λ_ξ | weight | steps told | "
          + " | ".join(f"s, v, D at n = {n}" for n in shown) + " |")
    print("|---" * (6 + len(shown)) + "|")
    for i, (n, s, v, lam, w, d, told) in enumerate(log):
        if i % a.every and i != len(log) - 1:
            continue
        cells = " | ".join(f"{s[k - 1]:.3g}, {v[k - 1]:.3g}, {d[k - 1]:.3g}" for k in shown)
        print(f"| {i + 1} | {n} | {lam[0]:.3g} | {lam[1]:.3g} | {w:.3g} | {told} | {cells} |")
    print("\nn asked after the warm-up:", " ".join(str(x[0]) for x in log))


if __name__ == "__main__":
    main()
