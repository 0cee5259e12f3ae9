r"""Central differential privacy for a client count that changes every round.

:class:`CentralDP` makes each round of :class:`~eegrad.flower.EEGradStrategy` a Gaussian
mechanism calibrated to the round's own n (DP-FedAvg with fixed clipping, McMahan et al. 2018):

* every update :math:`u_i = w - w_i` is clipped to norm C (see below for the spread);
* the n' replies are summed with equal weights and divided by the n clients *asked* (a client that
  fails only shrinks the sum, never the divisor, so the sensitivity stays C/n);
* Gaussian noise of standard deviation :math:`zC/n` is added to every coordinate of that mean.

Flower's own DP wrappers calibrate to a fixed ``num_sampled_clients``; around a strategy that
asks 2 clients in one round and 20 in the next they would release a mean of sensitivity C/2 with
the noise of C/20, silently. :class:`~eegrad.flower.EEGradStrategy` refuses to run inside them
(:func:`refuse_fixed_n_wrappers`).

**Accounting.** The accountant's neighbours are federations that differ in one client's data
(replace-one: the clients' number is public), and the round's n are sampled without
replacement from the K nodes — what the strategy does. Under that relation the release's
sensitivity is what replacing one client's contribution can move the round's sum: each client
adds the joint vector :math:`(\hat u_i, a\|\hat u_i\|^2/C)` (below), of norm at most C, whose
two extremes :math:`\pm\hat u` with :math:`\|\hat u\| = rC` lie
:math:`\Delta = 2rC \approx 1.82\,C` apart (the spread coordinate is the same for both, and no
two admissible vectors lie farther apart: :attr:`CentralDP.sensitivity`). The noise on the sum
has SD zC, so each round composes one ``GaussianPrivacyEvent(zC/Δ, n_t, K)`` in Flower's RDP
accountant (``flwr.supercore.privacy_accounting``, dp-accounting underneath: the ``flower``
extra installs it), whose noise multiplier is, as dp-accounting defines it, the noise's SD over
the release's sensitivity under the accountant's relation. A round that samples from fewer
nodes than K (nodes that left) is composed with the sample size whose ratio over K is at least
its own (:meth:`PrivateRounds.sample_size`), so that nodes leaving never make the stated ε
smaller than the rounds spent. The event is composed when the round's clients are asked, so a
round that then gets no reply is counted too. The records carry ``noise_std`` (zC/n) and
``epsilon`` (cumulative, at ``delta``). With ``max_epsilon``, a round whose release would take ε
past it is not run: the run ends there, saying so, and the checkpoint keeps the state.

**What the rule sees.** The choice of n is public (it says which clients are asked), so it may
depend only on released data. The rules that learn from the spread of the updates are told a
spread that is part of the same Gaussian release: each client contributes the joint vector
:math:`(\hat u_i, a\|\hat u_i\|^2/C)` with :math:`a = 1/2`, whose norm is at most C when the update
is clipped to :math:`rC`, :math:`r^2 + a^2 r^4 = 1` (r ≈ 0.910). The noisy sum of the extra
coordinate and the noisy mean give an unbiased estimate of the pair sum of the clipped updates,
:math:`\hat y = n\sum_i\|\hat u_i\|^2 - \|\sum_i \hat u_i\|^2` (the noise's known second moment
subtracted), with no privacy spent beyond the round's one event; the rule's variance of arm n
includes the release's :math:`d(zC/n)^2`. Weights are equal (the samples a client used are its
own data), so under DP the rule models a per-client noise rather than a per-sample one.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, check_integer, check_real, fail
from .stops import RunStopped

__all__ = ["REPLACE_ONE_SENSITIVITY", "SPREAD_SCALE", "CentralDP", "PrivacyBudgetExhausted",
           "PrivateRounds", "calibrate_noise", "epsilon_spent", "fixed_n_wrappers",
           "gaussian_event", "least_passing_scale", "refuse_fixed_n_wrappers",
           "strategy_chain"]  # fmt: skip

#: a, the scale of the spread coordinate a‖û‖²/C in each client's joint contribution.
SPREAD_SCALE = 0.5


def _update_clip_ratio(a: float = SPREAD_SCALE) -> float:
    """r, the update clip over C: the root of r² + a²r⁴ = 1."""
    a2 = a * a
    return math.sqrt((math.sqrt(1.0 + 4.0 * a2) - 1.0) / (2.0 * a2))


#: Δ/C, the release's replace-one sensitivity over the clipping norm: 2r, r² + a²r⁴ = 1
#: (:attr:`CentralDP.sensitivity`).
REPLACE_ONE_SENSITIVITY = 2.0 * _update_clip_ratio()


def gaussian_event(z: float, n: int, population: int,
                   sensitivity: float = REPLACE_ONE_SENSITIVITY) -> Any:  # fmt: skip
    """``GaussianPrivacyEvent(z/sensitivity, n, K)``: a release of the sum of n of ``population``
    contributions with noise of SD zC, whose replace-one sensitivity is ``sensitivity`` × C,
    as the accountant defines its noise multiplier (the noise's SD over the sensitivity)."""
    from flwr.supercore.privacy_accounting import GaussianPrivacyEvent

    return GaussianPrivacyEvent(noise_multiplier=float(z) / sensitivity, sample_size=int(n),
                                population_size=int(population))  # fmt: skip


class PrivacyBudgetExhausted(RunStopped):
    """The next round's release would take the cumulative ε past ``max_epsilon``."""

    what = "the privacy budget is spent"


@dataclass(frozen=True)
class CentralDP:
    r"""Central differential privacy for :class:`~eegrad.flower.EEGradStrategy`
    (``privacy=CentralDP(...)``; the module's notes say what each round releases).

    Parameters
    ----------
    noise_multiplier : float or "auto"
        z > 0: the noise on the round's mean has standard deviation zC/n. ``"auto"`` (with
        ``max_epsilon`` and ``rounds``): a multiplier :math:`z_n` per client count, calibrated
        (:func:`calibrate_noise`) so that ``rounds`` rounds of n of the K nodes spend exactly
        ``max_epsilon`` — every n then costs the same privacy per round, and the rule's choice
        of n weighs only the variance of the round's mean, the release's
        :math:`d(z_nC/n)^2` included. (A run that mixes client counts can spend its ε a little
        faster than any single n, by the convexity of RDP; ``max_epsilon`` still ends it before
        the round that would exceed it.)
    clipping_norm : float
        C > 0, the bound on each client's contribution.
    delta : float
        δ in (0, 1), at which the cumulative ε is reported.
    max_epsilon : float, optional
        A limit on the cumulative ε, > 0: a round whose release would exceed it is not run.
    rounds : int, optional
        R >= 1, the rounds planned, for ``noise_multiplier="auto"`` (required by it, refused
        without it).
    """

    noise_multiplier: float | str
    clipping_norm: float
    delta: float
    max_epsilon: float | None = None
    rounds: int | None = None

    def __post_init__(self) -> None:
        owner = "CentralDP"
        if isinstance(self.noise_multiplier, str):
            if self.noise_multiplier != "auto":
                raise fail("noise_multiplier", owner, "a float > 0 or 'auto'",
                           self.noise_multiplier)  # fmt: skip
            if self.max_epsilon is None or self.rounds is None:
                raise fail("noise_multiplier", owner, "a float > 0 unless max_epsilon and "
                           "rounds are both given ('auto' spends max_epsilon over rounds)",
                           self.noise_multiplier)  # fmt: skip
        else:
            check_real(self.noise_multiplier, "noise_multiplier", owner, gt=0)
        check_real(self.clipping_norm, "clipping_norm", owner, gt=0)
        check_real(self.delta, "delta", owner, gt=0, lt=1)
        if self.max_epsilon is not None:
            check_real(self.max_epsilon, "max_epsilon", owner, gt=0)
        if self.rounds is not None:
            check_integer(self.rounds, "rounds", owner, ge=1)
            if self.noise_multiplier != "auto":
                raise fail("rounds", owner, "None unless noise_multiplier='auto'", self.rounds)

    def multipliers(self, N: int, population: int) -> np.ndarray:
        """z of every client count n = 1..N of ``population`` nodes, shape (N,): the given z,
        or with ``"auto"`` each :func:`calibrate_noise` (n, rounds, max_epsilon)."""
        if self.noise_multiplier != "auto":
            return np.full(N, float(self.noise_multiplier))
        z = np.empty(N)
        for n in range(1, N + 1):
            z[n - 1] = calibrate_noise(n, self.rounds, self.max_epsilon, self.delta, population,
                                       start=z[n - 2] if n > 1 else None)  # fmt: skip
        return z

    @property
    def update_clip(self) -> float:
        """rC, the norm each update is clipped to, so that the joint contribution
        (û, a‖û‖²/C) has norm at most C: r² + a²r⁴ = 1."""
        return _update_clip_ratio() * self.clipping_norm

    @property
    def sensitivity(self) -> float:
        r"""Δ = 2rC, the release's sensitivity under the accountant's replace-one neighbours:
        the most that replacing one client's joint contribution
        :math:`(\hat u, a\|\hat u\|^2/C)`, :math:`\|\hat u\| \le rC`, can move the round's
        sum. For two contributions of norms p, q at an angle, the distance is largest with
        :math:`\hat u' = -\hat u`, where it is :math:`\sqrt{(p+q)^2 + a^2(p^2-q^2)^2/C^2}`,
        increasing in both: p = q = rC gives 2rC (≈ 1.82 C; the module's notes)."""
        return REPLACE_ONE_SENSITIVITY * self.clipping_norm

    def noise_std(self, n: int | np.ndarray, z: Any = None) -> Any:
        """zC/n, the standard deviation of the noise on the mean of a round of n clients (``z``:
        the round's multiplier, by default ``noise_multiplier``)."""
        z = self._z(z)
        return z * self.clipping_norm / np.asarray(n, dtype=np.float64)

    def _z(self, z: Any) -> Any:
        if z is None:
            if self.noise_multiplier == "auto":
                raise InvalidParameterError("CentralDP('auto', ...): the multiplier depends on "
                                            "n; pass z from multipliers(N, population).")  # fmt: skip
            return float(self.noise_multiplier)
        return z

    def accountant(self, population: int) -> Any:
        """Flower's RDP accountant for this release: sampling without replacement from
        ``population`` nodes, replace-one neighbours, reported at ``delta``."""
        from flwr.supercore.privacy_accounting import (
            NeighboringRelation,
            PrivacyConfig,
            SamplingMethod,
        )
        from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

        return RdpAccountant(PrivacyConfig(
            target_delta=self.delta, population_size=int(population),
            neighboring_relation=NeighboringRelation.REPLACE_ONE,
            sampling_method=SamplingMethod.WITHOUT_REPLACEMENT,
            max_epsilon=self.max_epsilon))  # fmt: skip

    def event(self, n: int, population: int, z: float | None = None) -> Any:
        """The round's ``GaussianPrivacyEvent(zC/Δ, n, K)``: the noise's SD on the round's sum,
        zC, over the release's replace-one sensitivity Δ (:attr:`sensitivity`), as the
        accountant defines its noise multiplier (``z``: as :meth:`noise_std`)."""
        return gaussian_event(self._z(z), n, population)


@lru_cache(maxsize=1024)
def epsilon_spent(z: float, n: int, rounds: int, delta: float, population: int, *,
                  sensitivity: float = REPLACE_ONE_SENSITIVITY) -> float:  # fmt: skip
    """ε at ``delta`` after ``rounds`` releases of n of ``population`` nodes (sampled without
    replacement, replace-one neighbours: Flower's RDP accountant), each the sum of contributions
    clipped to C plus Gaussian noise of SD zC, whose replace-one sensitivity is
    ``sensitivity`` × C: :class:`CentralDP`'s release by default (Δ/C = 2r ≈ 1.82); 2.0 for a
    sum of updates clipped to C alone, as Flower's fixed-clipping DP wrappers release. Cached."""
    check_real(sensitivity, "sensitivity", "epsilon_spent", gt=0)
    acc = CentralDP(z, 1.0, delta).accountant(population)
    acc.compose(gaussian_event(z, n, population, sensitivity), rounds)
    return float(acc.get_epsilon(delta))


@lru_cache(maxsize=1024)
def calibrate_noise(n: int, rounds: int, epsilon: float, delta: float, population: int, *,
                    start: float | None = None, rtol: float = 1e-3,
                    sensitivity: float = REPLACE_ONE_SENSITIVITY) -> float:  # fmt: skip
    """The noise multiplier z (the noise's SD zC on the round's sum) with which ``rounds``
    releases of n of ``population`` nodes (sampled without replacement, replace-one neighbours:
    Flower's RDP accountant, as :class:`CentralDP` composes them; ``sensitivity``: as
    :func:`epsilon_spent`) spend ``epsilon`` at ``delta``: the least z, to a relative
    ``rtol``, whose ε is at most ``epsilon`` (:func:`least_passing_scale`, on ln ε; ε falls as
    z grows).
    ``start``: a guess (e.g. the z of n − 1, which is smaller). Cached: a process calibrates
    each setting once."""
    owner = "calibrate_noise"
    check_integer(n, "n", owner, ge=1)
    check_integer(rounds, "rounds", owner, ge=1)
    check_real(epsilon, "epsilon", owner, gt=0)
    check_integer(population, "population", owner, ge=n)
    return least_passing_scale(  # ε > 0 at every finite z; the floor only guards the log
        lambda z: math.log(max(epsilon_spent(z, n, rounds, delta, population,
                                             sensitivity=sensitivity), 1e-300) / epsilon),
        start=1.0 if start is None else float(start), rtol=rtol)  # fmt: skip


def least_passing_scale(excess: Callable[[float], float], *, start: float = 1.0,
                        rtol: float = 1e-3, floor: float = 1e-3) -> float:
    r"""The least z > 0, to a relative ``rtol``, with :math:`\mathrm{excess}(z) \le 0`, for an
    ``excess`` that falls as z grows (:func:`calibrate_noise`: :math:`\ln(\varepsilon(z) /
    \varepsilon_{\max})`): a z that passes, with the root within ``rtol`` z below it (where
    every z down to ``floor`` passes, the least z tried, below ``floor``).

    A bracket by doubling (or halving) from ``start``, then false position on (ln z, excess),
    Illinois's variant (the end that stays has its excess halved), each step aimed half
    ``rtol`` past the estimate towards the end that stayed, so that the bracket closes from
    both ends, and a bisection wherever three steps did not halve the bracket. Each call of
    ``excess`` is an RDP accountant's composition, so the calls are what counts: calibrating
    n = 1..20 of 200 nodes over 100 rounds takes 133 calls where bisection takes 240, and
    n = 1..8 of 8 nodes over 30 rounds 42 where it takes 96
    (``python benchmarks/bench_calibrate_noise.py``).
    """
    lo = hi = start
    f_hi = excess(hi)
    f_lo = f_hi
    while f_hi > 0:
        lo, f_lo = hi, f_hi
        hi *= 2.0
        f_hi = excess(hi)
    if lo == hi:  # start passes: halve down to a z that does not
        lo = hi / 2.0
        f_lo = excess(lo)
        while lo > floor and f_lo <= 0:
            hi, f_hi = lo, f_lo
            lo /= 2.0
            f_lo = excess(lo)
        if f_lo <= 0:  # passes down to the floor
            return lo
    side, widths = 0, deque([hi - lo], maxlen=4)  # the bracket's last four widths
    while hi - lo > rtol * hi:
        u_lo, u_hi = math.log(lo), math.log(hi)
        if len(widths) == 4 and widths[-1] > 0.5 * widths[0]:  # three steps without halving
            u = 0.5 * (u_lo + u_hi)
        else:  # the root's estimate, stepped half rtol past it towards the end that stayed
            u = u_hi - f_hi * (u_hi - u_lo) / (f_hi - f_lo) - 0.5 * rtol * side
        margin = 0.25 * rtol  # a step inside the bracket, off its ends
        z = math.exp(min(max(u, u_lo + margin), u_hi - margin))
        f_z = excess(z)
        if f_z > 0:
            lo, f_lo = z, f_z
            if side == -1:
                f_hi *= 0.5
            side = -1
        else:
            hi, f_hi = z, f_z
            if side == 1:
                f_lo *= 0.5
            side = 1
        widths.append(hi - lo)
    return hi


class PrivateRounds:
    """The server's side of :class:`CentralDP` in one run of K nodes and arms 1..N: each n's
    multiplier, Flower's accountant and the noise stream; each round is charged when its clients
    are asked (:meth:`charge`), its replies are clipped as they are folded (:meth:`clip`), and
    its mean is released with noise (:meth:`release`). :class:`~eegrad.flower.EEGradStrategy`
    makes one when the nodes are known.

    The rounds' events are kept as a ledger of distinct events and their counts (RDP composes
    by addition, in any order), which is what the checkpoint saves: a resumed run restores its
    accountant with one composition a distinct event (at most N a K), whatever the rounds done.
    A round's charge rebuilds the accountant from the ledger the same way, so that ε is a
    function of the ledger alone, equal to the last digit in a run and its resumed copy (adding
    an event's RDP round by round rounds otherwise than adding it times its count).
    """

    def __init__(self, dp: CentralDP, N: int, population: int, rng: np.random.Generator):
        self.dp = dp
        self.population = int(population)
        #: z of every n = 1..N (:meth:`CentralDP.multipliers`).
        self.z = dp.multipliers(N, population)
        #: Flower's RDP accountant (its state, the ledger's, goes into the strategy's checkpoint).
        self.accountant = dp.accountant(population)
        #: The stream of the released noise.
        self.rng = rng
        # (the accountant's noise multiplier, the sample size) -> the rounds composed with it
        self._ledger: dict[tuple[float, int], int] = {}
        self._version = 0  # bumped at every change of the ledger
        self._spent: tuple[int, float] | None = None  # (the ledger's version, its ε)

    def noise_std(self, n: Any) -> Any:
        """z_n C/n, the SD of the noise on the mean of a round of n clients."""
        return self.dp.noise_std(n, self.z[np.asarray(n) - 1])

    def epsilon(self) -> float:
        """The cumulative ε at δ of the releases so far (0 before the first); computed once per
        state of the accountant (once a round, not per caller)."""
        if not self._ledger:
            return 0.0
        if self._spent is None or self._spent[0] != self._version:
            self._spent = (self._version, float(self.accountant.get_epsilon(self.dp.delta)))
        return self._spent[1]

    def sample_size(self, n: int, present: int | None = None) -> int:
        r"""The sample size the round's event is composed with: n of the K nodes, or, where
        fewer nodes are connected (``present`` < K) and the round samples its n from them, the
        least size whose sampling ratio over K is at least the round's own,
        :math:`\lceil \min(n, K_t) K / K_t\rceil` (at most K): the accountant's population stays
        K, and a larger ratio never states less privacy spent than the round's."""
        if present is None or present >= self.population:
            return int(n)
        present = max(int(present), 1)
        return min(self.population, math.ceil(min(int(n), present) * self.population / present))

    def charge(self, server_round: int, n: int, present: int | None = None) -> None:
        """Compose the round's event when its clients are asked (a round that then gets no
        reply is still counted: never less private than stated), its sampling ratio that of n
        of the ``present`` nodes connected (:meth:`sample_size`); a round that would take ε past
        ``max_epsilon`` is undone and raises :class:`PrivacyBudgetExhausted`. One composition a
        distinct event (at most N), not one a round done: Flower's ``would_exceed`` replays
        every earlier round, which a run of thousands of rounds cannot afford."""
        dp = self.dp
        spent = self.epsilon()
        event = dp.event(self.sample_size(n, present), self.population, float(self.z[n - 1]))
        key = (float(event.noise_multiplier), int(event.sample_size))
        self._ledger[key] = self._ledger.get(key, 0) + 1
        self._restore()  # ε of the ledger alone: a resumed run's, to the last digit
        projected = self.epsilon()
        if dp.max_epsilon is not None and projected > dp.max_epsilon:
            self._ledger[key] -= 1
            if not self._ledger[key]:
                del self._ledger[key]
            self._restore()
            raise PrivacyBudgetExhausted(
                f"Server round {server_round} would release the mean of n = {n} clients and take "
                f"the cumulative ε to {projected:.4g}, past max_epsilon = {dp.max_epsilon:g} "
                f"(δ = {dp.delta:g}); the run ends after round {server_round - 1}, with "
                f"ε = {spent:.4g}."
            )

    def state_dict(self) -> dict[str, Any]:
        """The accountant's state (Flower's layout) with its rounds as the ledger's distinct
        events and counts: what the checkpoint saves."""
        return {**self.accountant.state_dict(), "compositions": self._compositions()}

    def _compositions(self) -> list[dict[str, Any]]:
        """The ledger in the accountant's layout: one composition a distinct event."""
        return [{"event": {"noise_multiplier": m, "sample_size": size,
                           "population_size": self.population}, "count": count}
                for (m, size), count in self._ledger.items()]  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s (a ledger of any layout: equal events are merged), one
        composition a distinct event."""
        ledger: dict[tuple[float, int], int] = {}
        for entry in state["compositions"]:
            event = entry["event"]
            key = (float(event["noise_multiplier"]), int(event["sample_size"]))
            ledger[key] = ledger.get(key, 0) + int(entry["count"])
        self._ledger = ledger
        self.accountant.load_state_dict({**state, "compositions": self._compositions()})
        self._version += 1

    def _restore(self) -> None:
        """The accountant rebuilt from the ledger (a charge undone)."""
        self.load_state_dict(self.state_dict())

    def clip(self, norm2: float) -> tuple[float, float]:
        """For an update of squared norm ``norm2``: the factor that clips it to the update clip
        rC, and its spread coordinate a‖û‖²/C (the module's notes)."""
        clip = self.dp.update_clip
        scale = 1.0 if norm2 <= clip * clip else clip / math.sqrt(norm2)
        return scale, SPREAD_SCALE * scale * scale * norm2 / self.dp.clipping_norm

    def release(self, released: list[Any], replied: int, size: int, spread_sum: float,
                n: int) -> float:  # fmt: skip
        """The round's Gaussian release, in place: ``released``, the mean of the ``replied``
        clipped updates (arrays), becomes their sum over the n asked plus noise of SD z_n C/n on
        every coordinate; returns the pair sum of the clipped updates estimated from the
        release alone (the noisy spread coordinate, noise of SD z_n C, and the released mean;
        ``size`` = d)."""
        dp = self.dp
        sd_sum = float(self.z[n - 1]) * dp.clipping_norm  # on the sum; zC/n on the mean
        norm2 = 0.0
        for g in released:
            noise = self.rng.normal(0.0, sd_sum / n, size=g.shape)
            g *= replied / n
            g += noise.astype(g.dtype)
            norm2 += float(np.sum(np.square(g, dtype=np.float64)))
        spread_noisy = spread_sum + float(self.rng.normal(0.0, sd_sum))
        # E‖n m̃‖² = ‖Σû‖² + d (zC)²;  Σ‖û‖² = (C/a) Σ a‖û‖²/C
        squares = dp.clipping_norm / SPREAD_SCALE * spread_noisy
        return replied * squares - (n * n * norm2 - size * sd_sum**2)


def fixed_n_wrappers() -> tuple[type, ...]:
    """Flower's DP wrappers, which calibrate their noise to a fixed ``num_sampled_clients``."""
    from flwr.serverapp.strategy import (
        DifferentialPrivacyClientSideAdaptiveClipping,
        DifferentialPrivacyClientSideFixedClipping,
        DifferentialPrivacyServerSideAdaptiveClipping,
        DifferentialPrivacyServerSideFixedClipping,
    )

    return (DifferentialPrivacyClientSideAdaptiveClipping,
            DifferentialPrivacyClientSideFixedClipping,
            DifferentialPrivacyServerSideAdaptiveClipping,
            DifferentialPrivacyServerSideFixedClipping)  # fmt: skip


def strategy_chain(strategy: Any, depth: int = 32) -> Iterator[Any]:
    """``strategy`` and the strategies it holds, one ``.strategy`` attribute after another (at
    most ``depth``), as Flower's wrappers hold the strategy they wrap."""
    while strategy is not None and depth > 0:
        yield strategy
        strategy, depth = getattr(strategy, "strategy", None), depth - 1


def _wraps(wrapper: Any, strategy: Any) -> bool:
    """Whether ``strategy`` is in ``wrapper``'s chain of ``.strategy`` attributes."""
    return any(inner is strategy
               for inner in strategy_chain(getattr(wrapper, "strategy", None)))  # fmt: skip


def refuse_fixed_n_wrappers(strategy: Any) -> None:
    """Raise if ``strategy`` is being called by one of Flower's DP wrappers, which calibrate
    their noise to a fixed ``num_sampled_clients``: any frame of the call stack whose ``self``
    is such a wrapper with ``strategy`` in its chain of ``.strategy`` (a subclass's own frames
    in between do not hide it)."""
    frame = sys._getframe(1)
    caller = None
    while frame is not None and caller is None:
        obj = frame.f_locals.get("self")
        if isinstance(obj, fixed_n_wrappers()) and _wraps(obj, strategy):
            caller = obj
        frame = frame.f_back
    if caller is not None:
        fixed = getattr(caller, "num_sampled_clients", "?")
        raise InvalidParameterError(
            f"EEGradStrategy is wrapped in Flower's {type(caller).__name__}, which calibrates "
            f"its noise to a fixed num_sampled_clients = {fixed}; EEGradStrategy asks a "
            "different number of clients every round (with n = 2 the mean's sensitivity is "
            f"C/2, not C/{fixed}), so the release would be miscalibrated. Use "
            "EEGradStrategy(..., privacy=CentralDP(noise_multiplier, clipping_norm, delta)), "
            "which calibrates every round to its own n and accounts for it."
        )
