r"""The progress of a round: the fitted models a rule of progress reads, and the per-round rule.

:class:`~eegrad.selectors.progress_model.ProgressModel` fits, from each round's record, the noise of every n (the spread rule's
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
:math:`p = 1/(2x^*)` by its evidence (:meth:`~eegrad.selectors.progress_model.ProgressModel.curvature`),

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
slope of :math:`\log \bar k_n` in the curve's regressor (:meth:`~eegrad.selectors.progress_model.ProgressModel.steps_prior`) — 0 where every
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
(:meth:`~eegrad.selectors.progress_model.ProgressModel.arm_steps`) are their rounds' reports, weighted by the clients, fitted non-decreasing in
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

from .._validation import check_integer, fail
from .evidence import Outlook
from .model_rule import ModelRule, largest_best
from .progress_fits import nonnegative_minima, nonnegative_minimum
from .progress_model import ProgressModel
from .registry import register_rule
from .signal_curve import STEPS_SPAN
from .spread import leading_arms

__all__ = ["STEPS_SPAN", "ProgressThompson", "nonnegative_minima", "nonnegative_minimum"]


@register_rule("progress_thompson", label="Thompson on the progress of a round")
class ProgressThompson(ModelRule):
    r"""Posterior sampling of the noise, with the expected decrease of a round as the objective.

    The rule's model is a :class:`~eegrad.selectors.progress_model.ProgressModel` (the noise,
    the signal, the curvature: :attr:`model`); it pulls the n of most expected decrease

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
    discount, population, spend, seed, release_noise, noise_order, warmup
        As :class:`~eegrad.SpreadThompson`; ``discount`` ages the signal's and the
        persistence's evidence too.
    signal_degree : {0, 1, 2}
        Degree of the log-signal's curve in its regressor, the centred log-spend or, where the
        arms' local steps span twofold or more, their centred log steps (0: the same signal for
        every arm; 1, the default: a signal that grows or falls as a power of the share or the
        steps; 2: with a bend).
    objective : {"decrease"}
        The rule's one objective, :math:`D_n^{(h)}`. Other values are refused, naming where
        they went: a total budget's rate is :class:`~eegrad.BudgetThompson`'s.
    shape_discount : float
        Weight per round of age of the evidence on the signal curve's shape (the arms' relative
        gains), in (0, 1]; the level ages by ``discount``. Default 0.99: the shape is a property
        of the clients' training that outlives the level's drift.

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad import ProgressThompson
    >>> rule = ProgressThompson(population=20, noise_order=2)
    >>> rule.init(1, 20, 3)
    >>> rule.ask(1)  # the spread rule's warm-up starts with all 20 clients
    array([19])
    """

    #: The parts' spread, the mean's signal and the clients' local steps of each round; before
    #: an ask, the rounds the run has left.
    reads = frozenset({*ProgressModel.reads, "rounds_left"})
    #: The progress of a round (:class:`~eegrad.selectors.progress_model.ProgressModel`).
    model_type = ProgressModel

    def __init__(self, discount: float = 0.9, population: int | None = None, spend: Any = None,
                 seed: int = 0, release_noise: Any = None, noise_order: int = 1,
                 signal_degree: int = 1, objective: str = "decrease",
                 shape_discount: float = 0.99, warmup: Any = None) -> None:  # fmt: skip
        if objective != "decrease":
            moved = ("; a total budget's rate is eegrad.BudgetThompson's" if objective == "rate"
                     else "")  # fmt: skip
            raise fail("objective", "ProgressThompson",
                       f"'decrease', the rule's one objective{moved}", objective)  # fmt: skip
        super().__init__(discount, population, spend, seed, release_noise, noise_order, warmup,
                         signal_degree=signal_degree, shape_discount=shape_discount)

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
        non-zero prior of the signal's curve), else 1 (the module's notes, *The run's end*)."""
        R = self._shape[0]
        if self._rounds_left is None:
            return np.ones((R, 1))
        return np.where(self.model.steps_differ(), 1.0 / np.sqrt(self._rounds_left),
                        1.0)[:, None]  # fmt: skip

    def predicted_progress(self) -> np.ndarray:
        """The fitted expected decrease of every arm (up to a positive factor), shape (R, N):
        with the rounds left told, its curvature's cost weighted by :meth:`curvature_weight`."""
        return self._objective(self.predicted())

    # -- ask ---------------------------------------------------------------------------------------
    def _objective(self, noise: np.ndarray) -> np.ndarray:
        """:math:`D_n^{(h)}` of every arm, shape (R, N), from the arms' noise ``noise``."""
        m = self.model
        return m.progress(m.signal(), noise, m.curvature() * self.curvature_weight())

    def estimates(self) -> dict[str, np.ndarray]:
        r"""Besides ``variance`` (:meth:`SpreadThompson.estimates`): ``signal``, the fitted
        :math:`\lVert E\bar u_n\rVert^2` of arm n's round mean, and ``objective``, the fitted
        :math:`D_n^{(h)}` (:meth:`predicted_progress`)."""
        out = super().estimates()
        if out:
            out.update(signal=self.model.signal()[0], objective=self.predicted_progress()[0])
        return out

    def explain(self, top: int = 3) -> str | None:
        """The warm-up, or the arms of most fitted expected decrease."""
        N = self._shape[1]
        if N == 1:
            return None
        if self._warming_up():
            return f"warm-up round {self.rounds + 1} of {len(self.warmup_arms)}"
        return leading_arms(self.predicted_progress()[0], top,
                            "a posterior draw of the expected decrease of the loss; by the fit")

    def _choose(self) -> np.ndarray:
        """The most expected decrease under a posterior draw of the noise (ties: largest n)."""
        return largest_best(self._objective(self._sampled_noise()))
