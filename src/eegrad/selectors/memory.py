r"""Selection with memory across SGD iterates: the model, its fit and the rules' common base.

The rules themselves, :class:`~eegrad.MemoryKLLCB` and :class:`~eegrad.MemoryThompson`, are in
:mod:`eegrad.selectors.memory_rules`; their compiled fit and choice attach from the engines
(:mod:`eegrad.engines.memory_glue`).

The paper's EE-Grad forgets its evidence at every iterate, yet σ_n² does not depend on w: only
the noise's mean ∇F(w_k) and shape M(w_k) change between iterates, and all arms share them at a
given iterate. The rules here pool the evidence of all iterates under the model

.. math::

    G \mid \text{iterate } k,\ \text{arm } n \;\sim\; \mathcal N\!\left(\mu_k,\ \sigma_n^2
    \operatorname{diag}(m_k)\right),

each iterate with its own unknown mean μ_k and diagonal shape m_k, the arms' σ_n² shared. Per
(iterate, arm) they keep the count γ_{k,n}, the mean x̄_{k,n} and the per-coordinate sums of
squared deviations Q_{k,n,i} — O(K·N·d) numbers per realization, no history of gradients.

**Fit.** Maximum likelihood by block-coordinate ascent, with μ_k profiled out:

.. math::

    \mu_{k,i} = \frac{\sum_n \gamma_{k,n} \bar x_{k,n,i} / \sigma_n^2}{\sum_n \gamma_{k,n}/\sigma_n^2},
    \quad S_{k,n,i} = Q_{k,n,i} + \gamma_{k,n} (\bar x_{k,n,i} - \mu_{k,i})^2,

.. math::

    m_{k,i} = \frac{\sum_n S_{k,n,i}/\sigma_n^2}{\Gamma_k - 1}, \qquad
    \sigma_n^2 = \frac{\sum_{k,i} S_{k,n,i}/m_{k,i}}{\sum_{k,i} \nu_{k,n}}, \qquad
    \nu_{k,n} = \gamma_{k,n}\,(1 - 1/\Gamma_k),

Γ_k = Σ_n γ_{k,n}: the degree of freedom spent on μ_k is shared among the arms in proportion to
their pulls (a REML-style correction), so an arm pulled once at an iterate still contributes
through its distance to the other arms' mean. Past iterates are refitted to convergence when an
iterate ends; within an iterate each round refits the current iterate's μ, m and the σ² (the past
iterates' terms cached), which is exact block-coordinate ascent, one sweep per round.

**Large d.** With ``shape="scalar"`` (chosen by ``"auto"`` when d > 16) the model is
M_k = m_k·I: coordinates are pooled (the trace statistics), one scale per iterate — what a rule
must do when one iterate's pulls cannot estimate d scales.

**Memory and time.** Per past iterate a rule keeps its counts and squared deviations and,
for the diagonal shape, the arms' means (d <= 16 numbers each); for the scalar shape, instead
of the means, their Gram matrix about the iterate's pooled mean — N² numbers whatever d, from
which ‖x̄_{k,n} − μ_k‖² follows exactly for any weights. The ``window`` most recent iterates
(default 64) are refitted at every iterate's end; older ones are folded into fixed per-arm totals
with their scales m_k at the fit of that moment, so that a long training run costs O(window)
memory and time per iterate, not O(K).

**Changing costs.** ``discount`` < 1 weights the evidence of iterate k by discount^(K − k), so an
arm whose σ² changed is forgotten at that rate.

Only the first iterate pulls every arm twice; later iterates choose by index from their first
round, and the rounds t in ln t count across iterates.

**Engines.** On the compiled engine each round's refit, index and choice run per realization in
a Numba function (:func:`eegrad.engines.memory_kernels.memory_choice`) with the operations of
:func:`iterate_terms`, :func:`sigma2_update` and the index in the same order, so both engines give
the same pulls and iterates (the fits may differ in the last bits, as NumPy's exp and log on a
CPU with AVX-512 and the C library's do: see the engines guide); so does the refit of the past iterates at an iterate's start
(:func:`eegrad.engines.memory_kernels.refit_past`). A user's loop (R = 1,
:class:`~eegrad.GradientEstimator`) makes its choices and refits with the same functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import InvalidParameterTypeError, check_integer, check_real
from ..oracle import Truth
from ..statistics import ArmStatistics
from .base import KernelSpec, Selector, has_kernel

__all__ = ["MemoryRule", "iterate_terms", "sigma2_update"]

_SCALAR_ABOVE = 16
#: The generator argument of the compiled choice for a rule that draws nothing (never drawn).
_NO_DRAWS = np.random.default_rng(0)


def iterate_terms(count: np.ndarray, where: np.ndarray, sq: np.ndarray, s2: np.ndarray, d: int,
                  scalar: bool, gram: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One block of the fit (the module's notes), a pure function of the evidence: per iterate,
    S/m summed over coordinates and ν, shapes (R, K, N), for count (R, K, N), sq (R, K, N, d or
    1), s2 (R, N) and ``where`` the arms' means (R, K, N, d) or, with ``gram`` (scalar shape),
    their Gram matrices (R, K, N, N); ``scalar`` pools the coordinates (M_k = m_k I)."""
    prec = count / s2[:, None, :]
    total = prec.sum(axis=2)  # (R, K)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(total[..., None] > 0, prec / total[..., None], 0.0)  # (R, K, N)
    if gram:
        # ‖x̄_n − μ‖² = G_nn − 2 (G w)_n + wᵀ G w with μ = Σ_p w_p x̄_p; the sums over the arms
        # run in arm order, as the compiled fit's (memory_kernels._iterate_terms).
        N = count.shape[-1]
        gw = np.zeros_like(weight)
        for p in range(N):
            gw += where[..., p] * weight[..., None, p]
        wgw = np.zeros_like(total)
        for n in range(N):
            wgw += weight[..., n] * gw[..., n]
        dist = (np.einsum("rknn->rkn", where) - 2.0 * gw) + wgw[..., None]
        dev2 = (count * np.maximum(dist, 0.0))[..., None]  # (R, K, N, 1)
    else:
        mu = np.einsum("rkn,rknd->rkd", weight, where)
        dev2 = count[..., None] * (where - mu[:, :, None, :]) ** 2  # (R, K, N, d)
        if scalar:
            dev2 = dev2.sum(axis=-1, keepdims=True)
    S = sq + dev2  # (R, K, N, d or 1)
    gamma = count.sum(axis=2)  # Γ_k, (R, K)
    per_coord = d if scalar else 1  # dof per pull of one "coordinate" of S
    dof_k = per_coord * (gamma - 1.0)  # (R, K)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = (S / s2[:, None, :, None]).sum(axis=2) / dof_k[..., None]  # (R, K, d or 1)
        share = np.where(gamma > 1, 1.0 - 1.0 / gamma, 0.0)  # (R, K)
        nu = per_coord * count * share[..., None] * S.shape[-1]  # (R, K, N)
        num = np.where(dof_k[..., None, None] > 0, S / m[:, :, None, :], 0.0).sum(axis=-1)
    return num, nu



