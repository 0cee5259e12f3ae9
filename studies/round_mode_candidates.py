"""B a round: variants of the default rule's objective, paired with the default, seed by seed.

Each candidate changes one thing of :class:`eegrad.ProgressThompson` as the bench's default
builds it under B a round (``mode="round"``), and runs through
:func:`eegrad.bench.runner.run_one` with ``rule_class``, on the default's random streams, at the
default's best learning rate of ``round_mode_study.py`` (:data:`RATES`). The table gives, per
development federation (the bench's ``digits-softmax-20-round`` and the three of
``round_mode_study.py``; no held-out setting is run), each candidate's mean final training
loss, the geometric mean over seeds of its loss over the default's with a 95 % interval
(the log-ratios' mean ± 1.96 standard errors, so an interval clear of 1 is a paired difference
the seeds show), and the median n of its rounds after the warm-up::

    python studies/round_mode_candidates.py --jobs 2

With ``--calibration`` it runs the default alone and gives, by bands of n, each round's noise
as its own spread measured it over the noise the default's model predicted for that n before
the round (the mean over rounds; 1 where the model is calibrated)::

    python studies/round_mode_candidates.py --calibration

The seeds are the bench's tuning seeds and those after them (1000–1009 by default), never its
reported ones. About 9 minutes on 2 cores at 10 seeds; the studies page's table is of 20
(``--seeds $(seq 1000 1019)``). The studies page gives the table and what it shows.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import round_mode_study

from eegrad import ProgressThompson
from eegrad.selectors import ProgressModel
from eegrad.selectors.model_rule import largest_best

#: The default's best learning rate on each federation (``round_mode_study.py``'s table).
RATES = {"digits-softmax-20-round": 3.0, "mnist1d-mlp-50-round": 1.0,
         "digits-mlp-20-round": 1.0, "mnist5k-softmax-100-round": 1.0}  # fmt: skip


def _weighted(rule: ProgressThompson, noise: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The expected decrease with the curvature's cost weighted per arm: x − w(Λ_g s + Λ_ξ v)."""
    m = rule.model
    curvature = m.curvature()
    free = m.progress(m.signal(), noise, 0.0 * curvature)
    return free - weight * (free - m.progress(m.signal(), noise, curvature))


class RootEverywhere(ProgressThompson):
    """``sqrt``: the run's-end weight 1/√h wherever the rounds left are told, whether or not the
    clients' steps differ between the arms (the default: only where they do)."""

    def curvature_weight(self) -> np.ndarray:
        R = self._shape[0]
        if self._rounds_left is None:
            return np.ones((R, 1))
        return np.full((R, 1), 1.0 / np.sqrt(self._rounds_left))


class KeptWeight(ProgressThompson):
    """``kept``: the curvature's cost weighted by the part of the h rounds' noise that reaches
    the run's end, Σ_j k^{2j} / h with k = :meth:`ProgressModel.kept` (1 until it is fitted)."""

    def curvature_weight(self) -> np.ndarray:
        R = self._shape[0]
        if self._rounds_left is None:
            return np.ones((R, 1))
        h, kept = self._rounds_left, self.model.kept()
        k = np.clip(np.where(np.isfinite(kept), kept, 0.0), 0.0, 0.999)
        reaches = (1.0 - k ** (2 * h)) / ((1.0 - k * k) * h)
        return np.where(np.isfinite(kept), reaches, 1.0)[:, None]


class QuietRatio(ProgressThompson):
    """``snr4``: 1/√h on the cost of the arms whose (drawn) noise is at most 4 times their
    fitted signal, 1 on the others."""

    ratio = 4.0

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        if self._rounds_left is None:
            return super()._objective(noise)
        quiet = noise <= self.ratio * self.model.signal()
        return _weighted(self, noise, np.where(quiet, 1.0 / np.sqrt(self._rounds_left), 1.0))


class SpreadOnlyModel(ProgressModel):
    """A round whose own spread does not measure its noise (one client) tells the curve no
    signal, once a signal has been told: its ‖ū‖² less an extrapolated noise is not one."""

    def takes_signal(self, own: np.ndarray | None) -> bool:
        measured = own is not None and bool(np.all(np.isfinite(own)))
        return super().takes_signal(own) and (measured or not self.curve.told())


class SpreadOnly(ProgressThompson):
    """``spread-only``: the model of :class:`SpreadOnlyModel`."""

    model_type = SpreadOnlyModel


