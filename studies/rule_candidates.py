"""Variants of the default rule, run beside it on the scorecard of federations.

Each candidate changes one thing of :class:`eegrad.ProgressThompson` as the default builds it,
and runs on the default's random streams (the clients sampled, their batches, the rule's draws),
so that its paired difference to the default measures the rule and not the streams. The
studies page (``docs/guide/federated-studies.md``) reports what they measured::

    python studies/rule_candidates.py --seeds 30 --out DIR \\
        --candidates mean-noise no-one mean-for-one wide warm-20-6 nnls signal-spread scalar-rate \\
        --settings fedsgd local-steps overheads cnn-e1 cnn-e3 mlp-minibatch minibatch-drift
    python studies/rule_candidates.py --seeds 30 --out DIR \\
        --candidates flat-steps fitted-steps --settings fedsgd overheads cnn-e1 cnn-e3
    python studies/rule_candidates.py --seeds 30 --out DIR --candidates end-model \\
        --settings quickstart fixed-cost wall-clock long-budget
    python studies/rule_candidates.py --seeds 60 --out DIR --candidates unshrunk-curvature \
        zero-curvature-prior --settings cnn-e1 cnn-e3
    python studies/rule_candidates.py --seeds 60 --out DIR --candidates several-steps-horizon \
        --settings cnn-e3
    python studies/rule_candidates.py --seeds 30 --out DIR --without-fixed \
        --candidates shrunk-curvature --settings local-steps mlp-minibatch minibatch-drift
    python studies/mnist_candidates.py one-step --split shards --seeds 10

``--without-fixed`` runs the default and the candidates alone, no fixed n, and prints each
candidate's paired difference in % of the default's loss (a screen, without the yardstick).

The ``one-step`` family (the curve flat where the clients take one local step) is measured in
the MNIST study of ``eegrad example flower`` by ``studies/mnist_candidates.py``.

Runs are saved under ``DIR/runs`` as the card saves them (a rerun takes them again), so a
store copied from a card's ``--out`` runs only the candidates.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from eegrad import BudgetThompson, ProgressThompson
from eegrad.examples import scorecard
from eegrad.selectors.progress import nonnegative_minimum
from eegrad.selectors.progress_model import ProgressModel
from eegrad.selectors.signal_curve import SignalCurve


def project_nonnegative(theta: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """argmin over x >= 0 of (x − θ)ᵀA(x − θ), per row: θ shape (R, k), A shape (R, k, k),
    i.e. :func:`~eegrad.selectors.progress.nonnegative_minimum` of A and Aθ (θ itself where it
    is non-negative)."""
    out = theta.copy()
    for r in np.flatnonzero(np.any(theta < 0, axis=1)):
        x = nonnegative_minimum(normal[r], normal[r] @ theta[r])
        out[r] = np.zeros(theta.shape[1]) if x is None else x
    return out


class MeanNoise(ProgressThompson):
    """``mean-noise``: after the warm-up, the fitted noise rather than a posterior draw."""

    def _sampled_noise(self) -> np.ndarray:
        return self.predicted()


def without_one(d: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The objective ``d``, shape (R, N), with n = 1 ruled out in ``rows``, shape (R,)."""
    if not rows.any() or d.shape[1] == 1:
        return d
    d = d.copy()
    d[rows, 0] = -np.inf
    return d


