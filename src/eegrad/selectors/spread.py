r"""A rule that learns each arm's variance from the n parts of its pulls, and steps every round.

Where the caller sees the n parts of a pull (a federated server sees the n client updates), one
pull of arm n >= 2 is evidence about arm n: their spread within the round estimates the variance
of their weighted mean (:mod:`eegrad.spread`). Every round can then be an SGD step: there are no
query rounds, and exploring costs only a noisier step, never a wasted round.

:class:`SpreadThompson` pools that evidence across arms and rounds under the client-sampling model
of :mod:`eegrad.spread`: the variance of the round's weighted mean, for arm n with weights
ω₁..ω_n (samples) and :math:`p_i = \omega_i/\sum_j\omega_j`, is

.. math::

    v_n = S^2 \Bigl(\sum_i p_i^2 - \frac1K\Bigr) + \tau^2 \sum_i \frac{p_i^2}{\omega_i}
        \;\approx\; \frac{S^2 (1 - n/K) + \tau^2/\bar\omega_n}{n},

two numbers shared by all arms — the between-client variance :math:`S^2` and the device noise
per sample :math:`\tau^2` — and each arm's own weights. *What it assumes:* the clients asked are
drawn uniformly from K (without replacement); a client's noise falls as 1/samples; the
weights do not depend on which clients were drawn; :math:`S^2` and :math:`\tau^2` drift slowly as
w moves (the evidence is discounted by ``discount`` per round so that it ages).

**Fit.** Each round with n >= 2 parts gives the pair sum :math:`y = \sum_{i<j}\|g_i - g_j\|^2`
with :math:`\mathbb E\,y = n(n-1) S^2 + (n-1)\sum_i \omega_i^{-1}\,\tau^2` (exact under the
model). Normalised by the pairs, n(n − 1), and weighted by its degrees of freedom n − 1, it
enters a discounted least-squares fit of :math:`\theta = (S^2, \tau^2)`; the posterior is
approximated as :math:`\mathcal N(\hat\theta, \hat\phi A^{-1})`, A the weighted normal matrix and
:math:`\hat\phi` the weighted residual variance (so drift of w widens it).

**A second statistic of a round** (a subclass whose ``reads`` adds ``"weighted_spread"``; off here).
Where the parts' weights differ within a round, their weighted spread
:math:`Q = \sum_i\omega_i\|g_i - \bar g\|^2` weighs :math:`S^2` and :math:`\tau^2` otherwise
than the pair sum (:math:`\mathbb E\,Q`: :func:`~eegrad.spread.sums_design`), so that the two
identify both from fewer rounds; they enter the fit as two rows that share the round's n − 1
degrees of freedom. Why it is off by default: the federated studies page, *Two statistics of
a round*.

**Several local steps** (``noise_order=2``). A client that runs E local epochs on the same
:math:`\omega` samples returns an update whose noise falls faster than :math:`1/\omega`
(``studies/local_epochs_noise.py`` measures it); the second-order expansion of
:mod:`eegrad.spread` adds :math:`\kappa^2 \sum_i p_i^2/\omega_i^2` to :math:`v_n` and the
column :math:`(n-1)\sum_i\omega_i^{-2}` to the pair sum's design, and the fit is of
:math:`\theta = (S^2, \tau^2, \kappa^2)`. With one local step the model's :math:`\kappa^2` is
0 (a client's finite data, drawn without replacement, can still give the fit a small one). The arms differ in their samples per client, which separates
:math:`\kappa^2` from :math:`\tau^2`.

**n = 1** has no within-round spread; its variance is *predicted* from the other arms through the
model: :math:`v_1 = S^2(1 - 1/K) + \tau^2/\omega`. An arm's weights are learnt from its pulls;
an arm never pulled is predicted with equal weights and the samples a share of the budget buys,
fitted as a line :math:`\omega \approx a + b\,s` in the per-client spend
:math:`s_n = (B - D(n))/n` (``spend``) over every part seen.

**Choice.** Warm-up: the arms N, 2 and :math:`\approx\sqrt{2N}` once each (distinct ones, in
that order), which separates :math:`S^2` from :math:`\tau^2`. Then posterior sampling: draw
:math:`\tilde\theta` (negative components set to 0), pull :math:`\arg\min_n \tilde v_n`, ties to the
*largest* n (the safer mean).
"""

from __future__ import annotations

import numpy as np

from .model_rule import ModelRule
from .registry import register_rule

__all__ = ["SpreadThompson", "leading_arms"]