class MeanSquareModel(ProgressModel):
    """Every arm's noise at least its rounds' mean ‖ū‖² (discounted as the noise) less its
    fitted signal: a round's mean square bounds its noise from below, spread or none."""

    def __init__(self, R: int, N: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(R, N, *args, **kwargs)
        self._weight = np.zeros((R, N))  # the rounds of each arm, discounted
        self._sum = np.zeros((R, N))  # their ‖ū‖², discounted

    def note_signal(self, arms: np.ndarray, mean_norm2: Any, persistence: Any,
                    owner: str) -> None:  # fmt: skip
        y = np.broadcast_to(np.asarray(mean_norm2, float), arms.shape)
        self._weight *= self.discount
        self._sum *= self.discount
        if np.all(np.isfinite(y)):
            self._weight[self._rows, arms] += 1.0
            self._sum[self._rows, arms] += y
        super().note_signal(arms, mean_norm2, persistence, owner)

    def _floor(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(self._weight > 0, self._sum / self._weight, 0.0)
        return np.maximum(mean - self.signal(), 0.0)

    def predicted(self) -> np.ndarray:
        return np.maximum(super().predicted(), self._floor())

    def drawn(self, theta: np.ndarray, cov: np.ndarray, z: np.ndarray) -> np.ndarray:
        return np.maximum(super().drawn(theta, cov, z), self._floor())


class MeanSquare(ProgressThompson):
    """``mean-square``: the model of :class:`MeanSquareModel`."""

    model_type = MeanSquareModel


class RobustModel(ProgressModel):
    """A round's signal weighted by the larger of its predicted and its observed ‖ū‖²: a round
    far above the prediction (a few clients' drift read as signal) counts as one of its size."""

    def signal_weight(self, predicted: np.ndarray, y: np.ndarray) -> np.ndarray:
        return super().signal_weight(np.maximum(predicted, y), y)


class Robust(ProgressThompson):
    """``robust``: the model of :class:`RobustModel`."""

    model_type = RobustModel


class RobustRoot(RootEverywhere):
    """``robust-sqrt``: :class:`RobustModel` with the run's-end weight everywhere."""

    model_type = RobustModel


class SteepNoiseModel(ProgressModel):
    """The noise scaled by the arm's gain² to the power :attr:`power` (the default's model: 1,
    the noise grows with the share as the signal does): a few clients' drift grows faster with
    their local work than their mean's signal."""

    power = 1.5

    def scale(self) -> np.ndarray | float:
        gain2 = super().scale()
        return gain2**self.power if isinstance(gain2, np.ndarray) else gain2


class SteeperNoiseModel(SteepNoiseModel):
    power = 2.0


class SteepNoise(ProgressThompson):
    """``steep-noise``: the model of :class:`SteepNoiseModel` (power 1.5)."""

    model_type = SteepNoiseModel


class SteeperNoise(ProgressThompson):
    """``steeper-noise``: power 2."""

    model_type = SteeperNoiseModel


class StepDown(ProgressThompson):
    """``step``: after the warm-up, n falls by at most half a round (the model is trusted one
    octave below the n it last measured)."""

    factor = 2.0

    def init(self, R, N, d, truth=None, streams=None) -> None:
        super().init(R, N, d, truth, streams)
        self._last_n: np.ndarray | None = None  # the n of the last choice (None: none yet)

    def _choose(self) -> np.ndarray:
        value = self._objective(self._sampled_noise())
        last = self._last_n
        if last is not None:
            n = np.arange(1, value.shape[1] + 1)
            value = np.where(n[None, :] >= np.ceil(last / self.factor)[:, None], value, -np.inf)
        arms = largest_best(value)
        self._last_n = arms + 1.0
        return arms


#: The candidates, by name.
CANDIDATES: dict[str, type[ProgressThompson] | None] = {
    "default": None, "sqrt": RootEverywhere, "kept": KeptWeight, "snr4": QuietRatio,
    "spread-only": SpreadOnly, "mean-square": MeanSquare, "step": StepDown, "robust": Robust,
    "robust-sqrt": RobustRoot, "steep-noise": SteepNoise, "steeper-noise": SteeperNoise,
}  # fmt: skip


def one(setting: str, candidate: str, seed: int) -> tuple[float, list[int]]:
    """One run: its final training loss and the n of every round."""
    from eegrad.bench.runner import run_one

    round_mode_study._register()
    rows, arms = run_one(setting, "default", seed, RATES[setting],
                         rule_class=CANDIDATES[candidate])  # fmt: skip
    return float(rows[-1]["train_loss"]), [int(a["n"]) for a in arms]


#: The bands of n of the calibration's table.
BANDS = ((2, 2), (3, 4), (5, 7), (8, 14), (15, 30), (31, 60), (61, 100))


def calibration(setting: str, seed: int) -> list[tuple[int, float, float]]:
    """One run of the default: for every round whose spread measured its noise (after the
    model's first fit), its n, that noise and the noise the model predicted for the arm."""
    from eegrad.bench.runner import run_one

    seen: list[tuple[int, float, float]] = []

    class Logged(ProgressModel):
        def round_noise(self, arms: np.ndarray, predicted: np.ndarray,
                        own: np.ndarray | None) -> np.ndarray:  # fmt: skip
            if own is not None and np.isfinite(own[0]):
                seen.append((int(arms[0]) + 1, float(own[0]), float(predicted[0])))
            return super().round_noise(arms, predicted, own)

    round_mode_study._register()
    run_one(setting, "default", seed, RATES[setting],
            rule_class=type("Calibrated", (ProgressThompson,), {"model_type": Logged}))  # fmt: skip
    return seen


def print_calibration(settings: list[str], seeds: list[int], jobs: int) -> None:
    """The default's noise against the rounds' own (``--calibration``)."""
    todo = [(s, seed) for s in settings for seed in seeds]
    with ProcessPoolExecutor(jobs, initializer=round_mode_study._register) as ex:
        runs = list(ex.map(calibration, *zip(*todo, strict=True)))
    print(
        f"The default's runs, seeds {seeds[0]}–{seeds[-1]}: every round whose spread measured "
        "its noise (after the model's first fit), its noise over the noise the model "
        "predicted for its n before it (the mean ± its standard error; 1: calibrated).\n"
    )
    print("| setting | n | rounds | own noise / predicted |")
    print("|---|---|---|---|")
    for s in settings:
        rows = [r for (name, _), run in zip(todo, runs, strict=True) if name == s for r in run]
        for lo, hi in BANDS:
            ratio = [own / pred for n, own, pred in rows if lo <= n <= hi and pred > 0]
            if len(ratio) > 1:
                se = np.std(ratio, ddof=1) / np.sqrt(len(ratio))
                print(f"| {s} | {lo}–{hi} | {len(ratio)} | {np.mean(ratio):.2f} ± {se:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--candidates", nargs="+", default=[c for c in CANDIDATES if c != "default"],
                   choices=[c for c in CANDIDATES if c != "default"])  # fmt: skip
    p.add_argument("--settings", nargs="+", default=list(RATES), choices=list(RATES))
    p.add_argument("--seeds", nargs="+", type=int, default=list(range(1000, 1010)))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--calibration", action="store_true",
                   help="the default's fitted noise against the rounds' own, by n")  # fmt: skip
    a = p.parse_args()
    if any(0 <= s < 1000 for s in a.seeds):
        p.error("--seeds: the bench reports seeds 0 to 999; a study uses others")
    if a.calibration:
        print_calibration(a.settings, a.seeds, a.jobs)
        return
    names = ["default", *a.candidates]
    todo = [(s, c, seed) for s in a.settings for c in names for seed in a.seeds]
    with ProcessPoolExecutor(a.jobs, initializer=round_mode_study._register) as ex:
        out = dict(zip(todo, ex.map(one, *zip(*todo, strict=True)), strict=True))
    print(
        f"Final training loss, seeds {a.seeds[0]}–{a.seeds[-1]}, at the default's rate; "
        "over the default's: the geometric mean over seeds (95 %); the median n after the "
        "warm-up.\n"
    )
    print("| setting | candidate | loss | × default (95 %) | median n |")
    print("|---|---|---|---|---|")
    for s in a.settings:
        base = np.array([out[(s, "default", seed)][0] for seed in a.seeds])
        for c in names:
            loss = np.array([out[(s, c, seed)][0] for seed in a.seeds])
            r = np.log(loss / base)
            half = 1.96 * r.std(ddof=1) / np.sqrt(r.size)
            n = np.median([x for seed in a.seeds for x in out[(s, c, seed)][1][4:]])
            print(
                f"| {s} | {c} | {loss.mean():.4f} | {np.exp(r.mean()):.3f} "
                f"({np.exp(r.mean() - half):.3f}–{np.exp(r.mean() + half):.3f}) | {n:g} |"
            )


if __name__ == "__main__":
    main()
