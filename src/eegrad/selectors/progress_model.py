r"""The progress of a round as a model a rule holds: the noise of every n, its signal, the
curvature's cost of a step, the signal level's contraction and what of a round the next keeps.

:class:`ProgressModel` is the model of :mod:`eegrad.selectors.progress` (its notes derive it):
a :class:`~eegrad.selectors.noise_model.NoiseModel` whose arms also differ in the length of
their expected update, :math:`s_n = x_n^2` (the signal's curve,
:class:`~eegrad.selectors.signal_curve.SignalCurve`), with the curvature's costs
:math:`(\Lambda_g, \Lambda_\xi)` from the persistence of consecutive round means and the fits
of :mod:`eegrad.selectors.progress_fits`. Each round is read from its one record
(:class:`~eegrad.RoundEvidence`): the clients' local steps (the prior of the curve), the parts'
spread (the noise), then the mean's squared norm and its persistence (the signal and the
curvature). It has no objective: :class:`~eegrad.ProgressThompson` and
:class:`~eegrad.BudgetThompson` each hold one and add theirs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_array, check_integer, check_real, fail
from .evidence import RoundEvidence
from .noise_model import NoiseModel
from .progress_fits import KeptFit, LevelContraction, PersistenceFit
from .signal_curve import SignalCurve

__all__ = ["ProgressModel"]


class ProgressModel(NoiseModel):
    r"""The fitted models of a round's progress, R realizations over N arms: the noise
    :math:`v_n` (:class:`~eegrad.selectors.noise_model.NoiseModel`'s, scaled by every arm's
    gain²), the signal :math:`s_n = x_n^2` (the curve in the log-spend or the clients' log
    local steps, shrunk towards the local steps' prior), the curvature's costs
    :math:`(\Lambda_g, \Lambda_\xi)` and the signal level's contraction :math:`\rho` a round
    (the notes of :mod:`eegrad.selectors.progress`).

    Parameters
    ----------
    R, N, spend, population, noise_order, discount, release_noise
        As :class:`~eegrad.selectors.noise_model.NoiseModel`; ``discount`` ages the signal's
        and the persistence's evidence too.
    signal_degree : {0, 1, 2}
        Degree of the log-signal's curve in its regressor.
    shape_discount : float
        Weight per round of age of the evidence on the curve's shape, in (0, 1].
    """

    #: The parts' spread, the mean's signal and the clients' local steps of each round.
    reads = frozenset({"spread", "signal", "local_steps"})
    options = ("signal_degree", "shape_discount")

    @classmethod
    def check_options(cls, owner: str, **values: Any) -> dict[str, Any]:
        """``signal_degree`` (0, 1 or 2) and ``shape_discount`` (in (0, 1]) as a rule
        ``owner`` was given them, checked."""
        shape = check_real(values["shape_discount"], "shape_discount", owner, gt=0, le=1)
        degree = check_integer(values["signal_degree"], "signal_degree", owner, ge=0)
        if degree > 2:
            raise fail("signal_degree", owner, "0, 1 or 2", values["signal_degree"])
        return {"signal_degree": degree, "shape_discount": shape}

    def __init__(self, R: int, N: int, spend: np.ndarray, population: int | None = None,
                 noise_order: int = 1, discount: float = 0.9,
                 release_noise: np.ndarray | None = None, signal_degree: int = 1,
                 shape_discount: float = 0.99) -> None:  # fmt: skip
        super().__init__(R, N, spend, population, noise_order, discount, release_noise)
        self.signal_degree, self.shape_discount = signal_degree, shape_discount
        #: The signal's curve over the arms, with the clients' reported local steps.
        self.curve = self._new_signal_curve()
        self._round_noise = None  # the last round's own estimate of its noise
        # the last round told had fewer than two parts, and no round before it a spread
        self._before_any_spread = False
        self._last = None  # (x, v) of the last round told a signal
        #: The curvature's costs from consecutive rounds, the signal level's contraction, and
        #: what of a round's deviation the next keeps (:mod:`~eegrad.selectors.progress_fits`).
        self.persistence = PersistenceFit(R)
        self.level = LevelContraction(R)
        self.kept_fit = KeptFit(R)

    def _new_signal_curve(self) -> SignalCurve:
        """The signal's model (a study's model may give a variant)."""
        return SignalCurve(self.spend, self.R, self.signal_degree, self.discount,
                           self.shape_discount)  # fmt: skip

    # -- the round's record ----------------------------------------------------------------------
    def before_statistic(self, ev: RoundEvidence, owner: str) -> None:
        """The round's local steps (the prior of the signal's curve), noted once its local
        steps and its signal are checked, so that a record refused leaves the model as it
        was."""
        if ev.local_steps is not None:
            self._checked_steps(ev.local_steps, owner)
        if ev.mean_norm2 is not None:
            self._checked_signal(ev.mean_norm2, ev.persistence, owner)
        if ev.local_steps is not None:
            self.note_local_steps(ev.arms, ev.local_steps, owner)

    def after_statistic(self, ev: RoundEvidence, owner: str) -> None:
        """The round's mean's signal and persistence, after its spread."""
        if ev.mean_norm2 is not None:
            self.note_signal(ev.arms, ev.mean_norm2, ev.persistence, owner)

    def _checked_steps(self, steps: Any, owner: str) -> np.ndarray:
        """The round's local steps, shape (R,), checked finite and > 0."""
        k = check_array(steps, "steps", owner, shape=(self.R,))
        if np.any(k <= 0):
            raise fail("steps", owner, "local steps > 0", k)
        return k

    def _checked_signal(self, mean_norm2: Any, persistence: Any,
                        owner: str) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
        """The round's ‖ū‖² (finite, >= 0) and persistence (finite, or None), shape (R,)."""
        y = check_array(mean_norm2, "mean_norm2", owner, shape=(self.R,))
        if np.any(y < 0):
            raise fail("mean_norm2", owner, "squared norms >= 0", y)
        p = None if persistence is None else check_array(persistence, "persistence", owner,
                                                          shape=(self.R,))  # fmt: skip
        return y, p

    def note_local_steps(self, arms: np.ndarray, steps: Any, owner: str) -> None:
        r"""The local steps :math:`\bar k > 0` the round's clients took (their mean), shape
        (R,), before its parts: the prior of the signal's curve (:meth:`steps_prior`). A round
        whose clients report none is simply not told."""
        self.curve.note_steps(arms, self._checked_steps(steps, owner))

    def add(self, arms: np.ndarray, y: np.ndarray, x: np.ndarray, coef: np.ndarray,
            line: np.ndarray, second: tuple[np.ndarray, np.ndarray] | None = None) -> bool:  # fmt: skip
        """The spread's statistic of a round, divided by the arm's gain² (the noise model is
        fitted in the units of the centre of the spend's range); the round's own estimate of
        its noise is kept for its signal."""
        scale = self.scale()
        gain2 = scale[self._rows, arms] if isinstance(scale, np.ndarray) else scale
        theta, _ = self.fit()
        theta = np.maximum(theta, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            # The round's own estimate of its mean's variance: its statistic times the
            # model's ratio of the two (the gain cancels; θ's proportions carry the
            # finite-population correction).
            ratio = np.einsum("rk,rk->r", coef, theta) / np.einsum("rk,rk->r", x, theta)
            self._round_noise = np.where(np.isfinite(ratio), y * ratio, np.nan)
        self._before_any_spread = bool(not self.spread_seen and np.all(line[:, 0] < 2.0))
        if second is not None:
            second = (second[0] / gain2, second[1])
        return super().add(arms, y / gain2, x, coef, line, second)

    def note_signal(self, arms: np.ndarray, mean_norm2: Any, persistence: Any,
                    owner: str) -> None:
        r"""The round's mean (after its parts were told): its squared norm
        :math:`\|\bar u_t\|^2`, shape (R,), and where the round stepped after another,
        ``persistence`` :math:`\bar u_t \cdot \bar u_{t-1}` with the previous round's mean,
        shape (R,) (None: not known, e.g. the first round). A round told with fewer than two
        parts before any round has shown a spread (a driver's first round capped to one
        client) is not taken: the noise in its ‖ū‖² is unknown, so its signal cannot be told
        from it."""
        own, self._round_noise = self._round_noise, None  # the round's own, from its spread
        if not self.takes_signal(own):
            self._before_any_spread = False
            self.forget_persistence()  # the next round pairs with none
            return
        y, p = self._checked_signal(mean_norm2, persistence, owner)
        v = self.predicted()[self._rows, arms]
        v_round = self.round_noise(arms, v, own)
        told = self.curve.told()
        # The round's expected ‖ū‖², predicted before it: its signal's weight (signal_weight).
        m_pred = v + (self.signal()[self._rows, arms] if told else np.maximum(y - v, 0.0))
        q = self.signal_weight(m_pred, y)
        self.curve.add(arms, y - v_round, q)
        fitted = self.signal()  # the curve after this round's fit
        level = fitted.max(axis=1)
        self.level.track(level, self.curve.fitted & (level > 0))
        x = np.sqrt(fitted[self._rows, arms])
        self.persistence.discount(self.discount)
        if p is not None and self._last is not None:
            self.persistence.add(*self._last, x, v, p)
        self._last = (x, v)
        self.kept_fit.note(y, v_round, p, self.discount)

    def takes_signal(self, own: np.ndarray | None) -> bool:
        r"""Whether the round's :math:`\|\bar u\|^2` tells a signal, given its own noise ``own``
        (shape (R,), NaN where its spread measured none; None: no spread told): not for a round
        of fewer than two parts before any round has shown a spread, whose noise is unknown.
        A hook for a model's variant."""
        return not self._before_any_spread

    def round_noise(self, arms: np.ndarray, predicted: np.ndarray,
                    own: np.ndarray | None) -> np.ndarray:  # fmt: skip
        r"""The noise taken from the round's :math:`\|\bar u\|^2` at ``arms`` for its signal,
        shape (R,): its own, ``own``, where its spread measured it, else the noise ``predicted``
        for the arm before the round. A hook for a model's variant."""
        return predicted if own is None else np.where(np.isfinite(own), own, predicted)

    def signal_weight(self, predicted: np.ndarray, y: np.ndarray) -> np.ndarray:
        r"""The weight of a round's signal estimate in the curve's fit, shape (R,): the inverse
        of its variance, which grows as the square of the round's expected
        :math:`\|\bar u\|^2`, ``predicted`` before the round (a weight that read the round's
        own :math:`\|\bar u\|^2`, ``y``, would bias the fit). A hook for a model's variant."""
        return 1.0 / np.maximum(predicted * predicted, 1e-300)

    def forget_persistence(self) -> None:
        """Break the chain of consecutive rounds (a round lost, or T rounds at one model): the
        next round's persistence is not paired with the last one."""
        self._last = None
        self.kept_fit.forget()

    def ready(self) -> bool:
        """Whether a round's signal has been told (the objectives of progress need the
        signal's curve)."""
        return bool(self.curve.told())

    # -- the noise, in every arm's gain ----------------------------------------------------------
    def scale(self) -> np.ndarray | float:
        r""":math:`a_n^2 / a_0^2`, shape (R, N): the gain² of every arm relative to the centre of
        the spend's range, from the signal's curve (:meth:`SignalCurve.gain2
        <eegrad.selectors.signal_curve.SignalCurve.gain2>`) — the noise of a round scales with
        its gain as its signal does (1 before any signal)."""
        return self.curve.gain2()

    # -- the signal and its curve ----------------------------------------------------------------
    def signal(self) -> np.ndarray:
        """The fitted signal :math:`s_n = x_n^2` of every arm, shape (R, N) (0 before any)."""
        return self.curve.signal()

    def signal_curve(self) -> np.ndarray:
        """The log-signal curve's coefficients as the model uses them, shape (R, k): the fit,
        shrunk towards :meth:`steps_prior` by its evidence (:meth:`SignalCurve.curve
        <eegrad.selectors.signal_curve.SignalCurve.curve>`)."""
        return self.curve.curve()

    def arm_steps(self) -> np.ndarray:
        """Every arm's local steps as the curve's steps regressor reads them, shape (R, N)
        (:meth:`SignalCurve.arm_steps <eegrad.selectors.signal_curve.SignalCurve.arm_steps>`);
        NaN in rows told none."""
        return self.curve.arm_steps()

    def steps_prior(self) -> np.ndarray:
        """The prior of the log-signal curve's coefficients, shape (R, k): twice the slope of
        the clients' log local steps in the curve's regressor (:meth:`SignalCurve.steps_prior
        <eegrad.selectors.signal_curve.SignalCurve.steps_prior>`)."""
        return self.curve.steps_prior()

    def steps_told(self) -> np.ndarray:
        """Whether the clients have reported their local steps (``local_steps``), shape (R,)."""
        return self.curve.steps.told()

    def steps_differ(self) -> np.ndarray:
        """Whether the clients' reported local steps differ between the arms, shape (R,): a
        non-zero :meth:`steps_prior` (False where none are told, or every arm takes the same
        steps: FedSGD, a fixed number of full-batch epochs)."""
        return self.curve.steps_differ()

    def steps_equal(self) -> np.ndarray:
        """Whether the clients have reported their local steps and every arm takes the same,
        shape (R,) (:meth:`steps_told`, and not :meth:`steps_differ`)."""
        return self.steps_told() & ~self.steps_differ()

    # -- the curvature, the contraction, what is kept --------------------------------------------
    def curvature(self) -> np.ndarray:
        r"""(:math:`\Lambda_g`, :math:`\Lambda_\xi`), shape (R, 2): the curvature's cost of a
        round's signal and of its noise, the persistence's least-squares fit (non-negative), or
        the prior :math:`1/(2x^*)` each where the rounds have not shown them; where every arm
        takes the same local steps, the fit shrunk towards that prior by its evidence
        (:func:`~eegrad.selectors.progress_fits.shrink_to_prior`; the notes of
        :mod:`eegrad.selectors.progress`, *The curvature's evidence*).
        :math:`\Lambda_\xi` is at least a thousandth of the larger (ties between arms of one
        signal go to the least noise)."""
        return self.persistence.costs(self.curvature_prior(), self.shrinks_curvature())

    def curvature_prior(self) -> np.ndarray:
        r"""The curvature costs' prior :math:`1/(2x^*)`, shape (R,) (:math:`x^* = \max_n x_n`;
        0 before any signal): the cost at which the longest update is the step a noiseless
        quadratic takes."""
        x_top = np.sqrt(self.signal().max(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(x_top > 0, 0.5 / x_top, 0.0)

    def shrinks_curvature(self) -> np.ndarray:
        """Where :meth:`curvature` shrinks the persistence's fit towards its prior, shape (R,):
        where the clients report the same local steps at every arm (:meth:`steps_equal`)."""
        return self.steps_equal()

    def kept(self) -> np.ndarray:
        r""":math:`1 - \hat a`, shape (R,): what of a round's deviation from the optimum the
        next round keeps, in [0, 1] (NaN until a few pairs of consecutive rounds are told;
        :class:`~eegrad.selectors.progress_fits.KeptFit`). A round's noise reaches the run's
        end h rounds later shrunk by :math:`(1-a)^{2h}`."""
        return self.kept_fit.kept()

    def kept_bound(self, z: float) -> np.ndarray:
        r"""An upper confidence bound of :meth:`kept`, ``z`` standard errors above it, shape
        (R,), in [0, 1] (NaN where :meth:`kept` is;
        :meth:`~eegrad.selectors.progress_fits.KeptFit.bound`)."""
        return self.kept_fit.bound(z)

    def contraction(self) -> np.ndarray:
        r""":math:`\hat\rho`, shape (R,): the signal level's factor per round, in [0.8, 0.9999]
        (NaN until shown; :class:`~eegrad.selectors.progress_fits.LevelContraction`)."""
        return self.level.contraction()

    # -- the decrease of a round -----------------------------------------------------------------
    @staticmethod
    def progress(signal: np.ndarray, noise: np.ndarray, curvature: np.ndarray) -> np.ndarray:
        r"""The expected decrease :math:`x_n - \Lambda_g x_n^2 - \Lambda_\xi v_n` of every arm
        (up to the positive factor :math:`\|g\|`), from signals :math:`x_n^2` and noises
        :math:`v_n`, shape (R, N), and (:math:`\Lambda_g`, :math:`\Lambda_\xi`), shape (R, 2)
        (one Λ, shape (R,), for both); where no arm has a signal, :math:`-v_n` (the spread
        rule's choice)."""
        x = np.sqrt(np.maximum(signal, 0.0))
        lam = np.asarray(curvature, dtype=np.float64)
        lam = np.stack([lam, lam], axis=-1) if lam.ndim == 1 else lam
        d = x - lam[:, :1] * signal - lam[:, 1:] * noise
        return np.where(x.max(axis=1, keepdims=True) > 0, d, -noise)

    def step_scale(self, arms: Any) -> np.ndarray:
        r"""The scale :math:`\rho^* = \min(1, x_n / (2(\Lambda_g s_n + \Lambda_\xi v_n)))` of
        the step by a round of arm n that maximises its expected decrease
        :math:`\rho x_n - \rho^2(\Lambda_g s_n + \Lambda_\xi v_n)` (never longer than the
        caller's step), shape (R,): 1 where the signal dominates, shorter as the noise does; 1
        before any signal."""
        arms = np.asarray(arms)
        signal, noise = self.signal(), self.predicted()
        lam = self.curvature()
        s = signal[self._rows, arms]
        v = noise[self._rows, arms]
        cost = lam[:, 0] * s + lam[:, 1] * v
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.sqrt(s) / (2.0 * cost)
        return np.where(self.curve.fitted & np.isfinite(rho), np.clip(rho, 0.0, 1.0), 1.0)
