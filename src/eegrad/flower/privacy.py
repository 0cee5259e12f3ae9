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

**Accounting.** Each round composes one ``GaussianPrivacyEvent(z, n_t, K)`` in Flower's RDP
accountant (``flwr.supercore.privacy_accounting``, dp-accounting underneath: the ``flower``
extra installs it), with sampling without replacement from the K nodes — what the strategy does
— and replace-one neighbours. The event is composed when the round's clients are asked, so a
round that then gets no reply is counted too. The records carry ``noise_std`` (zC/n) and ``epsilon`` (cumulative,
at ``delta``). With ``max_epsilon``, a round whose release would take ε past it is not run: the
run ends there, saying so, and the checkpoint keeps the state.

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
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, check_real

__all__ = ["SPREAD_SCALE", "CentralDP", "PrivacyBudgetExhausted", "refuse_fixed_n_wrappers"]

#: a, the scale of the spread coordinate a‖û‖²/C in each client's joint contribution.
SPREAD_SCALE = 0.5


class PrivacyBudgetExhausted(InvalidParameterError):
    """The next round's release would take the cumulative ε past ``max_epsilon``."""


@dataclass(frozen=True)
class CentralDP:
    r"""Central differential privacy for :class:`~eegrad.flower.EEGradStrategy`
    (``privacy=CentralDP(...)``; the module's notes say what each round releases).

    Parameters
    ----------
    noise_multiplier : float
        z > 0: the noise on the round's mean has standard deviation zC/n.
    clipping_norm : float
        C > 0, the bound on each client's contribution.
    delta : float
        δ in (0, 1), at which the cumulative ε is reported.
    max_epsilon : float, optional
        A limit on the cumulative ε, > 0: a round whose release would exceed it is not run.
    """

    noise_multiplier: float
    clipping_norm: float
    delta: float
    max_epsilon: float | None = None

    def __post_init__(self) -> None:
        owner = "CentralDP"
        check_real(self.noise_multiplier, "noise_multiplier", owner, gt=0)
        check_real(self.clipping_norm, "clipping_norm", owner, gt=0)
        check_real(self.delta, "delta", owner, gt=0, lt=1)
        if self.max_epsilon is not None:
            check_real(self.max_epsilon, "max_epsilon", owner, gt=0)

    @property
    def update_clip(self) -> float:
        """rC, the norm each update is clipped to, so that the joint contribution
        (û, a‖û‖²/C) has norm at most C: r² + a²r⁴ = 1."""
        a2 = SPREAD_SCALE**2
        r2 = (math.sqrt(1.0 + 4.0 * a2) - 1.0) / (2.0 * a2)
        return math.sqrt(r2) * self.clipping_norm

    def noise_std(self, n: int | np.ndarray) -> Any:
        """zC/n, the standard deviation of the noise on the mean of a round of n clients."""
        return self.noise_multiplier * self.clipping_norm / np.asarray(n, dtype=np.float64)

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

    def event(self, n: int, population: int) -> Any:
        """The round's ``GaussianPrivacyEvent(z, n, K)``."""
        from flwr.supercore.privacy_accounting import GaussianPrivacyEvent

        return GaussianPrivacyEvent(noise_multiplier=self.noise_multiplier, sample_size=int(n),
                                    population_size=int(population))  # fmt: skip


def _fixed_n_wrappers() -> tuple[type, ...]:
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


def refuse_fixed_n_wrappers(depth: int = 2) -> None:
    """Raise if the caller's caller is one of Flower's DP wrappers, which calibrate their noise
    to a fixed ``num_sampled_clients`` (called from the strategy's methods, which a wrapper
    calls directly)."""
    caller = sys._getframe(depth).f_locals.get("self")
    if caller is not None and isinstance(caller, _fixed_n_wrappers()):
        fixed = getattr(caller, "num_sampled_clients", "?")
        raise InvalidParameterError(
            f"EEGradStrategy is wrapped in Flower's {type(caller).__name__}, which calibrates "
            f"its noise to a fixed num_sampled_clients = {fixed}; EEGradStrategy asks a "
            "different number of clients every round (with n = 2 the mean's sensitivity is "
            f"C/2, not C/{fixed}), so the release would be miscalibrated. Use "
            "EEGradStrategy(..., privacy=CentralDP(noise_multiplier, clipping_norm, delta)), "
            "which calibrates every round to its own n and accounts for it."
        )