def sigma2_update(num: np.ndarray, dof: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """σ_n² = Σ S/m / Σ ν where there is evidence (else the previous value), normalised to a
    geometric mean of 1 (only ratios matter)."""
    ok = dof > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = np.where(ok, num / dof, previous)
    s2 = np.maximum(s2, 1e-300)
    return s2 / np.exp(np.log(s2).mean(axis=1, keepdims=True))


class MemoryRule(Selector):
    """Shared machinery of the rules with memory (see the module's notes)."""

    keeps_memory = True
    kernel_method = "_kernel_rule"  # the family's kernel_spec asks each rule for its index
    #: The compiled refit and choice (``refit_past(rule)``, ``choose(rule, t)``), attached from
    #: the engines' side (:mod:`eegrad.engines.memory_glue`, when :mod:`eegrad.engines` is
    #: imported): used where ``compiled_choice`` allows it. None: NumPy only.
    compiled: Any = None

    def __init__(
        self,
        shape: str = "auto",
        discount: float = 1.0,
        iterations: int = 25,
        window: int | None = 64,
    ):
        super().__init__()
        owner = type(self).__name__
        if shape not in ("auto", "diagonal", "scalar"):
            raise InvalidParameterTypeError(
                f"The 'shape' parameter of {owner} must be 'auto', 'diagonal' or 'scalar'. "
                f"Got {shape!r} instead."
            )
        self.shape = shape
        self.discount = check_real(discount, "discount", owner, gt=0, le=1)
        self.iterations = check_integer(iterations, "iterations", owner, ge=1)
        self.window = None if window is None else check_integer(window, "window", owner, ge=1)

    def get_params(self) -> dict[str, Any]:
        """``shape``, ``discount``, ``window``."""
        return {"shape": self.shape, "discount": self.discount, "window": self.window}

    def min_rounds(self, N: int) -> int:
        """2N: the first iterate pulls every arm twice."""
        return 2 * N

    def tell_needs(self) -> str:
        """'gram' in the scalar shape (d > 16 with 'auto'), else 'full'."""
        return "gram" if self.scalar else "full"

    # -- lifecycle -----------------------------------------------------------------------------
    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: no evidence yet (see :meth:`Selector.init`)."""
        super().init(R, N, d, truth, streams)
        self.scalar = self.shape == "scalar" or (self.shape == "auto" and d > _SCALAR_ABOVE)
        self.stats = ArmStatistics(R, N, d, per_coordinate=not self.scalar)
        self.counts = self.stats.count
        self.iterate = 0
        self.rounds_before = 0  # rounds of the past iterates
        self.sigma2 = np.ones((R, N))  # fitted σ_n², up to a common factor
        # Past iterates' evidence, weighted by discount^(age): the count, the squared deviations
        # and where the arms' means lie — the means themselves (diagonal shape, d <= 16 numbers
        # each) or, for the scalar shape, their Gram matrix about the iterate's pooled mean
        # (N² numbers, whatever d), which is all that ‖x̄_n − μ‖² needs.
        self._past_count = np.zeros((R, 0, N))
        self._past_sq = np.zeros((R, 0, N, 1 if self.scalar else d))
        self._past_where = np.zeros((R, 0, N, N) if self.scalar else (R, 0, N, d))
        # Iterates older than the window: their terms at the scales m_k of their last fit.
        self._frozen_num = np.zeros((R, N))
        self._frozen_dof = np.zeros((R, N))
        self._frozen_pulls = np.zeros((R, N))
        self._cache_pulls = np.zeros((R, N))  # pulls of the past iterates, folded ones included
        self._cache_num = np.zeros((R, N))  # Σ_{past k,i} S/m
        self._cache_dof = np.zeros((R, N))  # Σ_{past k,i} ν
        self._cur_gram: np.ndarray | None = None  # set by _observe_gram (scalar shape)
        self._scratch: tuple[np.ndarray, ...] | None = None  # of the compiled choice
        self._no_coord = np.zeros((N, 1))

    def _observe_gram(self, arms: np.ndarray, sq_increment: np.ndarray, gram_row: np.ndarray):
        """A round told by :meth:`tell_summary` with the Gram row (scalar shape)."""
        R, N, _ = self._shape
        self._observe_summary(arms, sq_increment)
        if self._cur_gram is None:
            self._cur_gram = np.zeros((R, N, N))
        self._cur_gram[self._rows, arms, :] = gram_row
        self._cur_gram[self._rows, :, arms] = gram_row

    def next_iterate(self, truth: Truth | None = None, streams: Any = None) -> None:
        """A new iterate: the current one joins the past (discounted), which is refitted."""
        if self._shape is None:
            super().next_iterate(truth, streams)  # raises the protocol error
        R, N, d = self._shape
        w = self.discount
        st = self.stats
        if self.scalar:
            count = st.count.astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.nan_to_num(count / count.sum(axis=1, keepdims=True))  # (R, N)
            if self._cur_gram is None:
                centred = st.mean - np.einsum("rn,rnd->rd", share, st.mean)[:, None, :]
                where = np.einsum("rnd,rmd->rnm", centred, centred)
            else:  # the Gram about the pooled mean, from the Gram about any reference
                G = self._cur_gram
                Gs = np.einsum("rnm,rm->rn", G, share)
                where = (G - Gs[:, :, None] - Gs[:, None, :]
                         + np.einsum("rn,rn->r", share, Gs)[:, None, None])  # fmt: skip
            cur_sq = st.sq_dev[..., None]
        else:
            where, cur_sq = st.mean, st.sq_coord
        self._past_count = np.concatenate(
            [self._past_count * w, st.count[:, None].astype(float)], axis=1
        )
        self._past_where = np.concatenate([self._past_where, where[:, None]], axis=1)
        self._past_sq = np.concatenate([self._past_sq * w, cur_sq[:, None]], axis=1)
        self._frozen_num *= w
        self._frozen_dof *= w
        self._frozen_pulls *= w
        self.rounds_before += self.t
        self.iterate += 1
        self.truth, self.streams = truth, streams
        self.stats = ArmStatistics(R, N, d, per_coordinate=not self.scalar)
        self.counts = self.stats.count
        self._cur_gram = None
        self.t = 0
        self._pending = None
        self._refit_past()

    # -- the fit ---------------------------------------------------------------------------------
    def _terms(self, count, where, sq, s2, gram=False):
        return iterate_terms(count, where, sq, s2, self._shape[2], self.scalar, gram)

    def _update_sigma2(self, num: np.ndarray, dof: np.ndarray) -> None:
        self.sigma2 = sigma2_update(num, dof, self.sigma2)

    def absorb(self, counts: np.ndarray, rounds: int, mean: np.ndarray | None = None,
               sq_dev: np.ndarray | None = None, *, sq_coord: np.ndarray | None = None,
               sigma2: np.ndarray | None = None) -> None:  # fmt: skip
        """As :meth:`Selector.absorb`, with what a compiled run of this rule also changes: the
        per-coordinate squared deviations (diagonal shape) and the fitted σ² (refitted every
        round)."""
        super().absorb(counts, rounds, mean, sq_dev)
        if sq_coord is not None and not self.scalar:
            self.stats.sq_coord[:] = sq_coord
        if sigma2 is not None:
            self.sigma2 = np.array(sigma2, dtype=np.float64)

    def compiled_state(self) -> dict[str, Any]:
        """What a compiled run of the current iterate reads (after :meth:`init` or
        :meth:`next_iterate`): the fitted σ² (R, N), the past iterates' cached terms — Σ S/m,
        Σ ν and the pulls, each (R, N) — whether the shape is scalar, whether this is the run's
        first iterate (whose first 2N rounds pull every arm twice) and the rounds before it."""
        return {"sigma2": self.sigma2.copy(), "cache_num": self._cache_num.copy(),
                "cache_dof": self._cache_dof.copy(), "cache_pulls": self._cache_pulls.copy(),
                "scalar": bool(self.scalar), "warm": self.iterate == 0,
                "rounds_before": int(self.rounds_before)}  # fmt: skip

    def pulls(self) -> np.ndarray:
        """Pulls of each arm over all iterates so far (discounted), shape (R, N)."""
        return self._cache_pulls + self.stats.count

    def _past_terms(self) -> tuple[np.ndarray, np.ndarray]:
        return self._terms(self._past_count, self._past_where, self._past_sq, self.sigma2,
                           gram=self.scalar)  # fmt: skip

    def _refit_past(self) -> None:
        if self._compiled_here():
            num, nu = self.compiled.refit_past(self)
        else:
            for _ in range(self.iterations):
                num, nu = self._past_terms()
                self._update_sigma2(self._frozen_num + num.sum(axis=1),
                                    self._frozen_dof + nu.sum(axis=1))  # fmt: skip
            num, nu = self._past_terms()
        if self.window is not None and num.shape[1] > self.window:
            # Fold the oldest iterates into fixed totals: their scales m_k stay at this fit.
            old = num.shape[1] - self.window
            self._frozen_num += num[:, :old].sum(axis=1)
            self._frozen_dof += nu[:, :old].sum(axis=1)
            self._frozen_pulls += self._past_count[:, :old].sum(axis=1)
            num, nu = num[:, old:], nu[:, old:]
            self._past_count = self._past_count[:, old:]
            self._past_where = self._past_where[:, old:]
            self._past_sq = self._past_sq[:, old:]
        self._cache_num = self._frozen_num + num.sum(axis=1)
        self._cache_dof = self._frozen_dof + nu.sum(axis=1)
        self._cache_pulls = self._frozen_pulls + self._past_count.sum(axis=1)

    def _refit_current(self) -> tuple[np.ndarray, np.ndarray]:
        """One block sweep with the current iterate; returns (σ², ν) per arm."""
        st = self.stats
        sq = st.sq_dev[:, None, :, None] if self.scalar else st.sq_coord[:, None]
        gram = self._cur_gram is not None
        where = self._cur_gram[:, None] if gram else st.mean[:, None]
        num, nu = self._terms(st.count[:, None].astype(float), where, sq, self.sigma2, gram=gram)
        # The cache holds the past terms at the σ² of the last full fit (block ascent).
        self._update_sigma2(self._cache_num + num[:, 0], self._cache_dof + nu[:, 0])
        return self.sigma2, self._cache_dof + nu[:, 0]

    # -- ask -------------------------------------------------------------------------------------
    def _select(self, t: int) -> np.ndarray:
        R, N, _ = self._shape
        if self.iterate == 0 and t <= 2 * N:
            return np.full(R, (t - 1) % N, dtype=np.int64)
        if R == 1 and self._compiled_here():
            return np.array([self.compiled.choose(self, t)], dtype=np.int64)
        s2, nu = self._refit_current()
        return np.argmin(self.index(self.rounds_before + t, s2, nu), axis=1)

    def _compiled_here(self) -> bool:
        """Whether this estimate runs the compiled fit and choice: its driver allows it
        (:attr:`compiled_choice`, set only where Numba is installed) and the compiled code is
        this very class's (a subclass that changes the rule without its own :meth:`_kernel_rule`
        runs on NumPy, as on the engine)."""
        return self.compiled_choice and self.compiled is not None and has_kernel(type(self))

    def _kernel_rule(self) -> tuple[str, tuple[float, float], bool]:
        """The compiled index: its name, its numbers (loglog, horizon or -1) and whether it
        draws from the selector streams."""
        raise NotImplementedError

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled refit and the rule's index (``_kernel_rule``, which each rule
        defines), with the fit it carries in; warns here if the ``rounds`` to come run past a
        horizon the rule was told."""
        self.check_horizon(self.rounds_before + rounds, stacklevel=5)
        name, params, sampled = self._kernel_rule()
        return KernelSpec("memory", name, params, selector_stream=sampled,
                          state=self.compiled_state())  # fmt: skip

    def check_horizon(self, t: int, stacklevel: int = 2) -> None:
        """Warn when round t is past a horizon the rule was told; a rule told none never does."""

    def _choice_generator(self) -> np.random.Generator:
        """The generator the index draws from for one realization (a rule that draws nothing:
        a generator never drawn, the compiled choice's argument)."""
        return _NO_DRAWS

    def index(self, t: int, sigma2: np.ndarray, nu: np.ndarray) -> np.ndarray:
        """The rule's index of every arm from the fit, shape (R, N); the smallest is pulled."""
        raise NotImplementedError
