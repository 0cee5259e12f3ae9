r"""The progress of a round: the fitted models a rule of progress reads, and the per-round rule.

:class:`ProgressFit` fits, from each round's record, the noise of every n (the spread rule's
fit), the signal of every n (the squared length of its expected update) and the curvature's
cost of a step (the persistence of consecutive round means), and the signal level's contraction
a round. Two rules read them, each with one objective: :class:`ProgressThompson` (here) the
expected decrease of a round, :math:`D_n` below, and :class:`~eegrad.BudgetThompson`
(:mod:`eegrad.selectors.budget`) the decrease per unit of cost under a total budget. How the
models and objectives were chosen, and the alternatives measured against them, are on the
studies page (docs/guide/federated-studies.md, *How the progress rules were chosen*).

:class:`~eegrad.SpreadThompson` picks the n whose round mean :math:`\bar u` has the least
variance :math:`v_n`. That is the paper's model: every arm returns an unbiased estimate of the
same gradient, and arms differ only in noise. With local training they also differ in how far
an update goes: a client whose share buys more samples takes more local steps (mini-batches,
momentum), so the expected update of a round of n clients depends on n. A rule that minimises
the noise alone then prefers the rounds that barely move.

**The progress of a round.** Let round t of arm n step :math:`w_{t+1} = w_t - \bar u_t` with
:math:`\bar u_t = a_n (g_t + \xi_t)`: the arm's gain :math:`a_n > 0` (the local work its share
buys) times the gradient :math:`g_t` plus noise. On a local quadratic model whose curvature
:math:`\lambda` is the same along the gradient and the noise, the expected decrease is

.. math::

    D_n = a_n\|g\|^2 - \tfrac{\lambda}{2} a_n^2 (\|g\|^2 + \|\xi\|^2)
        = \|g\| \bigl( x_n - \Lambda\, m_n \bigr),

with :math:`x_n = a_n\|g\|` the length of the arm's expected update (its *signal*
:math:`s_n = x_n^2`), :math:`m_n = s_n + v_n` its mean square and :math:`\Lambda = \lambda/(2\|g\|)`,
one number common to the arms. Where every arm makes the same expected update (one local
gradient step, FedSGD: the paper's model) the rule minimises :math:`v_n`, as the spread rule;
where updates differ, a longer one is worth its noise while :math:`x_n - \Lambda m_n` grows.

**What the rounds show.** :math:`\mathbb E\|\bar u\|^2 = s_n + v_n`: less the fitted noise, the
squared norm of a round's mean estimates the arm's signal. The signal is fitted as
:math:`s_n = \exp(b_0 + b_1 \ell_n)` in the centred log-spend :math:`\ell_n` of the per-client
spend :math:`(B - D(n))/n` (``signal_degree=2`` adds :math:`b_2\ell_n^2`) — one curve for all
arms, so that arms never pulled are predicted and a flat signal is learnt as flat; each
coefficient of the log-spend is shrunk towards 0 by its evidence. And the next round sees the
curvature: since :math:`g_{t+1} = g_t - \lambda\bar u_t`,

.. math::

    \mathbb E\,[\bar u_{t+1}\cdot\bar u_t] = x_{n_{t+1}}\bigl(x_{n_t} - 2\Lambda\, m_{n_t}\bigr),

so the persistence of consecutive means gives :math:`\Lambda` by least squares through the
origin, :math:`x_{n_{t+1}}x_{n_t} - \bar u_{t+1}\cdot\bar u_t` against :math:`2x_{n_{t+1}}m_{n_t}`:
steps far shorter than the curvature allows (consecutive updates alike) give a small
:math:`\Lambda` and favour the longest updates; a noisy or overshooting step (consecutive
updates unlike) a large one, and the least noise. Both fits discount the evidence by
``discount`` a round, as the noise's. Until rounds show a persistence, :math:`\Lambda = 1/(2x^*)`
(:math:`x^* = \max_n x_n`: the longest update taken for the step a noiseless quadratic takes).

**The curvature's evidence, where every arm takes the same steps.** There the arms' signals are
the same by the model, and the choice turns on the noise's cost :math:`\Lambda_\xi v_n` against
the curve's chance slope. The persistence's pairs are few and alike (rounds of nearly the same
n), so the fit may put a cost at the bound 0, which makes the noise free. As the curve's
coefficients are shrunk towards their prior, each cost is shrunk towards the prior
:math:`p = 1/(2x^*)` by its evidence (:meth:`~ProgressFit.curvature`),

.. math::

    \Lambda_j = \max\Bigl(0,\ p + (\hat\Lambda_j - p)\max\bigl(0,\ 1 -
    \widehat{\mathrm{Var}}\,\hat\Lambda_j / (\hat\Lambda_j - p)^2\bigr)\Bigr),

with :math:`\widehat{\mathrm{Var}}\,\hat\Lambda_j = \hat\sigma^2 (A^{-1})_{jj}`, A the pairs'
weighted normal matrix and :math:`\hat\sigma^2` their weighted residual variance (both
discounted), once more than three pairs are told and A is not singular. Where the steps differ
the fit is used as it is: there a small cost is what lets the rule take the long, noisy updates
that pay over a run.

**The curve's prior: the clients' local steps.** Each coefficient of the curve is shrunk
towards a prior, not towards 0, where the clients report the local optimizer steps they took
(the record's ``local_steps``; :func:`~eegrad.flower.budgeted_train` and
:func:`~eegrad.flower.budgeted_torch_train` report them as the metric ``local-steps``). To first
order in the step size, :math:`k` local steps of size :math:`\eta` move a client by
:math:`\eta k\, g`, so that :math:`s_n \propto \bar k_n^2`: the prior of the slope is twice the
slope of :math:`\log \bar k_n` in the curve's regressor (:meth:`~ProgressFit.steps_prior`) — 0 where every
arm takes the same steps (FedSGD, a fixed number of full-batch epochs), positive where a larger
share buys more mini-batch steps. The rounds move the curve off its prior as their evidence
grows.

**Where the steps differ: a curve in the steps.** A larger share buys more mini-batch steps
only until the client's data is exhausted; beyond, the client takes the same steps over the
same samples, and its update is the same. A curve in the log-spend cannot bend there: it
extrapolated a longer update to the largest shares (n = 1), which the rule then asked for noisy
rounds that went no further. Where the arms' steps span :data:`STEPS_SPAN` (twofold) or more,
the curve's regressor is therefore the arms' log steps themselves, :math:`\log s_n = b_0 +
b_1(\log \bar k_n - \overline{\log \bar k})`, with the prior :math:`b_1 = 2`; the arms' steps
(:meth:`~ProgressFit.arm_steps`) are their rounds' reports, weighted by the clients, fitted non-decreasing in
the share, interpolated between the arms told and constant beyond them. Arms of equal steps get
equal signals; the rounds still move :math:`b_1` (momentum makes an update grow faster than its
steps, client drift slower). Where the steps span less (a fixed number of local steps, of which
the smallest shares afford one or two fewer), the log-spend stays the regressor: the update's
length there depends more on the samples a step averages than on the steps.

**The run's end.** :math:`D_n` charges a round's curvature cost whole, as if the run ended
after it. What counts is the loss at the run's end, h rounds away (this round included), and the
later rounds forget part of a round's overshoot: on the quadratic they shrink a deviation along
a direction of curvature :math:`\lambda` by :math:`(1 - a\lambda)^2` a round. A deviation along
the stiff directions is forgotten within a round, so that of the h rounds' charges only the last
one's reaches the end: its cost is :math:`1/h` of the charge, a round. One along the flat
directions is never forgotten: its cost is the whole charge. Both parts of the cost are such
deviations: the noise's, and the signal's overshoot of the step a noiseless quadratic takes
(measured by the same persistence, and made along the stiff directions that dominate the
gradient's curvature). The persistence measures the charge of one round, not how it divides
between stiff and flat, so where the rule is told the rounds left (the outlook's ``rounds_left``) it
charges the geometric mean of the two ends,

.. math::

    D_n^{(h)} = \|g\| \bigl( x_n - (\Lambda_g s_n + \Lambda_\xi v_n) / \sqrt h \bigr),

off by at most a factor :math:`\sqrt h` either way, the least worst case
(:meth:`curvature_weight`). The first-order gain, made along the gradient that the flat
directions dominate late in training, adds up whole. Early in a long run the rounds that go
furthest are chosen despite their noise; as the end nears the rule turns to the least noise,
and in the last round it is :math:`D_n`. The weight applies where the clients' reported steps
differ between the arms (a non-zero prior, above): only there do the arms trade noise for a
longer update; where every n takes the same steps the arms' signals are the same and the least
noise is the best choice whatever h. :class:`~eegrad.flower.EEGradStrategy` tells the rounds left of the
``num_rounds`` it is started with; untold, the rule is :math:`D_n`'s.

**Choice.** The spread rule's warm-up, then: draw the noise's parameters as
:class:`~eegrad.SpreadThompson` does, predict :math:`x_n` and :math:`v_n` for every arm and pull
:math:`\arg\max_n (x_n - \Lambda m_n)` (ties to the largest n; with the rounds left told, the
curvature's cost over :math:`\sqrt h`). Until a signal has been told, the rule is
:class:`~eegrad.SpreadThompson`. The persistence assumes every round is a step by its mean (a
server step :math:`\eta\bar u`, folded into :math:`\Lambda`); with T rounds per step none is
told and :math:`\Lambda = 1/(2x^*)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_array, check_integer, check_real, fail
from .evidence import Outlook, RoundEvidence
from .progress_fits import (
    KeptFit,
    LevelContraction,
    PersistenceFit,
    nonnegative_minima,
    nonnegative_minimum,
)
from .registry import register_rule
from .signal_curve import STEPS_SPAN, SignalCurve
from .spread import SpreadThompson, leading_arms

__all__ = ["STEPS_SPAN", "ProgressFit", "ProgressThompson", "nonnegative_minima",
           "nonnegative_minimum"]  # fmt: skip


class ProgressFit(SpreadThompson):
    r"""The fitted models of a round's progress, which the rules of progress share: the noise
    :math:`v_n` of every n (:class:`~eegrad.SpreadThompson`'s fit from the parts' spread), the
    signal :math:`s_n = x_n^2` (the curve in the log-spend or the clients' log local steps,
    shrunk towards the local steps' prior), the curvature's costs
    :math:`(\Lambda_g, \Lambda_\xi)` (the persistence of consecutive round means) and the
    signal level's contraction :math:`\rho` a round (the module's notes). It has no objective
    of its own: it chooses as the spread rule; :class:`ProgressThompson` and
    :class:`~eegrad.BudgetThompson` each add one.

    Each round is read from its one record (:meth:`~eegrad.Selector.tell_round`): the clients'
    local steps (the prior of the curve, :meth:`steps_prior`), the parts' spread (the noise),
    then the mean's squared norm and its persistence (the signal and the curvature).

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order, warmup
        As :class:`~eegrad.SpreadThompson`; ``discount`` ages the signal's and the
        persistence's evidence too.
    signal_degree : {0, 1, 2}
        Degree of the log-signal's curve in its regressor, the centred log-spend or, where the
        arms' local steps span twofold or more, their centred log steps (0: the same signal for
        every arm; 1, the default: a signal that grows or falls as a power of the share or the
        steps; 2: with a bend).
    shape_discount : float
        Weight per round of age of the evidence on the signal curve's shape (the arms' relative
        gains), in (0, 1]; the level ages by ``discount``. Default 0.99: the shape is a property
        of the clients' training that outlives the level's drift.
    """

    #: The parts' spread, the mean's signal and the clients' local steps of each round.
    reads = frozenset({"spread", "signal", "local_steps"})

    def __init__(self, discount: float = 0.9, population: int | None = None, spend: Any = None,
                 seed: int = 0, release_noise: Any = None, noise_order: int = 1,
                 signal_degree: int = 1, shape_discount: float = 0.99,
                 warmup: Any = None) -> None:  # fmt: skip
        super().__init__(discount, population, spend, seed, release_noise, noise_order, warmup)
        owner = type(self).__name__
        self.shape_discount = check_real(shape_discount, "shape_discount", owner, gt=0, le=1)
        self.signal_degree = check_integer(signal_degree, "signal_degree", owner, ge=0)
        if self.signal_degree > 2:
            raise fail("signal_degree", owner, "0, 1 or 2", signal_degree)

    def get_params(self) -> dict[str, Any]:
        """The spread rule's parameters (``warmup`` where given), ``signal_degree`` and
        ``shape_discount``."""
        return {**super().get_params(), "signal_degree": self.signal_degree,
                "shape_discount": self.shape_discount}  # fmt: skip

    # -- lifecycle ---------------------------------------------------------------------------------
    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: no evidence of noise, signal or persistence yet."""
        super().init(R, N, d, truth, streams)
        #: The signal's curve over the arms (:class:`~eegrad.selectors.signal_curve.SignalCurve`),
        #: with the clients' reported local steps.
        self._signal = self._new_signal_curve(R)
        self._round_noise = None  # the last round's own estimate of its noise
        # the last round told had fewer than two parts, and no round before it a spread
        self._before_any_spread = False
        self._last = None  # (x, v) of the last round told a signal
        #: The curvature's costs from consecutive rounds, the signal level's contraction, and
        #: what of a round's deviation the next keeps (:mod:`~eegrad.selectors.progress_fits`).
        self._persistence = PersistenceFit(R)
        self._level = LevelContraction(R)
        self._kept = KeptFit(R)

    def _new_signal_curve(self, R: int) -> SignalCurve:
        """The signal's model of a run of R realizations (a study's rule may give a variant)."""
        return SignalCurve(self._spend, R, self.signal_degree, self.discount,
                           self.shape_discount)  # fmt: skip

    # -- the round's record ------------------------------------------------------------------------
    def _observe_round(self, ev: RoundEvidence, owner: str) -> None:
        """The round's local steps (the prior of the signal's curve), its spread, then its
        mean's signal, in that order — each field checked first, so that a record refused
        leaves the rule as it was."""
        if ev.local_steps is not None:
            self._checked_steps(ev.local_steps, owner)
        if ev.mean_norm2 is not None:
            self._checked_signal(ev.mean_norm2, ev.persistence, owner)
        if ev.local_steps is not None:
            self._note_local_steps(ev.arms, ev.local_steps, owner)
        super()._observe_round(ev, owner)
        if ev.mean_norm2 is not None:
            self._note_signal(ev.arms, ev.mean_norm2, ev.persistence, owner)

    def _checked_steps(self, steps: Any, owner: str) -> np.ndarray:
        """The round's local steps, shape (R,), checked finite and > 0."""
        k = check_array(steps, "steps", owner, shape=(self._shape[0],))
        if np.any(k <= 0):
            raise fail("steps", owner, "local steps > 0", k)
        return k

    def _checked_signal(self, mean_norm2: Any, persistence: Any,
                        owner: str) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
        """The round's ‖ū‖² (finite, >= 0) and persistence (finite, or None), shape (R,)."""
        R = self._shape[0]
        y = check_array(mean_norm2, "mean_norm2", owner, shape=(R,))
        if np.any(y < 0):
            raise fail("mean_norm2", owner, "squared norms >= 0", y)
        p = None if persistence is None else check_array(persistence, "persistence", owner,
                                                          shape=(R,))  # fmt: skip
        return y, p

    def _note_signal(self, arms: np.ndarray, mean_norm2: Any, persistence: Any,
                     owner: str) -> None:
        r"""The last pull's mean (after its parts were told): its squared norm
        :math:`\|\bar u_t\|^2`, shape (R,), and where the round stepped after another,
        ``persistence`` :math:`\bar u_t \cdot \bar u_{t-1}` with the previous round's mean,
        shape (R,) (None: not known, e.g. the first round). A round told with fewer than two
        parts before any round has shown a spread (a driver's first round capped to one
        client) is not taken: the noise in its ‖ū‖² is unknown, so its signal cannot be told
        from it."""
        if self._before_any_spread:  # nothing yet to subtract the noise with
            self._round_noise, self._before_any_spread = None, False
            return
        y, p = self._checked_signal(mean_norm2, persistence, owner)
        v = self.predicted()[self._rows, arms]
        own = self._round_noise  # the round's own noise, from its spread (None: no spread)
        v_round = v if own is None else np.where(np.isfinite(own), own, v)
        self._round_noise = None
        told = self._signal.told()
        # Var ‖ū‖² grows as the square of its expectation, predicted before this round (a
        # weight that read the round's own ‖ū‖² would bias the fit).
        m_pred = v + (self.signal()[self._rows, arms] if told else np.maximum(y - v, 0.0))
        q = 1.0 / np.maximum(m_pred * m_pred, 1e-300)
        self._signal.add(arms, y - v_round, q)
        fitted = self.signal()  # the curve after this round's fit
        level = fitted.max(axis=1)
        self._level.track(level, self._signal.fitted & (level > 0))
        x = np.sqrt(fitted[self._rows, arms])
        self._persistence.discount(self.discount)
        if p is not None and self._last is not None:
            self._persistence.add(*self._last, x, v, p)
        self._last = (x, v)
        self._kept.note(y, v_round, p, self.discount)

    def _before_progress(self) -> bool:
        """Whether the rule still chooses as the spread rule: its warm-up, or no round's
        signal told yet (the objectives of progress need the signal's curve)."""
        return self.rounds < len(self.warmup_arms) or not self._signal.told()

    def kept(self) -> np.ndarray:
        r""":math:`1 - \hat a`, shape (R,): what of a round's deviation from the optimum the
        next round keeps, in [0, 1] (NaN until a few pairs of consecutive rounds are told;
        :class:`~eegrad.selectors.progress_fits.KeptFit`). A round's noise reaches the run's
        end h rounds later shrunk by :math:`(1-a)^{2h}`."""
        return self._kept.kept()

    def contraction(self) -> np.ndarray:
        r""":math:`\hat\rho`, shape (R,): the signal level's factor per round, in [0.8, 0.9999]
        (NaN until shown; :class:`~eegrad.selectors.progress_fits.LevelContraction`)."""
        return self._level.contraction()

    def _note_local_steps(self, arms: np.ndarray, steps: Any, owner: str) -> None:
        r"""The local steps :math:`\bar k > 0` the pending pull's clients took (their mean),
        shape (R,), before its parts: the prior of the signal's curve (:meth:`steps_prior`).
        A round whose clients report none is simply not told."""
        self._signal.note_steps(arms, self._checked_steps(steps, owner))

    # -- the signal's curve and its prior -----------------------------------------------------------
    def arm_steps(self) -> np.ndarray:
        """Every arm's local steps as the curve's steps regressor reads them, shape (R, N)
        (:meth:`SignalCurve.arm_steps <eegrad.selectors.signal_curve.SignalCurve.arm_steps>`);
        NaN in rows told none."""
        return self._signal.arm_steps()

    def steps_prior(self) -> np.ndarray:
        """The prior of the log-signal curve's coefficients, shape (R, k): twice the slope of
        the clients' log local steps in the curve's regressor (:meth:`SignalCurve.steps_prior
        <eegrad.selectors.signal_curve.SignalCurve.steps_prior>`)."""
        return self._signal.steps_prior()

    def forget_persistence(self) -> None:
        """Break the chain of consecutive rounds (a round lost, or T rounds at one model): the
        next round's persistence is not paired with the last one."""
        self._last = None
        self._kept.forget()

    def _observe_statistic(self, arms: np.ndarray, y: np.ndarray, x: np.ndarray,
                           coef: np.ndarray, line: np.ndarray,
                           second: tuple[np.ndarray, np.ndarray] | None = None) -> None:  # fmt: skip
        """The spread's statistic of a round, divided by the arm's gain² (the noise model is
        fitted in the units of the centre of the spend's range)."""
        scale = self._arm_scale()
        gain2 = scale[self._rows, arms] if isinstance(scale, np.ndarray) else scale
        theta, _ = self.fit()
        theta = np.maximum(theta, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            # The round's own estimate of its mean's variance: its statistic times the
            # model's ratio of the two (the gain cancels; θ's proportions carry the
            # finite-population correction).
            ratio = np.einsum("rk,rk->r", coef, theta) / np.einsum("rk,rk->r", x, theta)
            self._round_noise = np.where(np.isfinite(ratio), y * ratio, np.nan)
        self._before_any_spread = bool(self.rounds == 0 and np.all(line[:, 0] < 2.0))
        if second is not None:
            second = (second[0] / gain2, second[1])
        super()._observe_statistic(arms, y / gain2, x, coef, line, second)

    def _arm_scale(self) -> np.ndarray | float:
        r""":math:`a_n^2 / a_0^2`, shape (R, N): the gain² of every arm relative to the centre of
        the spend's range, from the signal's curve (:meth:`SignalCurve.gain2
        <eegrad.selectors.signal_curve.SignalCurve.gain2>`) — the noise of a round scales with
        its gain as its signal does (1 before any signal)."""
        signal = getattr(self, "_signal", None)  # none while the spread rule's init runs
        return 1.0 if signal is None else signal.gain2()

    def signal_curve(self) -> np.ndarray:
        """The log-signal curve's coefficients as the rule uses them, shape (R, k): the fit,
        shrunk towards :meth:`steps_prior` by its evidence (:meth:`SignalCurve.curve
        <eegrad.selectors.signal_curve.SignalCurve.curve>`)."""
        return self._signal.curve()

    def signal(self) -> np.ndarray:
        """The fitted signal :math:`s_n = x_n^2` of every arm, shape (R, N) (0 before any)."""
        return self._signal.signal()

    def curvature(self) -> np.ndarray:
        r"""(:math:`\Lambda_g`, :math:`\Lambda_\xi`), shape (R, 2): the curvature's cost of a
        round's signal and of its noise, the persistence's least-squares fit (non-negative), or
        the prior :math:`1/(2x^*)` each where the rounds have not shown them; where every arm
        takes the same local steps, the fit shrunk towards that prior by its evidence
        (:func:`~eegrad.selectors.progress_fits.shrink_to_prior`; the module's notes,
        *The curvature's evidence*).
        :math:`\Lambda_\xi` is at least a thousandth of the larger (ties between arms of one
        signal go to the least noise)."""
        return self._persistence.costs(self.curvature_prior(), self.shrinks_curvature())

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

    def steps_equal(self) -> np.ndarray:
        """Whether the clients have reported their local steps and every arm takes the same,
        shape (R,) (:meth:`steps_told`, and not :meth:`steps_differ`: FedSGD, a fixed number
        of full-batch epochs)."""
        return self.steps_told() & ~self.steps_differ()

    def steps_told(self) -> np.ndarray:
        """Whether the clients have reported their local steps (``local_steps``), shape (R,)."""
        return self._signal.steps.told()

    def steps_differ(self) -> np.ndarray:
        """Whether the clients' reported local steps differ between the arms, shape (R,): a
        non-zero :meth:`steps_prior` (False where none are told, or every arm takes the same
        steps: FedSGD, a fixed number of full-batch epochs)."""
        return self._signal.steps_differ()

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
        return np.where(self._signal.fitted & np.isfinite(rho), np.clip(rho, 0.0, 1.0), 1.0)


@register_rule("progress_thompson", label="Thompson on the progress of a round")
class ProgressThompson(ProgressFit):
    r"""Posterior sampling of the noise, with the expected decrease of a round as the objective.

    The fitted models are :class:`ProgressFit`'s (the noise, the signal, the curvature); the
    rule pulls the n of most expected decrease

    .. math::

        D_n^{(h)} = x_n - (\Lambda_g s_n + \Lambda_\xi v_n)/\sqrt h

    (the module's notes, *The progress of a round* and *The run's end*), with :math:`v_n` a
    posterior draw of the noise and h the rounds the run has left where the ask's outlook tells
    them and the clients' steps differ between the arms (else h = 1: :math:`D_n`).
    :class:`~eegrad.flower.EEGradStrategy` tells the rounds left of the ``num_rounds`` it is
    started with. For a run with a total budget, whose rounds cost more with more clients, the
    rule is :class:`~eegrad.BudgetThompson`.

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order, signal_degree, shape_discount, warmup
        As :class:`ProgressFit`.
    objective : {"decrease"}
        The rule's one objective, :math:`D_n^{(h)}`. Other values are refused, naming where
        they went: a total budget's rate is :class:`~eegrad.BudgetThompson`'s.

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad import ProgressThompson
    >>> rule = ProgressThompson(population=20, noise_order=2)
    >>> rule.init(1, 20, 3)
    >>> rule.ask(1)  # the spread rule's warm-up starts with all 20 clients
    array([19])
    """

    #: The round's spread, signal and local steps; before an ask, the rounds the run has left.
    reads = frozenset({*ProgressFit.reads, "rounds_left"})

    def __init__(self, discount: float = 0.9, population: int | None = None, spend: Any = None,
                 seed: int = 0, release_noise: Any = None, noise_order: int = 1,
                 signal_degree: int = 1, objective: str = "decrease",
                 shape_discount: float = 0.99, warmup: Any = None) -> None:  # fmt: skip
        if objective != "decrease":
            moved = ("; a total budget's rate is eegrad.BudgetThompson's" if objective == "rate"
                     else "")  # fmt: skip
            raise fail("objective", "ProgressThompson",
                       f"'decrease', the rule's one objective{moved}", objective)  # fmt: skip
        super().__init__(discount, population, spend, seed, release_noise, noise_order,
                         signal_degree, shape_discount, warmup)  # fmt: skip

    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: no evidence, no rounds left told."""
        super().init(R, N, d, truth, streams)
        self._rounds_left = None  # the rounds the run has left (the outlook; None: untold)

    def _look_ahead(self, outlook: Outlook, owner: str) -> None:
        """Take the rounds the run has left, the next one included (an integer >= 1): the
        noise's term of the expected decrease is divided by its square root (the module's
        notes, *The run's end*). A value not told keeps the last told."""
        if outlook.rounds_left is not None:
            self._rounds_left = check_integer(outlook.rounds_left, "rounds", owner, ge=1)

    def curvature_weight(self) -> np.ndarray:
        r"""The weight of the curvature's cost in the objective (of the signal's and the noise's,
        :math:`\Lambda_g s_n + \Lambda_\xi v_n`), shape (R, 1): :math:`1/\sqrt h` where the
        rounds left h are told and the clients' reported steps differ between the arms (a
        non-zero :meth:`steps_prior`), else 1 (the module's notes, *The run's end*)."""
        R = self._shape[0]
        if self._rounds_left is None:
            return np.ones((R, 1))
        return np.where(self.steps_differ(), 1.0 / np.sqrt(self._rounds_left), 1.0)[:, None]

    def predicted_progress(self) -> np.ndarray:
        """The fitted expected decrease of every arm (up to a positive factor), shape (R, N):
        with the rounds left told, its curvature's cost weighted by :meth:`curvature_weight`."""
        return self._objective(self.predicted())

    # -- ask ---------------------------------------------------------------------------------------
    def _objective(self, noise: np.ndarray) -> np.ndarray:
        """:math:`D_n^{(h)}` of every arm, shape (R, N), from the arms' noise ``noise``."""
        return self.progress(self.signal(), noise, self.curvature() * self.curvature_weight())

    def estimates(self) -> dict[str, np.ndarray]:
        r"""Besides ``variance`` (:meth:`SpreadThompson.estimates`): ``signal``, the fitted
        :math:`\lVert E\bar u_n\rVert^2` of arm n's round mean, and ``objective``, the fitted
        :math:`D_n^{(h)}` (:meth:`predicted_progress`)."""
        out = super().estimates()
        if out:
            out.update(signal=self.signal()[0], objective=self.predicted_progress()[0])
        return out

    def explain(self, top: int = 3) -> str | None:
        """The warm-up, or the arms of most fitted expected decrease."""
        N = self._shape[1]
        if N == 1:
            return None
        if self._before_progress():
            return f"warm-up round {self.rounds + 1} of {len(self.warmup_arms)}"
        return leading_arms(self.predicted_progress()[0], top,
                            "a posterior draw of the expected decrease of the loss; by the fit")

    def _select(self, t: int) -> np.ndarray:
        N = self._shape[1]
        if N == 1 or self._before_progress():
            return super()._select(t)
        d = self._objective(self._sampled_noise())
        return (N - 1 - np.argmax(d[:, ::-1], axis=1)).astype(np.int64)  # ties: largest n
