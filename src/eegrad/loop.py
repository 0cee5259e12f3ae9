"""EE-Grad inside a user's own training loop: one realization, real gradients, real costs.

:class:`GradientEstimator` wraps any selector for R = 1. The user's code is the oracle: it asks
for a mini-batch size, computes that gradient however it likes (NumPy or PyTorch, any device)
and tells it back; after T rounds the estimate is the plain mean of the T gradients
(Algorithm 1)::

    est = GradientEstimator(default_selector(), arms, T=20, dim=w.size, rng=0)
    for k in range(K):
        for _ in range(est.T):
            n = est.ask()                       # a mini-batch size 1..N
            est.tell(minibatch_gradient(w, n))  # your gradient code
        w -= eta * est.result()
        est.next_iterate()                      # keeps the evidence of rules with memory

``reset()`` instead forgets everything: for a new run, or where the arms' σ_n² changed.

Statistics stay in the gradient's backend: for a PyTorch tensor the arm means are tensors on the
tensor's device (in its dtype, or in ``accumulate_dtype`` if given),
and each round moves one scalar to the host: the pulled arm's squared deviation, which the rule
needs to choose the next arm (and which is NaN or Inf exactly when the gradient is not finite).
Rules with memory need a little more: for d > 16 (their scalar shape) also the pulled arm's row
of the Gram matrix of the arm means, N numbers; for d <= 16 the gradient itself. With Numba
installed, NumPy arrays and CPU tensors are told in one compiled pass over the gradient
(:mod:`eegrad.engines.loop_kernels`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ._validation import (
    InvalidParameterTypeError,
    NonFiniteGradientError,
    check_integer,
    check_real,
    fail,
)
from .arms import Arms
from .backends import NumpyBackend, TorchBackend
from .engines import check_engine, numba_available
from .parts import PullAccumulator, flat_host
from .parts import is_torch as _is_torch
from .recorder import RoundRecorder
from .selectors.base import ProtocolError, Selector, not_read
from .selectors.evidence import Outlook, pair_fields
from .spread import SpreadSums, check_weights

__all__ = ["GradientEstimator"]


def _flatten(x: Any) -> Any:
    """A list of arrays (or tensors) as one flat vector; a single one, flat."""
    if isinstance(x, list | tuple):
        if _is_torch(x[0]):
            import torch

            return torch.cat([t.reshape(-1) for t in x])
        return np.concatenate([np.ravel(a) for a in x])
    return x.reshape(-1)


def _all_finite(x: Any) -> bool:
    if _is_torch(x):
        return bool(x.isfinite().all().item())
    return bool(np.all(np.isfinite(x)))


class GradientEstimator(RoundRecorder):
    """Ask/tell EE-Grad estimator for one realization (a user's training loop).

    Parameters
    ----------
    selector : Selector
        The rule (e.g. :func:`eegrad.default_selector`, or :class:`eegrad.EEGrad` with numbers
        for β and P). Rules that need the simulator's truth cannot run here.
    arms : Arms or int
        The mini-batch sizes 1..N (an :class:`~eegrad.Arms`, or N itself).
    T : int
        Rounds per estimate (at least 2N for the index rules).
    dim : int
        Length d of the flat gradients.
    rng : numpy.random.Generator or int
        Randomness of randomised rules (Thompson sampling); laid out as the simulator's for
        R = 1, so the same seed gives the simulator's choices.
    accumulate_dtype : dtype, optional
        Dtype of the running statistics (e.g. ``torch.float64`` for float32 gradients).
        Default: float64 for NumPy input, the tensor's dtype for PyTorch input.
    engine : {"auto", "numpy", "numba"}
        Where the round's work runs: ``"auto"`` compiled when Numba is installed (the
        ``fast`` extra), else NumPy. Compiled, the rules with memory (e.g. the default rule)
        make their per-round choice in one Numba call, and the statistics of a NumPy array or
        a CPU tensor are updated in one pass over the gradient instead of four. The choices
        are the same either way; the sums over coordinates run in another order, so the
        statistics agree to rounding, not to the bit.

    Attributes
    ----------
    counts : ndarray of shape (N,)
        Pulls of each arm in the current estimate.
    t : int
        Rounds told in the current estimate.
    """

    def __init__(
        self,
        selector: Selector,
        arms: Arms | int,
        T: int,
        dim: int,
        *,
        rng: Any = 0,
        accumulate_dtype: Any = None,
        engine: str = "auto",
    ):
        owner = "GradientEstimator"
        check_engine(engine, owner)
        if not isinstance(selector, Selector):
            raise InvalidParameterTypeError(
                f"The 'selector' parameter of {owner} must be a Selector. Got {selector!r} instead."
            )
        selector.check_truth(None)  # a training loop has no simulator's truth
        N = arms.N if isinstance(arms, Arms) else check_integer(arms, "arms", owner, ge=1)
        super().__init__(selector, N, check_integer(T, "T", owner, ge=selector.min_rounds(N)),
                         check_integer(dim, "dim", owner, ge=1), rng=rng,
                         owner=owner)  # fmt: skip
        self._compiled = engine != "numpy" and numba_available()
        self.accumulate_dtype = accumulate_dtype
        self._backend: Any = None
        self._pull: PullAccumulator | None = None  # the parts told so far by tell_part
        self._single: Any = None  # with T = 1, the round's output (no statistics are kept)
        self._steps: float | None = None  # the pending pull's local steps (tell_local_steps)
        self._rounds_left: int | None = None  # told for the next ask (tell_rounds_left)
        self.reset()

    #: The protocol's errors in this loop's words.
    awaits = "tell() of the gradient"
    when_done = "call result(), then next_iterate() for the next iterate"

    def _compiled_choice(self) -> bool:
        return self._compiled  # this loop's engine, set per estimate

    def reset(self) -> None:
        """Start the estimate of a new iterate (the selector forgets its statistics)."""
        self._begin(first=True)
        self._start()

    def _start(self) -> None:
        #: What a round sends the rule: "summary" — one scalar, the increment of Σ‖G − m‖²
        #: (rules without memory); "gram" — that and the pulled arm's row of the Gram matrix of
        #: the arms' means, N numbers (rules with memory, scalar shape); "full" — the whole
        #: gradient on the host (rules with memory, diagonal shape: d <= 16); "pairs" — the
        #: pair sum of the round's parts and their weights (rules that learn from parts, told
        #: by :meth:`tell_parts` only).
        self._mode = self.selector.tell_needs()
        if self._backend is not None:
            # Keep the buffers (N·d numbers) from estimate to estimate; cleared, not reallocated.
            self._backend.clear(centred=self._mode == "gram")
        self._pull = None
        self._single = None
        self._steps = None
        self._rounds_left = None

    def next_iterate(self) -> None:
        """Start the estimate of the next iterate of the same run: like :meth:`reset`, except
        that rules with memory (e.g. :class:`~eegrad.MemoryThompson`) keep their evidence."""
        self._begin(first=False)
        self._start()

    @property
    def counts(self) -> np.ndarray:
        """Pulls of each arm in the current estimate, shape (N,)."""
        return self.selector.counts[0].copy()

    def variance_trace(self) -> np.ndarray:
        """V_t(n) of each arm, shape (N,) (NaN for arms pulled fewer than twice)."""
        return self.selector.stats.variance_trace()[0]

    def ask(self, at_least: int = 1, at_most: int | None = None, *,
            outlook: Outlook | None = None) -> int:  # fmt: skip
        """The mini-batch size n (1..N) to compute next.

        ``at_least`` and ``at_most``: the least and the most n the caller can run (1..N; e.g.
        2 under a secure aggregation that needs two parties; what a total budget's remainder
        affords). A rule's choice outside is moved to the nearest end, and the rule is told the
        n that ran. ``outlook``: what the run has ahead, for a rule that weighs it
        (:class:`~eegrad.selectors.evidence.Outlook`: the arms' costs, the budget or the rounds
        left)."""
        if self._rounds_left is not None:  # told before this ask: part of its outlook
            outlook = replace(outlook or Outlook(), rounds_left=self._rounds_left)
        n = self._ask(at_least, at_most, outlook, "GradientEstimator.ask")
        self._rounds_left = None
        return n

    def tell(self, gradient: Any) -> None:
        """The gradient computed for the size the last :meth:`ask` returned (flat, length d)."""
        if self._pending is None:
            raise ProtocolError(
                "tell() without a pending ask(): ask() for the mini-batch size first"
            )
        shape = tuple(getattr(gradient, "shape", np.shape(gradient)))
        if shape != (self.dim,):
            raise fail("gradient", "GradientEstimator.tell",
                       f"a flat vector of length dim = {self.dim}",
                       f"shape {shape} at round {self.t + 1}")  # fmt: skip
        if self._mode == "pairs":
            raise ProtocolError(
                f"{self.selector!r} learns from the parts of each pull: call "
                "tell_parts(parts, weights) with the n updates and their samples, not tell() "
                "with their mean."
            )
        self._ensure_backend(gradient)
        self._record(self._backend.convert(gradient), None)

    def _before_restore(self, fields: dict[str, Any]) -> None:
        """Before a checkpoint is restored (:mod:`eegrad.checkpoint`): build the backend the
        checkpoint's estimator had, so that its arrays are restored in place (its means are
        views of one buffer)."""
        backend = fields.get("_backend")
        if not isinstance(backend, dict) or "__object__" not in backend:
            return
        if backend["__object__"].endswith("TorchBackend"):
            import torch

            spec = backend["fields"]
            dtype = getattr(torch, spec["out_dtype"]["__torch__"].removeprefix("torch."))
            like = torch.empty(1, dtype=dtype, device=str(spec["device"]["__torch__"]))
        else:
            like = np.empty(1)
        self._backend = None
        self._ensure_backend(like)

    def _ensure_backend(self, like: Any) -> None:
        if self._backend is not None and self.t == 0 and not self._backend.fits(like):
            self._backend = None  # a new estimate in another type or device
        if self._backend is None:
            centred = self._mode == "gram"
            # With T = 1 an estimate is its one round: no arm statistics (N·d numbers) are kept;
            # in the "full" mode the rule keeps them (its ArmStatistics), and the round is
            # folded in once, there.
            stats = self.T > 1 and self._mode != "full"
            if _is_torch(like):
                self._backend = TorchBackend(self.N, self.dim, like, self.accumulate_dtype,
                                              centred=centred, compiled=self._compiled,
                                              statistics=stats)  # fmt: skip
            else:
                self._backend = NumpyBackend(self.N, self.dim, self.accumulate_dtype,
                                              centred=centred, compiled=self._compiled,
                                              statistics=stats)  # fmt: skip
        elif _is_torch(like) != isinstance(self._backend, TorchBackend):
            raise InvalidParameterTypeError(
                "The gradients told to GradientEstimator changed type within an estimate "
                f"(round {self.t + 1}): give NumPy arrays or PyTorch tensors, not both."
            )

    def _record(self, g: Any, statistic: dict[str, Any] | None,
                finite: bool | None = None) -> None:  # fmt: skip
        """Add the round's output g (in the backend, or a pull's mean) to the statistics and
        tell the rule the round's record (:meth:`~eegrad.Selector.tell_round`): for a rule that
        learns from parts, ``statistic`` (the parts' pair sums and weights, or their sums) and
        the mean's signal where it reads it; for the others the mean or its summary. ``finite``
        where the caller knows it."""
        arm = self._pending
        cnt = int(self.selector.counts[0, arm]) + 1
        if self._mode == "full" and self.T > 1:
            # the rule's own statistics take the round (folded in once, there)
            inc = 0.0 if (_all_finite(g) if finite is None else finite) else math.nan
            row = None
        elif self.T == 1:
            # One round per estimate: the estimate is G itself, (1 − 1/γ)‖G − m‖² = 0 and the
            # Gram row of the one (centred) mean is 0 — what the statistics would give.
            ok = _all_finite(g) if finite is None else finite
            inc = 0.0 if ok else math.nan
            row = np.zeros(self.N) if self._mode == "gram" else None
        else:
            # ‖G − m‖² is finite exactly when G is (m is): the check costs no extra pass, and
            # it comes before any state changes.
            inc, row = self._backend.update(arm, g, cnt, with_row=self._mode == "gram")
        if not math.isfinite(inc):  # also for γ = 1: NaN·0 and Inf·0 are NaN
            raise NonFiniteGradientError(
                f"The gradient told at round {self.t + 1} for n = {arm + 1} contains NaN or Inf."
            )
        if self._mode == "pairs":
            fields = dict(statistic or {})
            if self.selector.uses_signal:
                fields.update(self._signal(g))
        elif self._mode == "full":
            fields = {"mean": flat_host(g)[None]}
        else:
            fields = {"sq_increment": np.array([inc]),
                      "gram_row": None if row is None else row[None]}  # fmt: skip
        self._tell(fields, self._steps)
        if self.T == 1:
            self._single = g
        self._steps = None

    def tell_local_steps(self, steps: float) -> None:
        """Tell the local steps (optimizer steps) the pending pull's parts took, their mean
        over the parts, > 0 — before the parts — for a rule that learns from the signal
        (:attr:`~eegrad.Selector.uses_signal`; the prior of its signal's curve, see
        :meth:`eegrad.ProgressThompson.steps_prior`). Optional: a pull told none leaves the
        prior as it was."""
        owner = "GradientEstimator.tell_local_steps"
        if self._pending is None:
            raise ProtocolError("tell_local_steps() without a pending ask(): ask() first")
        if "local_steps" not in self.selector.reads:
            raise not_read(self.selector, "local_steps", "learn from the clients' local steps")
        self._steps = check_real(steps, "steps", owner, gt=0)

    def tell_rounds_left(self, rounds: int) -> None:
        """Tell the rounds the run has left, the next ask's included (an integer >= 1), before
        that ask, for a rule that weighs a round's noise against them
        (:attr:`~eegrad.Selector.uses_rounds_left`: :class:`~eegrad.ProgressThompson`'s
        ``"decrease"`` objective, which then aims at the loss at the run's end). Optional: a
        rule never told charges each round's noise in full."""
        if self._pending is not None:
            raise ProtocolError("tell_rounds_left() with a pull pending: tell() its gradient "
                                "first (the rounds left inform the next ask)")  # fmt: skip
        if "rounds_left" not in self.selector.reads:
            raise not_read(self.selector, "rounds_left",
                           "weigh a round's noise against the rounds left")  # fmt: skip
        self._rounds_left = check_integer(rounds, "rounds", "GradientEstimator.tell_rounds_left",
                                          ge=1)  # fmt: skip

    def tell_parts(self, parts: Any, weights: Any) -> None:
        r"""The pull told as its parts: the n updates (clients, data-parallel workers) whose
        weighted mean is the round's gradient, with the samples each used.

        Parameters
        ----------
        parts : array or tensor of shape (n, dim), or a sequence of n flat vectors
            NumPy arrays or PyTorch tensors (kept on their device). n may be smaller than the
            size asked for (failed workers): the round uses the parts that came.
        weights : array_like of shape (n,)
            Samples used by each part, >= 0, not all 0 (0: a part left out).

        The round's gradient is :math:`\sum_i \omega_i g_i / \sum_i \omega_i`. A rule that
        learns from parts (:class:`~eegrad.SpreadThompson`) is also told their pair sum
        (one scalar from the device) and the n weights; other rules see only the mean.
        """
        owner = "GradientEstimator.tell_parts"
        if self._pending is None:
            raise ProtocolError(
                "tell_parts() without a pending ask(): ask() for the mini-batch size first"
            )
        if isinstance(parts, list | tuple) and len(parts) == 0:
            raise fail("parts", owner, "at least one part", "no parts")
        first = parts[0] if isinstance(parts, list | tuple) else parts
        self._ensure_backend(first)
        G = self._backend.stack(parts)
        shape = tuple(G.shape)
        if len(shape) != 2 or shape[1] != self.dim:
            raise fail("parts", owner, f"n flat vectors of length dim = {self.dim}",
                       f"shape {shape} at round {self.t + 1}")  # fmt: skip
        w = check_weights(weights, owner, (shape[0],))
        reads_spread = self._mode == "pairs" and self.selector.uses_weighted_spread
        mean, y, spread = self._backend.combine(G, w, spread=reads_spread)
        if not math.isfinite(y):
            bad = [i for i in range(shape[0]) if not bool(_all_finite(G[i]))]
            raise NonFiniteGradientError(
                f"The part(s) {bad} told at round {self.t + 1} for n = {self._pending + 1} "
                "contain NaN or Inf."
            )
        self._record(mean, pair_fields(y, w, weighted_spread=spread))

    def tell_part(self, part: Any, weight: float) -> None:
        r"""One part of the pending pull (a client's update, a worker's gradient), told as it
        arrives; :meth:`end_pull` tells the pull. Nothing of size n × d is kept: the parts are
        folded into running sums (:class:`eegrad.parts.PullAccumulator`), so that a pull of n
        parts costs O(d) memory, as FedAvg's server does.

        Parameters
        ----------
        part : array, tensor, or a sequence of them
            The part, flat of length dim, or a model's arrays (their sizes adding up to dim);
            NumPy arrays or PyTorch tensors, kept in their dtype and on their device.
        weight : float
            The samples it used, >= 0 (0: left out).

        The rounds' gradients and choices are those of :meth:`tell_parts` with the same parts,
        to rounding (the pair sum is Welford's running sum rather than the stack's).
        """
        owner = "GradientEstimator.tell_part"
        if self._pending is None:
            raise ProtocolError("tell_part() without a pending ask(): ask() for the mini-batch "
                                "size first")  # fmt: skip
        first = self._pull is None
        if first:
            self._pull = PullAccumulator(spread=self._mode == "pairs",
                                         engine="auto" if self._compiled else "numpy")  # fmt: skip
        try:
            self._pull.add(part, weight)
        except NonFiniteGradientError:
            raise NonFiniteGradientError(
                f"The part told at round {self.t + 1} for n = {self._pending + 1} (part "
                f"{self._pull.count + 1}) contains NaN or Inf; withdraw() the round to go on."
            ) from None
        if first and self._pull.count and self._pull.size != self.dim:
            size, self._pull = self._pull.size, None
            raise fail("part", owner, f"of dim = {self.dim} numbers in all",
                       f"{size} at round {self.t + 1}")  # fmt: skip

    def end_pull(self) -> None:
        """Tell the pending pull from the parts given to :meth:`tell_part` since the ask."""
        if self._pending is None or self._pull is None or self._pull.count == 0:
            raise ProtocolError("end_pull() without parts: ask(), then tell_part() for each "
                                "part (with a weight > 0)")  # fmt: skip
        pull, self._pull = self._pull, None
        self.tell_pull(pull)

    def tell_pull(self, pull: PullAccumulator, *, pair_sum: float | None = None,
                  weights: Any = None, noisy: bool = False) -> None:  # fmt: skip
        """Tell the pending pull from its parts' running sums, accumulated by the caller (e.g.
        a federated server folding each reply into a :class:`~eegrad.parts.PullAccumulator`
        with its model as the reference). With T = 1 the estimate is the pull's mean as it
        is — an array, or a list of arrays in the model's shapes and dtype. ``pair_sum`` and
        ``weights`` replace the pull's own for a rule that learns from parts, where the caller
        released them privately (``noisy``: an unbiased estimate, which may be negative)."""
        owner = self._check_told("tell_pull", "pull", pull, PullAccumulator)
        if pull.count == 0:
            raise fail("pull", owner, "a pull with at least one part of weight > 0", "none")
        if pull.size != self.dim:
            raise fail("pull", owner, f"parts of dim = {self.dim} numbers",
                       f"{pull.size} at round {self.t + 1}")  # fmt: skip
        if self._mode == "pairs" and not pull.spread and pair_sum is None:
            raise fail("pull", owner, f"made with spread=True: {self.selector!r} learns from "
                       "the parts' spread", "spread=False")  # fmt: skip
        statistic = None
        if self._mode == "pairs":
            spread = None  # the weighted spread, for a rule that reads it, where the parts' own
            if pair_sum is None and self.selector.uses_weighted_spread:
                spread = pull.weighted_spread()
            statistic = pair_fields(
                pull.pair_sum() if pair_sum is None else float(pair_sum),
                pull.weights if weights is None else weights, noisy=noisy,
                weighted_spread=spread)
        self._record_mean(pull.mean(), statistic)  # the accumulator checked every part

    def _check_told(self, call: str, name: str, value: Any, kind: type) -> str:
        """A pending ask, and ``value`` of type ``kind``; returns the owner's name."""
        owner = f"GradientEstimator.{call}"
        if self._pending is None:
            raise ProtocolError(f"{call}() without a pending ask(): ask() first")
        if not isinstance(value, kind):
            raise InvalidParameterTypeError(f"The {name!r} parameter of {owner} must be a "
                                            f"{kind.__name__}. Got {value!r} instead.")  # fmt: skip
        return owner

    def _record_mean(self, mean: Any, statistic: dict[str, Any] | None) -> None:
        """Record a round output already checked finite: as it is where T = 1 (an array, or a
        model's list of arrays), else flat in the backend."""
        if self.T == 1:
            self._record(mean, statistic, finite=True)
            return
        flat = _flatten(mean)
        self._ensure_backend(flat)
        self._record(self._backend.convert(flat), statistic)


    def tell_sums(self, sums: SpreadSums) -> None:
        r"""Tell the pending pull from its parts' sums alone — what a server under secure
        aggregation sees (:class:`eegrad.spread.SpreadSums`: n, :math:`\sum\omega_i`,
        :math:`\sum\omega_i^2`, :math:`\sum\omega_i u_i`, :math:`\sum\omega_i\|u_i\|^2`). The
        round's output is :math:`\sum\omega_i u_i / \sum\omega_i` (in the sum's type; a list
        of arrays stays one); a rule that learns from parts is told the weighted spread and its
        design, which equal the per-part computation's (:func:`eegrad.spread.sums_design`)."""
        owner = self._check_told("tell_sums", "sums", sums, SpreadSums)
        if not (sums.n >= 1 and sums.total_weight > 0):
            raise fail("sums", owner, "the sums of at least one part of weight > 0",
                       f"n = {sums.n}, W = {sums.total_weight}")  # fmt: skip
        mean = sums.mean()
        size = sum(int(np.size(a)) for a in (mean if isinstance(mean, list) else [mean]))
        if size != self.dim:
            raise fail("sums", owner, f"a weighted sum of dim = {self.dim} numbers", size)
        spread = sums.weighted_spread()
        if not math.isfinite(spread):
            raise NonFiniteGradientError(
                f"The sums told at round {self.t + 1} for n = {self._pending + 1} contain NaN "
                "or Inf."
            )
        self._record_mean(mean, sums.evidence(spread))

    def withdraw(self) -> None:
        """Give up the pending round (e.g. every client failed): nothing is recorded and the
        next :meth:`ask` is for the same round number. The rule's random draws for it are spent.
        """
        self._withdraw()
        self._pull = None
        self._steps = None

    def result(self) -> Any:
        """The estimate G = (1/T) Σ_t G_t = (1/T) Σ_n γ_n m_n, in the gradients' type (and
        device)."""
        if not self.done:
            raise ProtocolError(f"result() after {self.t} of T = {self.T} rounds: tell all T first")
        if self.T == 1:
            g = self._single
            return g.to(self._backend.out_dtype) if isinstance(self._backend, TorchBackend) \
                and _is_torch(g) else g
        if self._mode == "full":  # the arms' means are the rule's (float64, on the host)
            counts = self.selector.counts[0].astype(np.float64)
            return self._backend.from_host(counts @ self.selector.stats.mean[0] / self.T)
        return self._backend.result(self.selector.counts[0], self.T)