def leading_arms(value: np.ndarray, top: int, what: str, *, negate: bool = False) -> str:
    """The ``top`` arms of largest finite ``value`` (shape (N,)), in words: "what: n = 4 (0.031),
    n = 6 (0.028), …" (``negate``: the values shown are ``-value``)."""
    finite = np.flatnonzero(np.isfinite(value))
    if finite.size == 0:
        return f"{what}: not fitted yet"
    best = finite[np.argsort(-value[finite], kind="stable")][:top]
    shown = -value if negate else value
    return f"{what}: " + ", ".join(f"n = {i + 1} ({shown[i]:.3g})" for i in best)


@register_rule("spread_thompson", label="Thompson on the spread of parts")
class SpreadThompson(ModelRule):
    r"""Posterior sampling on the client-sampling model, fitted from the parts of each pull.

    Told each round's parts with :meth:`tell_parts` (a plain :meth:`tell` of the mean carries no
    spread and is refused). Its model, :attr:`model`, is a
    :class:`~eegrad.selectors.noise_model.NoiseModel` (the module's notes state it and what
    it assumes); the rule is that model, the warm-up and the least noise of a posterior draw
    (:class:`~eegrad.selectors.model_rule.ModelRule`). Memory spans rounds and iterates
    (:meth:`next_iterate` keeps it; :meth:`reset` forgets).

    Parameters
    ----------
    discount : float
        Weight per round of age of past evidence, in (0, 1]: an effective memory of about
        1/(1 − discount) rounds. Default 0.9 (how it was chosen: the federated studies page;
        ``eegrad example flower --discounts ...`` measures the choice on your problem).
    population : int or None
        K, the number of clients the n are drawn from without replacement (finite-population
        correction); None for a large population or sampling with replacement.
    spend : array_like of shape (N,), optional
        Per-client spend :math:`(B - D(n))/n` of each arm, used to predict the samples of arms not
        yet pulled. Default: proportional to 1/n.
    seed : int
        Seed for use without the simulator's streams (a user's loop or a Flower server).
    release_noise : array_like of shape (N,), optional
        Variance that a private release adds to arm n's output, known exactly (central DP:
        :math:`d(zC/n)^2`, set by :class:`~eegrad.flower.EEGradStrategy` with
        ``privacy=CentralDP(...)``); added to every arm's predicted variance. Default: none.
    noise_order : {1, 2}
        The device noise's expansion in 1/ω (:mod:`eegrad.spread`): 1, :math:`\tau^2/\omega`
        (exact for one local gradient step, FedSGD; the default); 2,
        :math:`\tau^2/\omega + \kappa^2/\omega^2`, a third parameter :math:`\kappa^2 \ge 0`
        fitted beside :math:`(S^2, \tau^2)`, for clients that take several local steps on the
        same samples (local epochs), whose update's noise falls faster than 1/ω. Told sums
        (:meth:`tell_spread_sums`), order 2 needs :math:`\sum 1/\omega_i`.
    warmup : sequence of int, optional
        The clients of each warm-up round, in order, each in 1..N (checked by :meth:`init`),
        at least one of them >= 2 (a round with a spread). Default: N, 2 and
        :math:`\approx\sqrt{2N}` (the distinct ones), which separates :math:`S^2` from
        :math:`\tau^2` (the module's notes); where you know the noise, a warm-up near the n you
        expect to ask costs less. The arms it asks are :attr:`warmup_arms` after :meth:`init`.
        A round told fewer than two parts (a driver's cap on n, failed clients) shows no spread
        and does not count as one of the warm-up's rounds: the next asks the same arm again.

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad import SpreadThompson
    >>> rule = SpreadThompson(population=20)
    >>> rule.init(1, 20, 3)
    >>> rule.ask(1)  # the warm-up starts with all 20 clients
    array([19])
    """

    def explain(self, top: int = 3) -> str | None:
        """The warm-up, or the arms of least fitted variance of the mean (the rule asks the
        least of a posterior draw)."""
        N = self._shape[1]
        if N == 1:
            return None
        if self.rounds < len(self.warmup_arms):
            return f"warm-up round {self.rounds + 1} of {len(self.warmup_arms)}"
        return leading_arms(-self.predicted()[0], top, "a posterior draw of the least "
                            "variance of the mean; by the fit", negate=True)  # fmt: skip

    def _choose(self) -> np.ndarray:
        """The least noise of a posterior draw (the spread rule's objective)."""
        return self._least_noise()