def fitted_for_one(rule: ProgressThompson, v: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Drawn noises ``v``, shape (R, N), with n = 1's the fitted one in ``rows``."""
    if not rows.any():
        return v
    v = v.copy()
    v[rows, 0] = rule.predicted()[rows, 0]
    return v


class NoOne(ProgressThompson):
    """``no-one``: after the warm-up, never a round of one client."""

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        d = super()._objective(noise)
        return without_one(d, np.ones(d.shape[0], dtype=bool))


class MeanForOne(ProgressThompson):
    """``mean-for-one``: n = 1, whose round shows no spread to correct a draw, on the fitted
    noise; every other n on the draw."""

    def _sampled_noise(self) -> np.ndarray:
        v = super()._sampled_noise()
        return fitted_for_one(self, v, np.ones(v.shape[0], dtype=bool))


class WideModel(ProgressModel):
    """The noise's posterior of twice the standard deviation."""

    def fit(self) -> tuple[np.ndarray, np.ndarray]:
        theta, cov = super().fit()
        return theta, 4.0 * cov


class Wide(ProgressThompson):
    """``wide``: draws from a posterior of twice the standard deviation."""

    model_type = WideModel


class WarmWithoutTwo(ProgressThompson):
    """``warm-20-6``: the warm-up without its round of two clients."""

    def _default_warmup(self, N: int) -> list[int]:
        return [w for w in super()._default_warmup(N) if w != 1]


class TwoStatistics(ProgressThompson):
    """``two-statistics``: each round's weighted spread beside its pair sum in the noise's fit
    (two designs from one round, where the clients' samples differ)."""

    reads = frozenset({"spread", "weighted_spread"})


class TwoStatisticsWithoutTwo(TwoStatistics, WarmWithoutTwo):
    """``two-statistics-warm-n-6``: ``two-statistics``, the warm-up without its round of two."""


class TwoStatisticsWithoutSix(TwoStatistics):
    """``two-statistics-warm-n-2``: ``two-statistics``, the warm-up without its round of
    √(2N)."""

    def _default_warmup(self, N: int) -> list[int]:
        return super()._default_warmup(N)[:2]


class WarmAscending(ProgressThompson):
    """``warm-ascending``: the warm-up's arms from the fewest clients up (2, √(2N), N), where
    the default asks N, 2, √(2N): the rounds of few clients come while the model is at its
    start."""

    def _default_warmup(self, N: int) -> list[int]:
        return sorted(super()._default_warmup(N))


class WarmDescending(ProgressThompson):
    """``warm-descending``: the warm-up's arms from the most clients down (N, √(2N), 2)."""

    def _default_warmup(self, N: int) -> list[int]:
        return sorted(super()._default_warmup(N), reverse=True)


class NonNegativeModel(ProgressModel):
    """The noise's parameters projected onto θ >= 0 in the fit's own metric."""

    def admissible(self, theta: np.ndarray) -> np.ndarray:
        return project_nonnegative(theta, self.normal_matrix())


class NonNegativeFit(ProgressThompson):
    """``nnls``: the noise's parameters (and each draw of them) projected onto θ >= 0 in the
    fit's own metric, where the default sets each negative component to 0."""

    model_type = NonNegativeModel


class SignalFromSpreadModel(ProgressModel):
    """The signal's fit told only by rounds of n >= 2 (``signal-spread``)."""

    _ARMS = ("arm_q", "arm_s", "arm_rounds")
    _SHAPE = ("_shape_q", "_shape_s", "_shape_ss", "_shape_rounds")

    def note_signal(self, arms: Any, mean_norm2: Any, persistence: Any, owner: str) -> None:
        one = np.asarray(arms) == 0
        if not np.any(one):
            return super().note_signal(arms, mean_norm2, persistence, owner)
        curve = self.curve
        saved = {k: getattr(curve, k).copy() for k in self._ARMS + self._SHAPE}
        super().note_signal(arms, mean_norm2, persistence, owner)
        for k in self._ARMS:  # the round's evidence taken back, its age kept
            getattr(curve, k)[one] = (saved[k] * self.discount)[one]
        for k in self._SHAPE:
            getattr(curve, k)[one] = (saved[k] * self.shape_discount)[one]
        curve.fit()


class SignalFromSpread(ProgressThompson):
    """``signal-spread``: the signal's fit told only by rounds whose spread measured their own
    noise (n >= 2); a round of one client has none, and its ‖ū‖² less the predicted noise is
    as wrong as that prediction."""

    model_type = SignalFromSpreadModel


class ScalarRate(ProgressThompson):
    """``scalar-rate``: the total-budget rate's quadratic in the per-round mode, each arm
    contracting by its own gain, :math:`1 - \\sqrt{\\rho_n} = (1 - \\sqrt{\\hat\\rho})\\,x_n/x_t`
    (:math:`x_t` the last round's arm's update length): the largest
    :math:`1 - \\rho_n - (1 - \\sqrt{\\rho_n})^2 v_n/s_n`, the default's objective until
    the contraction is known."""

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        base = super()._objective(noise)
        if self.model._last is None:  # no round told since the chain of rounds broke
            return base
        rho, s = self.model.contraction(), self.model.signal()
        x = np.sqrt(np.maximum(s, 0.0))
        x_last = self.model._last[0][:, None]  # the last round's arm's update length, as fitted
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.clip((1.0 - np.sqrt(rho))[:, None] * x / x_last, 0.0, 1.0)
            rate = 1.0 - (1.0 - step) ** 2 - step**2 * noise / s
        ok = np.isfinite(rho) & np.all(np.isfinite(rate), axis=1) & (x_last[:, 0] > 0)
        return np.where(ok[:, None], rate, base)


class Horizon(BudgetThompson):
    r"""``horizon`` (a total budget; the default rule's objective before the rate): the excess
    loss left when the budget left is spent on rounds of n alone, on the rate's quadratic,
    :math:`H_n = B_{left}/c_n` rounds: the least
    :math:`\rho^{H_n} + (1-\sqrt\rho)^2 (v_n/s)(1-\rho^{H_n})/(1-\rho)`. Not the best
    policy of its own model: with much budget left every n reaches its floor by the end, and
    it asks the least noise long before the noise matters."""

    def horizon_loss(self, noise: np.ndarray) -> np.ndarray:
        """The excess loss left, relative to today's, shape (R, N) (NaN where unknown)."""
        rho, injected = self._quadratic_round(noise)
        H = self._ahead.budget_left / self._ahead.costs[None, :]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            decay = rho**H
            floor = injected * (1.0 - decay) / (1.0 - rho)
        return decay + floor

    def rate_of_decrease(self, noise: np.ndarray) -> np.ndarray:
        return -self.horizon_loss(noise)


class EndInModel(BudgetThompson):
    """``end-model`` (a total budget; one realization, as a strategy's rule): the last round
    chosen in the rate's own scalar model. Where a round could end the run, compare ending it
    now on the most clients affordable with k more rounds of the rate's arm and then the most
    clients the budget left affords, by the excess loss each leaves,
    :math:`\\rho E_k + q_L` with :math:`E_k = \\rho^k + q_r(1-\\rho^k)/(1-\\rho)` (relative
    to today's excess); where continuing leaves less, no round ends the run yet."""

    def last_round_arm(self) -> int | None:
        last = super().last_round_arm()
        if last is None or not self.model.curve.told():
            return last
        noise = self.predicted()
        rho, injected = self._quadratic_round(noise)
        p, q = float(rho[0, 0]), injected[0]
        if not (np.isfinite(p) and p < 1 and np.all(np.isfinite(q))):
            return last
        rate = self._objective(noise)[0]
        arm = rate.size - 1 - int(np.argmax(rate[::-1]))  # the rule's choice: ties to largest n
        c, budget = self._ahead.costs, float(self._ahead.budget_left)
        best, best_k = np.inf, 0
        for k in range(int(budget // c[arm]) + 1):
            affordable = np.flatnonzero(c <= budget - k * c[arm])
            if affordable.size == 0:
                break
            left = p**k + q[arm] * (1 - p**k) / (1 - p)
            final = p * left + q[affordable.max()]
            if final < best:
                best, best_k = final, k
        return last if best_k == 0 else None


def one_step(model: ProgressModel) -> np.ndarray:
    """Whether the model's clients report exactly one local step at every arm told, shape
    (R,) (False in rows told no steps): their steps as the curve reads them
    (:meth:`~eegrad.selectors.progress_model.ProgressModel.arm_steps`, never below one) are
    then 1 at every arm."""
    with np.errstate(invalid="ignore"):
        return model.steps_told() & np.all(np.abs(np.log(model.arm_steps())) <= 1e-9, axis=1)


class FlatCurve(ProgressModel):
    """A model whose signal curve is flat, by a model, in the rows :meth:`flat_rows` names:
    its slope 0 (the shape's fit too, so that later fits start from it) and its level
    refitted on the flat shape."""

    def flat_rows(self) -> np.ndarray:
        raise NotImplementedError

    def unshrunk_rows(self) -> np.ndarray:
        """The rows whose curve is its fit as it is, not shrunk towards its prior (none)."""
        return np.zeros(self.R, bool)

    def _new_signal_curve(self) -> SignalCurve:
        return _FlatSignal(self, self.spend, self.R, self.signal_degree, self.discount,
                           self.shape_discount)  # fmt: skip


class _FlatSignal(SignalCurve):
    """The signal's curve of a :class:`FlatCurve` model: after each fit, flat in the rows the
    model's ``flat_rows`` names, and unshrunk in those its ``unshrunk_rows`` names."""

    def __init__(self, model: FlatCurve, *args: Any) -> None:
        super().__init__(*args)
        self.model = model

    def fit(self) -> None:
        super().fit()
        rows = self.model.flat_rows()
        if not rows.any() or self.shape_beta.shape[1] == 1:
            return
        self.shape_beta[rows, 1:] = 0.0  # the shape flat, its level refitted on it
        self.fit_level(np.exp(np.clip(self.linear(self.shape_beta, 1), -700, 700)))

    def shrunk(self) -> np.ndarray:
        curve = super().shrunk()
        rows = self.model.unshrunk_rows()
        if rows.any():
            curve = curve.copy()
            curve[rows] = self.beta[rows]
        return curve


class FlatWhereStepsEqualModel(FlatCurve):
    """The signal curve flat where every arm takes the same local steps."""

    def flat_rows(self) -> np.ndarray:
        return self.steps_equal()


class FlatWhereStepsEqual(ProgressThompson):
    """``flat-steps``: where the clients report their local steps and every arm takes the
    same (:meth:`~eegrad.selectors.progress_model.ProgressModel.steps_differ` False), the
    signal curve is flat: a round's expected update is then the mean gradient over the round's
    samples, the same for every n, and a fitted slope is chance."""

    model_type = FlatWhereStepsEqualModel


class OneStepFlatModel(FlatCurve):
    """The signal curve flat where the clients take one local step."""

    def flat_rows(self) -> np.ndarray:
        return one_step(self)


class OneStepFlat(ProgressThompson):
    """``one-step``: where the clients report one local step at every arm (FedSGD, one
    full-batch epoch), the signal's curve flat by the paper's model (its slope 0, its level
    fitted): a round's expected update is then the same at every n."""

    model_type = OneStepFlatModel


class OneStepNoOne(OneStepFlat):
    """``one-step-no-one``: ``one-step``, and where the clients take one step never a round of
    one client after the warm-up: its noise is only ever extrapolated from the other arms'
    fit, which its round cannot correct."""

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        return without_one(super()._objective(noise), one_step(self.model))


class OneStepMeanForOne(OneStepFlat):
    """``one-step-mean-for-one``: ``one-step``, and where the clients take one step n = 1 on
    the fitted noise, every other n on the draw."""

    def _sampled_noise(self) -> np.ndarray:
        return fitted_for_one(self, super()._sampled_noise(), one_step(self.model))


class NoOneWhereStepsEqual(ProgressThompson):
    """``no-one-equal-steps``: where the clients report their local steps and every arm takes
    the same (:meth:`~eegrad.ProgressThompson.steps_differ` False), never a round of one
    client after the warm-up: there the arms' signals are the same by the model, and n = 1 can
    only win on its noise, which no round of its own measures, or on the curve's chance slope."""

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        return without_one(super()._objective(noise), self.model.steps_equal())


class KappaHeldModel(ProgressModel):
    """κ² held at 0 where the clients report one local step at every arm."""

    def free_parameters(self) -> np.ndarray:
        free = super().free_parameters()
        if free.shape[1] > 2:
            free[one_step(self), 2] = False
        return free


class KappaHeldWhereOneStep(ProgressThompson):
    """``kappa0``: where the clients report one local step at every arm (FedSGD, one
    full-batch epoch), the noise's second-order parameter κ² (the noise of several steps on the
    same samples) held at 0 and (S², τ²) fitted alone, as the noise model has it for one step;
    the signal curve as the default's."""

    model_type = KappaHeldModel


class OneStepNoKappaModel(KappaHeldModel, OneStepFlatModel):
    """κ² held at 0 and the signal curve flat where the clients take one local step."""


class OneStepNoKappa(ProgressThompson):
    """``one-step-kappa0``: ``one-step``, and κ² held at 0 where the clients take one step."""

    model_type = OneStepNoKappaModel


class OneStepNoKappaNoOne(OneStepNoKappa):
    """``one-step-kappa0-no-one``: ``one-step-kappa0``, and where the clients take one step
    never a round of one client after the warm-up (as ``one-step-no-one``)."""

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        return without_one(super()._objective(noise), one_step(self.model))


class FittedWhereStepsEqualModel(OneStepFlatModel):
    """``one-step``'s curve, and its fitted slope unshrunk where the steps are the same
    several at every arm."""

    def unshrunk_rows(self) -> np.ndarray:
        return self.steps_equal() & ~one_step(self)


class FittedWhereStepsEqual(ProgressThompson):
    """``fitted-steps``: ``one-step``, and where the clients report the same several local
    steps at every arm (a flat steps prior, not one step), the signal curve's fitted slope
    unshrunk: there a client's drift towards its own data depends on its samples."""

    model_type = FittedWhereStepsEqualModel


class UnshrunkModel(ProgressModel):
    """The persistence's fit of the curvature as it is, everywhere."""

    def shrinks_curvature(self) -> np.ndarray:
        return np.zeros(self.R, bool)


class UnshrunkCurvature(ProgressThompson):
    """``unshrunk-curvature``: the default before the curvature's costs were shrunk towards
    their prior where the steps are equal: the persistence's fit as it is, everywhere."""

    model_type = UnshrunkModel


class StiffOvershoot(ProgressThompson):
    """``stiff-overshoot``: where the steps differ and the rounds left h are told, the signal's
    overshoot charged 1/h (it is made along the stiff directions, which the later rounds
    forget within a round: only the last round's reaches the end) and the noise 1/√h as the
    default charges both (the module's notes, *The run's end*)."""

    def curvature_weight(self) -> np.ndarray:
        w = super().curvature_weight()  # (R, 1): 1/√h where the steps differ, else 1
        return np.concatenate([w * w, w], axis=1)  # (Λ_g's, Λ_ξ's): 1/h and 1/√h


class ShrunkModel(ProgressModel):
    """The curvature's costs shrunk wherever the clients report their steps."""

    def shrinks_curvature(self) -> np.ndarray:
        return self.steps_told()


class ShrunkCurvature(ProgressThompson):
    """``shrunk-curvature``: the curvature's costs shrunk towards their prior by their evidence
    wherever the clients report their steps, where they differ between the arms too."""

    model_type = ShrunkModel


class ZeroCurvaturePriorModel(UnshrunkModel):
    """The unshrunk curvature, and the prior's cost where the fit puts both at 0 and the
    steps are equal."""

    def curvature(self) -> np.ndarray:
        out = super().curvature()
        rows = self.steps_equal() & np.all(out <= 0, axis=1)
        out[rows] = self.curvature_prior()[rows, None]
        return out


class ZeroCurvaturePrior(ProgressThompson):
    """``zero-curvature-prior``: ``unshrunk-curvature``, and where the clients report the same
    local steps at every arm and the persistence's fit puts both curvature costs at 0, the
    prior's cost 1/(2x*) for both (a zero cost there leaves the choice to the signal curve's
    chance slope, noise free)."""

    model_type = ZeroCurvaturePriorModel


class HorizonWhereSeveralSteps(ProgressThompson):
    """``several-steps-horizon``: the curvature's cost over √h (the rounds left) also where
    every arm takes the same several local steps (several full-batch epochs), not only where the
    steps differ; one local step (FedSGD) keeps the whole charge."""

    def curvature_weight(self) -> np.ndarray:
        w = super().curvature_weight()
        if self._rounds_left is None:
            return w
        steps = np.nan_to_num(self.model.arm_steps(), nan=0.0)  # NaN: a row told no steps
        several = self.model.steps_equal() & np.all(steps >= 2.0, axis=1)
        return np.where(several[:, None], 1.0 / np.sqrt(self._rounds_left), w)


def per_round(cls: type[ProgressThompson]) -> Callable[[Any], ProgressThompson]:
    """The candidate as the per-round default is built: K, the arms' per-client spends."""
    return lambda fed: cls(population=fed.K, noise_order=2,
                           spend=np.array([fed.share(n) for n in range(1, fed.N + 1)]))


#: The per-round candidates by name: each a class built as the per-round default is.
PER_ROUND: dict[str, type[ProgressThompson]] = {
    "mean-noise": MeanNoise,
    "no-one": NoOne,
    "mean-for-one": MeanForOne,
    "wide": Wide,
    "warm-20-6": WarmWithoutTwo,
    "warm-ascending": WarmAscending,
    "warm-descending": WarmDescending,
    "nnls": NonNegativeFit,
    "signal-spread": SignalFromSpread,
    "scalar-rate": ScalarRate,
    "flat-steps": FlatWhereStepsEqual,
    "one-step": OneStepFlat,
    "one-step-no-one": OneStepNoOne,
    "one-step-mean-for-one": OneStepMeanForOne,
    "one-step-kappa0": OneStepNoKappa,
    "kappa0": KappaHeldWhereOneStep,
    "no-one-equal-steps": NoOneWhereStepsEqual,
    "one-step-kappa0-no-one": OneStepNoKappaNoOne,
    "fitted-steps": FittedWhereStepsEqual,
    "unshrunk-curvature": UnshrunkCurvature,
    "shrunk-curvature": ShrunkCurvature,
    "stiff-overshoot": StiffOvershoot,
    "zero-curvature-prior": ZeroCurvaturePrior,
    "two-statistics": TwoStatistics,
    "two-statistics-warm-n-6": TwoStatisticsWithoutTwo,
    "two-statistics-warm-n-2": TwoStatisticsWithoutSix,
    "several-steps-horizon": HorizonWhereSeveralSteps,
}

CANDIDATES: dict[str, Callable[[Any], ProgressThompson]] = {
    **{name: per_round(cls) for name, cls in PER_ROUND.items()},
    "end-model": lambda fed: EndInModel(population=fed.K, spend=np.ones(fed.N), noise_order=2),
    "horizon": lambda fed: Horizon(population=fed.K, spend=np.ones(fed.N), noise_order=2),
}


def print_paired(rows: list[dict[str, Any]], settings: list[str], names: list[str]) -> None:
    """Each candidate less the default, seed by seed, in % of the default's mean final loss
    (the card's window and the final model), where no fixed n was run."""
    print("| setting | reading | candidate | − default, % of the default's loss |")
    print("|---|---|---|---|")
    for final in ("window", "model"):
        for setting in settings:
            finals = scorecard.final_losses([r for r in rows if r["setting"] == setting], final)
            base = finals["default"]
            scale = float(np.mean(list(base.values())))
            for name in names:
                d, se = scorecard.mean_and_se([(finals[name][s] - base[s]) / scale
                                               for s in base])  # fmt: skip
                print(f"| {setting} | {final} | {name} | {100 * d:+.1f} % ± {100 * se:.1f} % |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--candidates", nargs="+", choices=sorted(CANDIDATES), required=True)
    p.add_argument("--settings", nargs="+", required=True)
    p.add_argument("--without-fixed", action="store_true",
                   help="run no fixed n: the paired difference in %% of the default's loss")
    args = p.parse_args()
    candidates = {name: {"selector": CANDIDATES[name]} for name in args.candidates}
    rows, _ = scorecard.run(args.settings, list(range(args.seeds)), jobs=args.jobs,
                            store=args.out / "runs", candidates=candidates,
                            fixed=not args.without_fixed)  # fmt: skip
    if args.without_fixed:
        print_paired(rows, args.settings, list(candidates))
        return
    print("| setting | reading | default / best | candidate | / best | − default |")
    print("|---|---|---|---|---|---|")
    for final in ("window", "model"):
        for setting in args.settings:
            mine = [r for r in rows if r["setting"] == setting]
            base = scorecard.summarise(mine, "default", final=final)
            for name in candidates:
                s = scorecard.summarise(mine, name, final=final)
                d, se = s["versus_default"]
                print(f"| {setting} | {final} | {base['over_best']:.3f} | {name} | "
                      f"{s['over_best']:.3f} | {100 * d:+.1f} % ± {100 * se:.1f} % |")


if __name__ == "__main__":
    main()
