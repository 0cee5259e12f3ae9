"""The default rule's curvature costs, round by round, in one federation of the scorecard.

Runs the default (on its own random streams: the same rounds as the card's) with a copy of its
rule that records, after every round is told, the round's n, the squared norm of its mean
‖ū‖², what the rule had predicted for it (signal plus noise), the persistence's curvature
costs Λ_g and Λ_ξ as the rule uses them (:meth:`eegrad.ProgressThompson.curvature`), and the
prior 1/(2x*) they fall back on; and prints them with the run's training loss::

    python studies/curvature_trace.py cnn-e1 --seeds 19 24

``--unshrunk`` traces the rule before the costs were shrunk towards their prior where the
steps are equal (``unshrunk-curvature`` of ``studies/rule_candidates.py``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from eegrad import ProgressThompson
from eegrad.examples import scorecard

sys.path.insert(0, str(Path(__file__).parent))
import rule_candidates


def recording(cls: type[ProgressThompson], log: list[tuple]) -> type[ProgressThompson]:
    """``cls`` whose model appends each told round's (n, ‖ū‖², predicted, Λ_g, Λ_ξ, prior) to
    ``log``."""

    class RecordingModel(cls.model_type):  # type: ignore[misc, name-defined]
        def note_signal(self, arms: Any, mean_norm2: Any, persistence: Any,
                        owner: str) -> None:  # fmt: skip
            arms = np.asarray(arms)
            told = self.curve.told()
            predicted = self.predicted()[self._rows, arms] + (
                self.signal()[self._rows, arms] if told else np.nan)  # fmt: skip
            super().note_signal(arms, mean_norm2, persistence, owner)
            lam = self.curvature()[0]
            prior = float(self.curvature_prior()[0])  # 0 before any signal
            log.append((int(arms[0]) + 1, float(np.asarray(mean_norm2)[0]), float(predicted[0]),
                        float(lam[0]), float(lam[1]), prior))  # fmt: skip

    class Recording(cls):  # type: ignore[misc, valid-type]
        model_type = RecordingModel

    return Recording


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("setting", choices=sorted(scorecard.SETTINGS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--unshrunk", action="store_true")
    args = p.parse_args()
    logging.getLogger("flwr").setLevel(logging.ERROR)
    cls = rule_candidates.UnshrunkCurvature if args.unshrunk else ProgressThompson
    s = scorecard.SETTINGS[args.setting]
    for seed in args.seeds:
        log: list[tuple] = []
        rule = recording(cls, log)
        make = rule_candidates.per_round(rule)
        rows, _ = scorecard.run_one(args.setting, "trace", seed, rounds=s.rounds,
                                    eval_every=s.eval_every, candidate={"selector": make})  # fmt: skip
        loss = {r["round"]: r["train_loss"] for r in rows}
        print(f"{args.setting}, seed {seed}:")
        print("| round | n | ‖ū‖² | predicted | Λ_g | Λ_ξ | prior 1/(2x*) | training loss |")
        print("|---|---|---|---|---|---|---|---|")
        for t, (n, y, m, lg, lx, prior) in enumerate(log, start=1):
            after = f"{loss[t]:.3f}" if t in loss else ""
            print(f"| {t} | {n} | {y:.3g} | {m:.3g} | {lg:.3g} | {lx:.3g} | {prior:.3g} | "
                  f"{after} |")


if __name__ == "__main__":
    main()
