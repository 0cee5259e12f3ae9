r"""What the server sees of a round's replies, as a part :class:`~eegrad.flower.EEGradStrategy`
holds: each reply itself, only their sums, or a private release of their mean.

Three releases, one interface, each owning what it keeps (its fold of the replies,
:mod:`eegrad.flower.replies`; central DP's accounting, :mod:`eegrad.flower.privacy`):

* :class:`PlainRelease` — every reply read and folded as it comes (FedAvg's server);
* :class:`SumsRelease` (``secure_sums=True``) — the clients reply ω·u, ω, ω², ω‖u‖² and 1/ω,
  and only their sums are read, as secure aggregation reveals them;
* :class:`PrivateRelease` (``privacy=CentralDP(...)``) — updates clipped, averaged with equal
  weights, released with Gaussian noise calibrated to the round's n; each round charged to the
  accountant when its clients are asked.

A strategy asks its release, round by round: :meth:`~PlainRelease.setup` when the nodes are
known (the release's noise of every arm, which the rule is told), :meth:`~PlainRelease.charge`
once the rule has chosen n, :meth:`~PlainRelease.configure` for the messages' config,
:meth:`~PlainRelease.fold` for the round's replies, and :meth:`~PlainRelease.record` for its
record.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import ConfigRecord

from .._validation import InvalidParameterTypeError, fail
from .client import SUMS_KEY
from .privacy import CentralDP, PrivacyBudgetExhausted, PrivateRounds
from .replies import PlainFold, PrivateFold, RoundFold, SumsFold
from .state import RunState

__all__ = ["PlainRelease", "PrivateRelease", "SumsRelease", "make_release"]


class PlainRelease:
    """Every reply read and folded as it comes (the built-in mode)."""

    #: Record columns this release adds.
    columns: tuple[str, ...] = ()
    #: Whether the server sees each reply (an inner strategy that needs every reply can run).
    reveals_replies = True
    #: Whether the release adds noise of its own (the step is then damped by default).
    adds_noise = False
    #: The argument that chose this release (for error messages).
    mode = "plain"

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must share with this release."""
        return {"privacy": repr(None), "secure_sums": False}

    def setup(self, state: RunState, N: int) -> np.ndarray | None:
        """Build what the release keeps for K = ``state.num_nodes`` and arms 1..N; the noise
        it adds to every arm's mean, shape (N,) (None: none)."""
        return None

    def charge(self, state: RunState, server_round: int, n: int, present: int) -> None:
        """Account for a round of n clients sampled from ``present`` nodes (nothing here)."""

    def configure(self, config: ConfigRecord) -> None:
        """Add what the clients must know of the release to a train message's config."""

    def fold(self, state: RunState, args: tuple[Any, ...], n: int,
             keys: dict[str, Any]) -> RoundFold:  # fmt: skip
        """The round's fold of its replies (``args``: the round, the model's names and
        arrays)."""
        return PlainFold(*args, spread="spread" in state.rule.selector.reads, **keys)

    def record(self, state: RunState, n: int, replied: int) -> dict[str, Any]:
        """The round's record fields of the release."""
        return {}


class SumsRelease(PlainRelease):
    """Only the sums of the replies are read, as secure aggregation reveals them."""

    reveals_replies = False
    mode = "secure_sums"

    def fingerprint(self) -> dict[str, Any]:
        return {"privacy": repr(None), "secure_sums": True}

    def configure(self, config: ConfigRecord) -> None:
        config[SUMS_KEY] = True  # the clients reply the sums' terms

    def fold(self, state: RunState, args: tuple[Any, ...], n: int,
             keys: dict[str, Any]) -> RoundFold:  # fmt: skip
        return SumsFold(*args, **keys)


class PrivateRelease(PlainRelease):
    """Central DP calibrated to every round's own n (:mod:`eegrad.flower.privacy`).

    Parameters
    ----------
    privacy : CentralDP
        The release's clipping, noise and privacy budget.
    """

    columns = ("noise_std", "epsilon")
    reveals_replies = False
    adds_noise = True
    mode = "privacy"

    def __init__(self, privacy: CentralDP) -> None:
        self.privacy = privacy

    def fingerprint(self) -> dict[str, Any]:
        # the accounting's sensitivity: a run accounted at another (an earlier version's C,
        # not 2rC) is refused on resume, not continued with a ledger of understated events
        return {"privacy": repr(self.privacy), "secure_sums": False,
                "privacy sensitivity": "replace-one, 2rC"}

    def setup(self, state: RunState, N: int) -> np.ndarray:
        """The run's private release (:class:`~eegrad.flower.privacy.PrivateRounds`, kept in
        the state); returns :math:`d(z_n C/n)^2`, the variance it adds to arm n's mean."""
        state.private = PrivateRounds(self.privacy, N, state.num_nodes, state.streams.noise)
        return state.dim * state.private.noise_std(np.arange(1, N + 1)) ** 2

    def charge(self, state: RunState, server_round: int, n: int, present: int) -> None:
        """Compose the round's event (:meth:`~eegrad.flower.privacy.PrivateRounds.charge`); a
        round past ``max_epsilon`` withdraws the rule's pull and raises
        :class:`~eegrad.flower.privacy.PrivacyBudgetExhausted`."""
        try:
            state.private.charge(server_round, n, present=present)
        except PrivacyBudgetExhausted:
            state.rule.withdraw()
            raise

    def fold(self, state: RunState, args: tuple[Any, ...], n: int,
             keys: dict[str, Any]) -> RoundFold:  # fmt: skip
        return PrivateFold(*args, private=state.private, n=n, **keys)

    def record(self, state: RunState, n: int, replied: int) -> dict[str, Any]:
        return {"noise_std": float(state.private.noise_std(n)) if replied else "",
                "epsilon": state.private.epsilon()}


def make_release(privacy: CentralDP | None, secure_sums: bool,
                 owner: str = "EEGradStrategy") -> PlainRelease:  # fmt: skip
    """The release of ``EEGradStrategy``'s arguments: plain, sums only or private."""
    if privacy is not None and not isinstance(privacy, CentralDP):
        raise InvalidParameterTypeError(f"The 'privacy' parameter of {owner} must be a "
                                        f"CentralDP or None. Got {privacy!r} instead.")  # fmt: skip
    if secure_sums and privacy is not None:
        raise fail("secure_sums", owner, "False with privacy=CentralDP(...) (central DP "
                   "clips each update on the server, which sums alone do not allow)", True)
    if privacy is not None:
        return PrivateRelease(privacy)
    return SumsRelease() if secure_sums else PlainRelease()
