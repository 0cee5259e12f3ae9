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
(``benchmarks/local_epochs_noise.py`` measures it); the second-order expansion of
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

import math
from typing import Any

import numpy as np

from .._validation import check_array, check_client_counts, check_integer, check_real, fail
from ..spread import check_noise_order, check_population
from .base import ProtocolError, Selector
from .registry import register_rule
from .spread_fit import SpreadFit

__all__ = ["SpreadThompson"]


def _check_warmup(warmup: Any, owner: str) -> tuple[int, ...]:
    """The warm-up's numbers of clients: integers >= 1, at least one >= 2."""
    out = check_client_counts(warmup, "warmup", owner)
    if not out or max(out) < 2:
        raise fail("warmup", owner, "at least one round of n >= 2 clients (a spread to fit)",
                   list(out))  # fmt: skip
    return out


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
class SpreadThompson(Selector):
    r"""Posterior sampling on the client-sampling model, fitted from the parts of each pull.

    Told each round's parts with :meth:`tell_parts` (a plain :meth:`tell` of the mean carries no
    spread and is refused). Memory spans rounds and iterates (:meth:`next_iterate` keeps it;
    :meth:`reset` forgets). See the module's notes for the model and what it assumes.

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

    uses_statistics = False
    reads = frozenset({"spread"})
    keeps_memory = True

    def __init__(
        self,
        discount: float = 0.9,
        population: int | None = None,
        spend: Any = None,
        seed: int = 0,
        release_noise: Any = None,
        noise_order: int = 1,
        warmup: Any = None,
    ):
        super().__init__()
        owner = "SpreadThompson"
        self.noise_order = check_noise_order(noise_order, owner, "noise_order")
        self.warmup = None if warmup is None else _check_warmup(warmup, owner)
        self.discount = check_real(discount, "discount", owner, gt=0, le=1)
        self.population = check_population(population, owner)
        self.spend = None if spend is None else check_array(spend, "spend", owner, ndim=1,
                                                              positive=True)  # fmt: skip
        self.seed = check_integer(seed, "seed", owner, ge=0)
        self.release_noise = None if release_noise is None else check_array(
            release_noise, "release_noise", owner, ndim=1)  # fmt: skip
        if self.release_noise is not None and np.any(self.release_noise < 0):
            raise fail("release_noise", owner, "variances >= 0", self.release_noise)
        self._own_rng = np.random.default_rng(self.seed)

    def get_params(self) -> dict[str, Any]:
        """``discount``, ``population``, ``spend``, ``seed`` (and ``release_noise`` and
        ``noise_order`` where not their defaults)."""
        spend = None if self.spend is None else self.spend.tolist()
        params = {"discount": self.discount, "population": self.population, "spend": spend,
                  "seed": self.seed}  # fmt: skip
        if self.release_noise is not None:
            params["release_noise"] = self.release_noise.tolist()
        if self.noise_order != 1:
            params["noise_order"] = self.noise_order
        if self.warmup is not None:
            params["warmup"] = list(self.warmup)
        return params

    # -- lifecycle -------------------------------------------------------------------------------
    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: no evidence yet; checks population >= N and one spend per arm."""
        owner = "SpreadThompson"
        if self.population is not None and N > self.population:
            raise fail("population", owner, f">= N = {N} (the most clients an arm asks)",
                       self.population)  # fmt: skip
        if self.spend is not None and self.spend.shape != (N,):
            raise fail("spend", owner, f"of length N = {N}, one spend per arm",
                       f"length {self.spend.shape[0]}")  # fmt: skip
        if self.release_noise is not None and self.release_noise.shape != (N,):
            raise fail("release_noise", owner, f"of length N = {N}, one variance per arm",
                       f"length {self.release_noise.shape[0]}")  # fmt: skip
        if self.warmup is not None:
            check_client_counts(self.warmup, "warmup", owner, most=N)
        super().init(R, N, d, truth, streams)
        self.rounds = 0  # rounds told since init, across iterates
        spend = self.spend if self.spend is not None else 1.0 / np.arange(1, N + 1)
        self._spend = np.asarray(spend, dtype=np.float64)
        #: The noise's fit from the rounds' spread (θ = (S², τ²) or (S², τ², κ²)).
        self._noise = SpreadFit(R, N, self._spend, self.population, self.noise_order,
                                self.discount)  # fmt: skip
        #: The arms (n − 1) of the warm-up's rounds, in order.
        self.warmup_arms = self._default_warmup(N) if self.warmup is None else \
            [n - 1 for n in self.warmup]  # fmt: skip

    def _default_warmup(self, N: int) -> list[int]:
        """The warm-up's arms where none is given: N, 2 and ≈ √(2N), the distinct ones."""
        warm = [N, 2, round(math.sqrt(2.0 * N))]
        return [n - 1 for i, n in enumerate(warm) if 1 <= n <= N and n not in warm[:i]]

    def next_iterate(self, truth: Any = None, streams: Any = None) -> None:
        """A new SGD iterate: the per-iterate counts restart; the evidence is kept."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: next_iterate() before init(R, N, d)")
        R, N, _ = self._shape
        self.counts = np.zeros((R, N), np.int64)
        self.t = 0
        self._pending = None
        self.truth, self.streams = truth, streams

    def reset(self) -> None:
        """Forget all evidence (same sizes)."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: reset() before init(R, N, d)")
        self.init(*self._shape, truth=self.truth, streams=self.streams)

    # -- tell --------------------------------------------------------------------------------------
    def tell(self, arms: np.ndarray, gradients: np.ndarray) -> None:
        """Refused: this rule learns from the parts of a pull (:meth:`tell_parts`)."""
        raise ProtocolError(
            f"{self!r} learns from the parts of each pull: call tell_parts(arms, parts, weights) "
            "with the n updates and their samples, not tell() with their mean."
        )

    def _observe_pairs(self, arms: np.ndarray, y: np.ndarray, weights: np.ndarray,
                       weighted_spread: np.ndarray | None = None) -> None:  # fmt: skip
        second = weighted_spread if self.uses_weighted_spread else None
        self._observe_statistic(arms, *self._noise.pair_round(arms, y, weights, second))

    def _observe_sums(self, arms: np.ndarray, spread: np.ndarray, n: np.ndarray, W: np.ndarray,
                      W2: np.ndarray, inverse_weight_sum: np.ndarray | None) -> None:  # fmt: skip
        if self.noise_order == 2 and inverse_weight_sum is None:
            raise fail("inverse_weight_sum", f"{type(self).__name__}.tell_spread_sums",
                       "the sum Σ1/ω of the parts' inverse weights, which noise_order=2 needs "
                       "(eegrad.flower.with_spread_sums sends it)", None)  # fmt: skip
        self._observe_statistic(arms, *self._noise.sums_round(arms, spread, n, W, W2,
                                                               inverse_weight_sum))  # fmt: skip

    def _observe_statistic(self, arms: np.ndarray, y: np.ndarray, x: np.ndarray,
                           coef: np.ndarray, line: np.ndarray,
                           second: tuple[np.ndarray, np.ndarray] | None = None) -> None:  # fmt: skip
        """One round's statistic y with E y = x·θ (the pair sum, or the weighted spread
        of sums), the round's variance coefficients and its spend-line sums; ``second``, a
        second statistic of the same round and its design (the weighted spread beside the
        pair sum), shares the round's degrees of freedom with the first."""
        self._advance(arms)
        self._noise.add(arms, y, x, coef, line, second)
        if np.all(line[:, 0] >= 2.0):  # a round that shows a spread (a driver's cap to one
            self.rounds += 1           # part, or failures, leave the warm-up where it was)

    # -- the fit -----------------------------------------------------------------------------------
    def fit(self) -> tuple[np.ndarray, np.ndarray]:
        r"""The fitted :math:`\hat\theta = (S^2, \tau^2)` (with ``noise_order=2``,
        :math:`(S^2, \tau^2, \kappa^2)`; unconstrained, but 0 where :meth:`free_parameters`
        holds one), shape (R, k), and its approximate posterior covariance, shape (R, k, k)
        (:meth:`SpreadFit.fit <eegrad.selectors.spread_fit.SpreadFit.fit>`)."""
        return self._noise.fit(self.free_parameters())

    def free_parameters(self) -> np.ndarray:
        r"""Which of the noise's parameters :meth:`fit` estimates, shape (R, k) bool; the
        others are held at 0 and drawn at 0 (here every one is fitted: a hook for a variant
        of the model, e.g. :math:`\kappa^2` held at 0 for clients that take one step)."""
        return np.ones(self._noise.moment.shape, dtype=bool)

    def normal_matrix(self) -> np.ndarray:
        """The fit's weighted normal matrix A, ridged (the posterior's precision up to the
        residual variance), shape (R, k, k)."""
        return self._noise.normal_matrix()

    def coefficients(self) -> np.ndarray:
        """Each arm's (Σp² − 1/K, Σp²/ω[, Σp²/ω²]), shape (R, N, k): the mean over its pulls,
        or the prediction with equal weights for arms never pulled."""
        return self._noise.coefficients()

    def equal_coefficients(self) -> np.ndarray:
        """Every arm's coefficients as predicted with equal weights, shape (R, N, k), pulled
        or not: the arms alike, for comparing them all (the weights a pull happened to have
        aside; :func:`~eegrad.spread.equal_weight_coefficients`)."""
        return self._noise.equal_coefficients()

    def predicted(self) -> np.ndarray:
        """The fitted variance v_n of every arm, shape (R, N) (posterior mean, θ̂ >= 0)."""
        return self.noise_of(self.fit()[0])

    def noise_of(self, theta: np.ndarray, equal: bool = False) -> np.ndarray:
        """Every arm's variance v_n under the noise's parameters ``theta``, shape (R, k), made
        admissible (:meth:`admissible`), shape (R, N), the release's noise added; ``equal``:
        every arm at equal weights (:meth:`equal_coefficients`), the arms alike, where a
        pull's own weights would make the arms pulled look noisier than the others."""
        return self._with_release(self._arm_scale() * self._noise.variances(
            self.admissible(theta), equal))  # fmt: skip

    def admissible(self, theta: np.ndarray) -> np.ndarray:
        """The parameters the noise is predicted from, for a fit or a posterior draw
        ``theta``, shape (R, k): each negative component set to 0 (a variance is not
        negative)."""
        return np.maximum(theta, 0.0)

    def _arm_scale(self) -> np.ndarray | float:
        """A factor on every arm's modelled noise, shape (R, N) or a scalar: 1 here (a rule
        whose arms' updates differ in gain scales them, :class:`~eegrad.ProgressThompson`)."""
        return 1.0

    def _with_release(self, v: np.ndarray) -> np.ndarray:
        return v if self.release_noise is None else v + self.release_noise[None, :]

    def estimates(self) -> dict[str, np.ndarray]:
        """``variance``: the fitted variance v_n of arm n's mean (:meth:`predicted`), once a
        round has been told (empty before)."""
        if self.rounds == 0:
            return {}
        return {"variance": self.predicted()[0]}

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

    # -- ask ---------------------------------------------------------------------------------------
    def _select(self, t: int) -> np.ndarray:
        R, N, _ = self._shape
        if N == 1:
            return np.zeros(R, dtype=np.int64)
        if self.rounds < len(self.warmup_arms):
            return np.full(R, self.warmup_arms[self.rounds], dtype=np.int64)
        v = self._sampled_noise()
        return (N - 1 - np.argmin(v[:, ::-1], axis=1)).astype(np.int64)  # ties: largest n

    def _sampled_noise(self) -> np.ndarray:
        """Every arm's noise under one posterior draw of the model's parameters, shape (R, N)
        (the draw's standard normals from the run's streams, or the rule's own seed)."""
        R = self._shape[0]
        theta, cov = self.fit()
        k = theta.shape[-1]
        if self.streams is None:
            z = self._own_rng.standard_normal((R, k))
        else:
            z = self.streams.per_block(lambda gen, sl: gen.standard_normal((sl.stop - sl.start, k)),
                                       np.empty((R, k)))  # fmt: skip
        draw = self._draw(theta, cov, z)
        free = self.free_parameters()
        return self.noise_of(draw if free.all() else np.where(free, draw, 0.0))

    @staticmethod
    def _draw(theta: np.ndarray, cov: np.ndarray, z: np.ndarray) -> np.ndarray:
        """A posterior draw θ + L z of the noise's parameters (L: the Cholesky factor of
        ``cov``; z: standard normals, shape (R, k)), before :meth:`admissible`."""
        k = theta.shape[-1]
        jitter = 1e-12 * np.maximum(np.trace(cov, axis1=1, axis2=2), 1e-300)
        L = np.linalg.cholesky(cov + jitter[:, None, None] * np.eye(k))
        return theta + np.einsum("rij,rj->ri", L, z)
