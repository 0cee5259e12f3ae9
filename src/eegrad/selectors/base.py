"""The ask/tell skeleton shared by every selection rule.

A selector is asked which arm each realization pulls next and told the vectors those arms
produced. It knows nothing of the gradients' meaning, so the same object drives the simulator
and a user's own training loop. Arms are indexed 0..N−1 (mini-batch sizes n = index + 1).

Protocol, per T-round estimate::

    selector.init(R, N, d, truth=None)   # new estimate: forget the statistics
    for t in 1..T:
        arms = selector.ask(t)           # shape (R,), int64 in 0..N-1
        selector.tell(arms, gradients)   # gradients of shape (R, d)
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, fail
from ..oracle import Truth
from ..spread import check_weights, pair_sum, weighted_mean, weighted_spread
from ..statistics import ArmStatistics
from .evidence import OPTIONAL, Outlook, RoundEvidence

__all__ = ["IndexSelector", "KernelSpec", "ProtocolError", "Selector", "has_kernel", "not_read"]


#: The value of a :attr:`Selector.run_rounds_params` parameter that stands for the run's total
#: rounds K·T (e.g. ``horizon = "KT"`` of ``memory_kl_lcb`` in a configuration).
RUN_ROUNDS = "KT"


@dataclass(frozen=True)
class KernelSpec:
    """How the compiled engine runs a rule: a rule with a compiled index returns one from
    :meth:`Selector.kernel_spec`, and the engine interprets it, so the engine needs no edit
    per rule.

    Attributes
    ----------
    kernel : str
        The name of a kernel registered with the engine
        (:func:`eegrad.engines.numba_engine.register_kernel`): ``"index"``, the per-iterate
        kernel (``numba_kernels.run_block``); ``"memory"``, the kernel of the rules with memory
        (``memory_kernels.run_memory_block``); or the name a new rule's own kernel module
        registers.
    rule : str
        The rule's name for that kernel (for the package's: among ``numba_kernels.RULE_CODES``
        or ``memory_kernels.MEMORY_CODES``).
    params : tuple of float
        The rule's numbers, in the kernel's order for that rule.
    P : ndarray of shape (R,), optional
        A per-realization number (EE-Grad's P).
    keep_stats : bool
        Whether the kernel must keep the arms' means and squared deviations.
    selector_stream : bool
        Whether the rule draws from the blocks' selector streams (posterior sampling).
    state : dict, optional
        The fit a rule with memory carries into the iterate (``MemoryRule.compiled_state``).
    """

    kernel: str
    rule: str
    params: tuple[float, ...] = ()
    P: np.ndarray | None = None
    keep_stats: bool = True
    selector_stream: bool = False
    state: dict[str, Any] | None = None


def has_kernel(cls: type) -> bool:
    """Whether the compiled engine runs this very class: it defines the method that names its
    compiled index itself (``cls.kernel_method``: :meth:`Selector.kernel_spec`, or for a family
    whose one ``kernel_spec`` asks each rule for its index, that method). A subclass that
    inherits it may change the rule, so it runs on NumPy."""
    return cls.kernel_method in cls.__dict__


class ProtocolError(InvalidParameterError):
    """The ask/tell protocol was broken (tell without ask, two tells, wrong arms...)."""


def _reads(name: str, what: str) -> property:
    """A read-only flag of a rule: whether ``name`` is in its :attr:`Selector.reads`."""
    def flag(self: Selector) -> bool:
        return name in self.reads

    flag.__doc__ = f"Whether the rule {what} (``{name!r}`` in :attr:`reads`)."
    return property(flag)


def not_read(rule: Selector, name: str, what: str) -> ProtocolError:
    """The error of telling ``rule`` what it does not read (``name``, in words ``what``)."""
    return ProtocolError(f"{rule!r} does not {what} ({name!r} is not in its reads).")


class Selector:
    """Base class of the selection rules (ask/tell over R realizations at once).

    Hyper-parameters are fixed at construction; the state (statistics of the current
    estimate) is created by :meth:`init` and cleared by :meth:`reset`.
    """

    #: Whether the rule reads the simulator's :class:`~eegrad.oracle.Truth`.
    needs_truth: bool = False
    #: Whether the rule keeps per-arm Welford statistics (rules that ignore them skip the work).
    uses_statistics: bool = True
    #: What the rule reads of a round's record and of the outlook an ask is given: a set of
    #: the names in :data:`eegrad.selectors.evidence.READS` — ``"mean"`` (the paper's rules),
    #: ``"spread"`` (the parts' spread: :class:`~eegrad.SpreadThompson`), and beside it
    #: ``"weighted_spread"``, ``"signal"``, ``"local_steps"``; before an ask ``"costs"``,
    #: ``"budget_left"``, ``"rounds_left"``. A driver computes what the rule reads, and
    #: :meth:`tell_round` refuses a record that lacks it.
    reads: frozenset[str] = frozenset({"mean"})
    #: What of :attr:`reads` the rule goes without where a driver cannot supply it (default
    #: :data:`eegrad.selectors.evidence.OPTIONAL`); a driver must supply the rest.
    goes_without: frozenset[str] = OPTIONAL
    #: Whether the rule keeps its evidence across SGD iterates (:meth:`next_iterate`).
    keeps_memory: bool = False
    #: Whether the current run may use the rule's compiled per-realization code where it has
    #: one (the rules with memory: the refit at an iterate's end and, for one realization, the
    #: round's choice); set before each estimate by its driver from the engine that runs it
    #: (:func:`~eegrad.estimate_gradient`, :class:`~eegrad.GradientEstimator`). The choices
    #: and fits are the same.
    compiled_choice: bool = False
    #: The registered name (set by :func:`~eegrad.selectors.register_rule`).
    rule_name: str
    #: Parameters that a configuration may give as :data:`RUN_ROUNDS` (``"KT"``): the total
    #: rounds of the run, K iterates of T, known when a study runs it.
    run_rounds_params: tuple[str, ...] = ()
    #: The method a class defines itself when the compiled engine runs it (``has_kernel``).
    kernel_method: str = "kernel_spec"

    def __init__(self) -> None:
        self._shape: tuple[int, int, int] | None = None
        self.truth: Truth | None = None

    # -- what the rule reads, as the drivers ask it (derived from reads) ------------------------
    uses_parts = _reads("spread", "learns from the parts of a pull: such a rule is told their "
                        "pair sum and weights, any other rule their weighted mean")
    uses_weighted_spread = _reads("weighted_spread", "reads the parts' weighted spread beside "
                                  "their pair sum")
    uses_signal = _reads("signal", "reads the signal of a pull's mean")
    uses_costs = _reads("costs", "weighs each arm's progress against its round's cost")
    uses_rounds_left = _reads("rounds_left", "weighs a round's noise against the rounds left")

    # -- lifecycle ---------------------------------------------------------------------------
    def init(self, R: int, N: int, d: int, truth: Truth | None = None, streams: Any = None) -> None:
        """Start a new T-round estimate for R realizations, N arms, dimension d.

        ``streams`` (a :class:`~eegrad._random.RealizationStreams`) gives randomised rules
        their per-block generators; rules without randomness ignore it.
        """
        self.check_truth(truth)
        self._shape = (R, N, d)
        self.truth = truth
        self.streams = streams
        self.stats = ArmStatistics(R, N if self.uses_statistics else 0, d)
        # γ_t(n), shape=(R, N): the statistics' own counts where the rule keeps statistics.
        self.counts = self.stats.count if self.uses_statistics else np.zeros((R, N), np.int64)
        self.t = 0  # rounds told so far
        self._rows = np.arange(R)
        self._pending: np.ndarray | None = None

    def check_truth(self, truth: Truth | None) -> None:
        """Raise the rule's error if it reads the simulator's truth and ``truth`` is None (a
        user's training loop has none)."""
        if self.needs_truth and truth is None:
            raise self._truth_error()

    def tell_needs(self) -> str:
        """What each round must tell the rule, at least (after :meth:`init`): ``"summary"`` —
        the squared-deviation increment (:meth:`tell_summary`); ``"gram"`` — that and the
        pulled arm's Gram row; ``"full"`` — the gradient (:meth:`tell`); ``"pairs"`` — the
        parts' pair sums and weights (:meth:`tell_parts`, :meth:`tell_pair_sums`)."""
        return "pairs" if self.uses_parts else "summary"

    @property
    def sizes(self) -> tuple[int, int, int] | None:
        """(R, N, d) of the current estimate, or None before :meth:`init`."""
        return self._shape

    def next_iterate(self, truth: Truth | None = None, streams: Any = None) -> None:
        """A new SGD iterate begins (same R, N, d). Rules without memory forget everything,
        as the paper's EE-Grad does; rules with memory keep the evidence of past iterates."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: next_iterate() before init(R, N, d)")
        self.init(*self._shape, truth=truth, streams=streams)

    def reset(self) -> None:
        """Forget all statistics (same sizes and truth)."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: reset() before init(R, N, d)")
        self.init(*self._shape, truth=self.truth, streams=self.streams)

    def min_rounds(self, N: int) -> int:
        """Smallest T for which the rule is defined with N arms."""
        return 1

    def oblivious_counts(self, T: int) -> np.ndarray | None:
        """Pulls per arm over T rounds, shape (N,), for a rule whose choices do not depend on
        what it observes (fixed, optimal, round-robin); None for an adaptive rule.

        For such a rule and Gaussian noise the T-round mean is itself Gaussian with covariance
        (Σ_n γ_n σ_n² / T²) M(w), so the simulator draws it at once (exact in distribution).
        """
        return None

    def kernel_spec(self, rounds: int) -> KernelSpec | None:
        """How the compiled engine runs the next ``rounds`` rounds of this rule (after
        :meth:`init` or :meth:`next_iterate`), or None: it has no compiled index."""
        return None

    # -- ask/tell ------------------------------------------------------------------------------
    def ask(self, t: int | None = None, *, at_least: int = 1, at_most: int | None = None,
            outlook: Outlook | None = None) -> np.ndarray:  # fmt: skip
        """Arms to pull at round t (1-based; default: the next round), shape (R,).

        ``at_least`` and ``at_most``: the least and the most n the caller can run (e.g. 2 under
        a secure aggregation that needs two parties; what the budget left affords). A choice
        outside is moved to the nearest end, and that arm is the one the rule is then told.
        ``outlook``: what the run has ahead (:class:`~eegrad.selectors.evidence.Outlook`), of
        which the rule reads what its :attr:`reads` names; a rule keeps the last told."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: ask() before init(R, N, d)")
        if self._pending is not None:
            raise ProtocolError(f"{self!r}: ask() twice without tell() for round {self.t + 1}")
        expected = self.t + 1
        if t is None:
            t = expected
        elif t != expected:
            raise ProtocolError(f"{self!r}: ask(t={t}) but the next round is t={expected}")
        if outlook is not None:
            self._look_ahead(outlook, f"{type(self).__name__}.ask")
        arms = self._select(t)
        if at_least > 1:
            arms = np.maximum(arms, at_least - 1)
        if at_most is not None:
            arms = np.minimum(arms, at_most - 1)
        self._pending = arms
        return arms

    def _check_pending(self, arms: np.ndarray, call: str) -> None:
        if self._pending is None:
            raise ProtocolError(f"{self!r}: {call}() without a pending ask()")
        if not np.array_equal(arms, self._pending):
            raise ProtocolError(f"{self!r}: {call}() with other arms than the last ask() returned")

    def tell_round(self, evidence: RoundEvidence) -> None:
        """Record the round of the last ask from its one record
        (:class:`~eegrad.selectors.evidence.RoundEvidence`): the statistic the rule learns from
        (the mean or its summary; the parts' pair sums or sums) and what else it :attr:`reads`
        (the signal, the local steps). A record that lacks what the rule reads is refused,
        naming it; fields the rule does not read are ignored."""
        self._record(evidence, "tell_round")

    def _record(self, evidence: RoundEvidence, call: str) -> None:
        """The one way a round reaches the rule, whichever ``call`` told it: the pending ask
        answered by the same arms, a record holding what the rule reads (refused naming what
        it lacks), then the record observed."""
        self._check_pending(np.asarray(evidence.arms), call)
        R, N, _ = self._shape  # type: ignore[misc]
        owner = f"{type(self).__name__}.{call}"
        evidence.check_small(R, N, owner)  # its values named before what the rule reads
        lacking = evidence.lacking(self.reads, self.goes_without)
        if "mean" in lacking and evidence.statistic in ("pairs", "sums"):
            raise ProtocolError(f"{self!r} does not learn from parts (it reads 'mean' of each "
                                f"round, which {call}() does not give): tell it their mean.")
        if lacking:
            raise ProtocolError(
                f"{self!r} reads {', '.join(repr(x) for x in lacking)} of each round, which "
                f"the record told by {call}() lacks (it gives "
                f"{evidence.given() or 'the arms alone'}).")  # fmt: skip
        self._observe_round(evidence, owner)

    def tell(self, arms: np.ndarray, gradients: np.ndarray, *, check: bool = True) -> None:
        """Record the outputs ``gradients`` (R, d) of the arms returned by the last ask.

        ``check=False`` skips the shape and finiteness checks, for callers that made them
        already (the simulator checks every oracle output once)."""
        if check:
            R, _, d = self._shape  # type: ignore[misc]
            g = np.asarray(gradients, dtype=np.float64)
            owner = f"{type(self).__name__}.tell"
            if g.shape != (R, d):
                raise fail("gradients", owner, f"of shape ({R}, {d})", g.shape)
            if not np.all(np.isfinite(g)):
                raise fail("gradients", owner, "finite (no NaN or Inf)", g)
            self._record(RoundEvidence(arms, mean=g), "tell")
            return
        # the simulator's path: its oracle's outputs are checked once, where they are drawn
        self._check_pending(arms, "tell")
        if lacking := RoundEvidence(arms, mean=gradients).lacking(self.reads, self.goes_without):
            raise ProtocolError(f"{self!r} reads {', '.join(repr(x) for x in lacking)} of each "
                                "round, which a mean alone lacks.")  # fmt: skip
        self._observe(arms, gradients)

    def tell_summary(self, arms: np.ndarray, sq_increment: np.ndarray,
                     gram_row: np.ndarray | None = None) -> None:  # fmt: skip
        r"""Record a round from its summary, for callers that keep the arms' means themselves
        (a training loop whose gradients stay on a GPU): :meth:`tell_round` with
        ``sq_increment`` (the increment :math:`(1 - 1/\gamma)\|G - m_{\text{old}}\|^2` of the
        pulled arm's :math:`\sum_i\|G_i - m\|^2`, shape (R,)) and ``gram_row`` (the pulled arm's
        row of the Gram matrix of the arms' means about a fixed reference, shape (R, N): what a
        rule with memory needs in its scalar shape)."""
        self._record(RoundEvidence(arms, sq_increment=sq_increment, gram_row=gram_row),
                     "tell_summary")

    def tell_pair_sums(self, arms: np.ndarray, pair_sums: np.ndarray, weights: np.ndarray, *,
                       noisy: bool = False, weighted_spread: Any = None,
                       **signal: Any) -> None:  # fmt: skip
        r"""Record a round from its parts' pair sums :math:`y = \sum_{i<j}\|g_i - g_j\|^2`,
        shape (R,), and weights, shape (R, m) (:mod:`eegrad.spread`): :meth:`tell_round` with
        those fields. ``noisy``: unbiased estimates from a private release, which may be
        negative. ``weighted_spread``: the same parts' :math:`Q`, shape (R,), for a rule that
        reads it; not with ``noisy``. ``signal``: the record's other fields a rule may read
        (``mean_norm2``, ``persistence``, ``local_steps``: :class:`~eegrad.selectors.evidence.
        RoundEvidence`), refused as any record where the rule reads them and they are not
        given."""
        self._record(RoundEvidence(arms, pair_sums=pair_sums, weights=weights, noisy=noisy,
                                   weighted_spread=weighted_spread, **signal), "tell_pair_sums")

    def tell_spread_sums(self, arms: np.ndarray, weighted_spread: np.ndarray, n: np.ndarray,
                         total_weight: np.ndarray, total_weight2: np.ndarray,
                         inverse_weight_sum: np.ndarray | None = None) -> None:  # fmt: skip
        r"""Record a round from sums alone, as secure aggregation reveals them
        (:class:`eegrad.spread.SpreadSums`): :meth:`tell_round` with the weighted spread
        :math:`Q`, the parts' count n, :math:`W`, :math:`W_2` and :math:`\sum 1/\omega_i` (None:
        not sent), each of shape (R,)."""
        self._record(RoundEvidence(arms, weighted_spread=weighted_spread, parts=n,
                                   total_weight=total_weight, total_weight2=total_weight2,
                                   inverse_weight_sum=inverse_weight_sum), "tell_spread_sums")

    def _observe_round(self, ev: RoundEvidence, owner: str) -> None:
        """Check the round's statistic (:attr:`RoundEvidence.statistic`) and record it. A rule
        that reads more of the record (the signal, the local steps) extends this."""
        R, N, d = self._shape  # type: ignore[misc]
        kind = ev.statistic
        if kind == "pairs":
            self._observe_pairs(ev.arms, *ev.checked_pairs(R, owner))
        elif kind == "sums":
            self._observe_sums(ev.arms, *ev.checked_sums(R, owner))
        elif kind == "mean":
            self._observe(ev.arms, ev.checked_mean(R, d, owner))
        elif kind == "summary":
            inc, row = ev.checked_summary(R, N, owner)
            if row is None:
                self._observe_summary(ev.arms, inc)
            else:
                self._observe_gram(ev.arms, inc, row)
        else:
            raise ProtocolError(f"{self!r}: the round told has no statistic (a mean, its "
                                "summary, the parts' pair sums or their sums)")  # fmt: skip

    def _observe_sums(self, arms: np.ndarray, spread: np.ndarray, n: np.ndarray, W: np.ndarray,
                      W2: np.ndarray, inverse_weight_sum: np.ndarray | None) -> None:  # fmt: skip
        raise ProtocolError(f"{self!r} does not learn from parts: tell it their mean")

    def absorb(self, counts: np.ndarray, rounds: int, mean: np.ndarray | None = None,
               sq_dev: np.ndarray | None = None) -> None:  # fmt: skip
        """Take the statistics of ``rounds`` rounds run elsewhere since :meth:`init` — by the
        compiled engine, or drawn at once for an oblivious rule: the pulls ``counts`` (R, N)
        and, for a rule that keeps statistics, the arms' means (R, N, d) and squared deviations
        (R, N). Only rules whose state is these statistics can be run elsewhere."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: absorb() before init(R, N, d)")
        self.counts[:] = counts
        self.t = rounds
        self._pending = None
        if self.uses_statistics and mean is not None:
            self.stats.mean[:] = mean
            self.stats.sq_dev[:] = sq_dev

    def tell_parts(self, arms: np.ndarray, parts: np.ndarray, weights: np.ndarray,
                   **signal: Any) -> None:  # fmt: skip
        r"""Record a pull told as its parts: the n updates whose weighted mean is the pull's
        output (federated clients, data-parallel workers), as the selector contract allows
        (docs/architecture.md, *Seams*).

        Parameters
        ----------
        arms : ndarray of shape (R,)
            The arms of the last :meth:`ask`.
        parts : ndarray of shape (R, m, d)
            Each realization's parts, padded to m with parts of weight 0 (realizations may have
            fewer parts than their arm asked for, e.g. failed clients).
        weights : ndarray of shape (R, m)
            The samples each part used, >= 0; each realization needs one > 0.

        A rule that learns from parts (``uses_parts``, e.g. :class:`~eegrad.SpreadThompson`)
        is told their pair sum :math:`\sum_{i<j}\|g_i - g_j\|^2` and weights
        (:mod:`eegrad.spread`); any other rule the weighted mean
        :math:`\sum_i \omega_i g_i / \sum_i \omega_i`, as if by :meth:`tell`. ``signal``: as
        :meth:`tell_pair_sums`'s. One record, as :meth:`tell_round`'s: refused where it lacks
        what the rule reads.
        """
        self._check_pending(arms, "tell_parts")
        R, _, d = self._shape  # type: ignore[misc]
        owner = f"{type(self).__name__}.tell_parts"
        g = np.asarray(parts, dtype=np.float64)
        if g.ndim != 3 or g.shape[0] != R or g.shape[2] != d:
            raise fail("parts", owner, f"of shape ({R}, m, {d})", g.shape)
        w = check_weights(weights, owner, g.shape[:2])
        if not np.all(np.isfinite(g)):
            raise fail("parts", owner, "finite (no NaN or Inf)", g)
        if self.uses_parts:
            q = weighted_spread(g, w) if self.uses_weighted_spread else None
            record = RoundEvidence(arms, pair_sums=pair_sum(g, w), weights=w, weighted_spread=q,
                                   **signal)  # fmt: skip
        else:
            record = RoundEvidence(arms, mean=weighted_mean(g, w), **signal)
        self._record(record, "tell_parts")

    def withdraw(self) -> None:
        """Cancel the pending ask (its round is lost: nothing is recorded)."""
        if self._pending is None:
            raise ProtocolError(f"{self!r}: withdraw() without a pending ask()")
        self._pending = None

    def _observe_pairs(self, arms: np.ndarray, y: np.ndarray, weights: np.ndarray,
                       weighted_spread: np.ndarray | None = None) -> None:  # fmt: skip
        """Record a round from its parts' summary: pair sums (R,) and weights (R, m) (and
        their weighted spread (R,), or None)."""
        raise ProtocolError(f"{self!r} does not learn from parts: tell it their mean")

    def _observe_summary(self, arms: np.ndarray, sq_increment: np.ndarray) -> None:
        """Record a round from its summary alone — the increment of Σ‖G − m‖² of the pulled
        arms — for callers that keep the arm means themselves (e.g. on a GPU)."""
        self._advance(arms)
        if self.uses_statistics:
            self.stats.sq_dev[self._rows, arms] += sq_increment

    def _advance(self, arms: np.ndarray) -> None:
        """The round's bookkeeping: the ask is answered, one more round, one more pull of each
        realization's arm."""
        self._pending = None
        self.t += 1
        self.counts[self._rows, arms] += 1

    def _observe(self, arms: np.ndarray, g: np.ndarray) -> None:
        """Record a round whose arms and gradients the caller has already checked."""
        self._pending = None
        self.t += 1
        if self.uses_statistics:
            self.stats.update(arms, g)
        else:
            self.counts[self._rows, arms] += 1

    def variance_trace(self) -> np.ndarray:
        """V_t(n) per realization and arm, shape (R, N); NaN where fewer than 2 pulls."""
        if not self.uses_statistics:
            raise ProtocolError(f"{self!r} keeps no statistics")
        return self.stats.variance_trace()

    def explain(self, top: int = 3) -> str | None:
        """Why the rule asks what it asks, in words for a run's log (the first realization's
        fitted view: its ``top`` leading arms), or None for a rule with no view to give (the
        default). It reads the rule's state and draws nothing."""
        return None

    def estimates(self) -> dict[str, np.ndarray]:
        """The rule's fitted view of every arm n = 1..N, by name, each of shape (N,) (the first
        realization's), for a driver's per-round callback or a plot: empty for a rule with no
        view (the default). It reads the rule's state and draws nothing."""
        return {}

    def predicted(self) -> np.ndarray | None:
        """The rule's fitted variance of each arm's output, shape (R, N), or None for a rule
        that fits none (the default). A rule that fits the variances as a function of n (e.g.
        :class:`~eegrad.SpreadThompson`) returns its point estimate, which a driver may read
        between rounds (:class:`~eegrad.flower.EEGradStrategy`'s ``damp_exploration``)."""
        return None

    def step_scale(self, arms: Any) -> np.ndarray | None:
        r"""The scale :math:`\rho \le 1` of a step by a round of ``arms``, shape (R,), that a
        driver damping exploration applies (:class:`~eegrad.flower.EEGradStrategy`'s
        ``damp_exploration``), or None for a rule with no view of it. Default, from
        :meth:`predicted`: :math:`\rho = \sqrt{\hat v^*/\hat v_n}`, so that a round of a noisy
        arm is no noisier than one of the arm believed best (1 where the fit is not finite or
        the arm's variance is 0; None for a rule that fits no variances). A rule with its own
        model of a step's worth overrides it (:class:`~eegrad.ProgressThompson`)."""
        fitted = self.predicted()
        if fitted is None:
            return None
        v = np.asarray(fitted, dtype=np.float64)
        rows = np.arange(v.shape[0])
        mine = v[rows, np.asarray(arms)]
        ok = np.all(np.isfinite(v), axis=1) & (mine > 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.sqrt(np.maximum(v.min(axis=1), 0.0) / mine)
        return np.where(ok, np.minimum(rho, 1.0), 1.0)

    def _look_ahead(self, outlook: Outlook, owner: str) -> None:
        """Take what the rule reads of the run's ``outlook`` before an ask (nothing, here)."""

    # -- to override --------------------------------------------------------------------------
    def _select(self, t: int) -> np.ndarray:
        raise NotImplementedError

    def _truth_error(self) -> InvalidParameterError:
        return InvalidParameterError(
            f"{self!r} needs the simulator's truth (σ_n² and S(w)), which this oracle cannot "
            "supply: give numbers for the 'oracle' constants or use a simulated oracle."
        )

    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters, as given to the constructor (for metadata and configs)."""
        return {}

    def with_release_noise(self, variances: np.ndarray) -> Selector:
        """This rule told the variance a private release adds to each arm's output, shape (N,)
        (central DP: :math:`d(z_n C/n)^2`): a new rule built from :meth:`get_params` and
        ``release_noise=variances`` where the constructor takes ``release_noise`` and none
        was given; else this rule itself (one that does not model the release)."""
        if getattr(self, "release_noise", None) is not None:
            return self
        try:
            takes = "release_noise" in inspect.signature(type(self)).parameters
        except (TypeError, ValueError):  # a constructor without a signature
            return self
        return type(self)(**{**self.get_params(), "release_noise": variances}) if takes else self

    @classmethod
    def method_name(cls, params: Mapping[str, Any]) -> str:
        """The name in tables of the rule configured with ``params`` (as given; the others
        take their defaults): its registered name. A rule whose configurations a study tells
        apart by a parameter overrides this and :meth:`method_legend`
        (:class:`eegrad.config.SelectorConfig`'s ``name`` and ``legend``)."""
        return cls.rule_name

    @classmethod
    def method_legend(cls, params: Mapping[str, Any], label: str) -> str:
        """The name in figures of the rule configured with ``params``: its registered
        ``label``."""
        return label

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


class IndexSelector(Selector):
    """Pull every arm twice (arms 1..N, then 1..N) in the first 2N rounds, then the arm of
    smallest index (ties: the smallest n). Subclasses write :meth:`index`, vectorised over
    all realizations and arms at once (shape (R, N))."""

    def min_rounds(self, N: int) -> int:
        """2N: every arm is pulled twice first (Algorithm 1)."""
        return 2 * N

    def _select(self, t: int) -> np.ndarray:
        R, N, _ = self._shape  # type: ignore[misc]
        if t <= 2 * N:
            return np.full(R, (t - 1) % N, dtype=np.int64)
        return np.argmin(self.index(t), axis=1)

    def index(self, t: int) -> np.ndarray:
        """Index of every arm at round t > 2N, shape (R, N); the smallest is pulled."""
        raise NotImplementedError
