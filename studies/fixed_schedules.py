"""Fixed schedules of n on the scorecard of federations: whether a run gains by switching n.

A schedule is written ``N1xK1,N2xK2,...,NL``: N1 clients for K1 rounds, then N2 for K2, ...,
and the last n to the end. Each runs as a candidate beside the default (no warm-up, no rule:
FedAvg's step at the scheduled n), on the card's seeds, and is compared, paired by seed, with
the best fixed n and with the default::

    python studies/fixed_schedules.py --seeds 60 --out DIR --setting cnn-e3 6x20,15 6x28,15
    python studies/fixed_schedules.py --seeds 30 --out DIR --setting mlp-minibatch \\
        2x20,6 2x28,6

The studies page (``docs/guide/federated-studies.md``) reports what they measured: switching,
late in a run, from the best fixed n to the n that a round's measured decrease favours there.
Runs are saved under ``DIR/runs`` as the card saves them, so a store copied from a card's
``--out`` runs only the schedules.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from eegrad._validation import fail
from eegrad.examples import scorecard
from eegrad.examples.scorecard import FixedSchedule


def parse_schedule(spec: str) -> list[int]:
    """``"6x20,15"`` → twenty 6s, then 15."""
    out: list[int] = []
    for part in spec.split(","):
        n, _, k = part.partition("x")
        if not n.isdigit() or (k and not k.isdigit()):
            raise fail("schedule", "fixed_schedules", "parts N or NxK of positive integers",
                       spec)  # fmt: skip
        out += [int(n)] * (int(k) if k else 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("schedules", nargs="+", help="N1xK1,...,NL")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--setting", required=True, choices=sorted(scorecard.SETTINGS))
    args = p.parse_args()
    candidates = {f"schedule-{s}": {"selector": (lambda fed, s=s: FixedSchedule(parse_schedule(s)))}
                  for s in args.schedules}  # fmt: skip
    rows, _ = scorecard.run([args.setting], list(range(args.seeds)), jobs=args.jobs,
                            store=args.out / "runs", candidates=candidates)  # fmt: skip
    mine = [r for r in rows if r["setting"] == args.setting]
    print("| reading | method | / best | − best (% of best) | − default (% of best) |")
    print("|---|---|---|---|---|")
    for final in ("window", "model"):
        base = scorecard.summarise(mine, "default", final=final)
        finals = scorecard.final_losses(mine, final)
        best = finals[base["best"]]
        print(f"| {final} | default | {base['over_best']:.3f} | | |")
        for name in candidates:
            s = scorecard.summarise(mine, name, final=final)
            d, se = scorecard.mean_and_se([(finals[name][k] - best[k]) / base["best_loss"]
                                           for k in best])  # fmt: skip
            v, vse = s["versus_default"]
            print(f"| {final} | {name} | {s['over_best']:.3f} | {100 * d:+.1f} % ± "
                  f"{100 * se:.1f} % | {100 * v:+.1f} % ± {100 * vse:.1f} % |")


if __name__ == "__main__":
    main()
