r"""One round's replies, folded one at a time: the seam between the server's three reply paths.

:class:`~eegrad.flower.EEGradStrategy` reads a round's replies through a :class:`RoundFold`,
whatever the privacy mode: each reply is checked (:func:`read_reply`), folded into running
sums and dropped, so the server holds O(d) whatever n is; :meth:`RoundFold.evidence` then gives
the round's mean update :math:`\bar u` and the parts' spread as fields of the round's record,
which the rule's driver (:class:`~eegrad.flower.driver.RuleDriver`) tells the rule; the server steps
(:math:`w \leftarrow w - \eta\rho\bar u`) or a linear inner strategy is given one reply
(:func:`eegrad.flower.inner.mean_reply`). Three implementations:

* :class:`PlainFold` — the updates :math:`u_i = w - w_i` themselves, folded into a
  :class:`~eegrad.parts.PullAccumulator` (FedAvg's weights: the samples used); the rule is told
  the parts' pair sum and weights;
* :class:`SumsFold` — sums only, as secure aggregation reveals them (clients wrapped with
  :func:`~eegrad.flower.with_spread_sums` send :math:`\omega u`, ω, ω², :math:`\omega\|u\|^2`,
  1/ω); the rule is told :class:`~eegrad.spread.SpreadSums`;
* :class:`PrivateFold` — each update clipped, equal weights, the mean released with Gaussian noise
  (:class:`~eegrad.flower.privacy.PrivateRounds`); the rule is told the release alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, Message

from .._validation import InvalidParameterError, NonFiniteGradientError
from ..parts import PullAccumulator, update_norm2
from ..selectors.evidence import pair_fields
from ..spread import SpreadSums
from .client import LOCAL_STEPS_KEY, SUMS_METRICS
from .model_arrays import array_view
from .privacy import PrivateRounds

__all__ = ["ClientUpdateError", "PlainFold", "PrivateFold", "RoundFold", "SumsFold",
           "read_reply", "reply_cost", "reply_source"]  # fmt: skip


class ClientUpdateError(InvalidParameterError):
    """A client's update cannot be used (wrong arrays or shapes); the message names the node
    and the round."""


def reply_source(node: Any, server_round: Any) -> str:
    """How an error names a reply: its node and its server round."""
    return f"node {node} at server round {server_round}"


def read_reply(msg: Message, server_round: int, keys: list[str], model: list[np.ndarray], *,
               arrayrecord_key: str, weighted_by_key: str, cost_metric: str | None = "cost",
               cost_scale: float = 1.0,
               cost_required: bool = False) -> tuple[list[np.ndarray], float, float, Any]:  # fmt: skip
    """(arrays, weight, cost, metric record) of one reply, its arrays checked against the
    model's names, shapes and dtypes from their metadata and their bytes' header, and given as
    read-only views of those bytes (:func:`~eegrad.flower.model_arrays.array_view`: nothing
    copied); raises
    :class:`ClientUpdateError` naming the node and the round. The cost is ``cost_scale`` times
    the metric ``cost_metric`` (NaN where absent, unless ``cost_required``: then an error naming
    the node, the round and the metric; a negative or non-finite cost is one too)."""
    node = msg.metadata.src_node_id
    where = reply_source(node, server_round)
    content = msg.content
    rec = content.get(arrayrecord_key)
    if not isinstance(rec, ArrayRecord):
        raise ClientUpdateError(f"The reply of {where} has no ArrayRecord under {arrayrecord_key!r}.")
    if list(rec.keys()) != keys:
        raise ClientUpdateError(
            f"The update of {where} has arrays {list(rec.keys())}, expected {keys}."
        )
    arrays = []
    for k, ref in zip(keys, model, strict=True):
        a = rec[k]
        if tuple(a.shape) != ref.shape:
            raise ClientUpdateError(f"The update of {where} has array {k!r} of shape "
                                    f"{tuple(a.shape)}, expected {ref.shape}.")  # fmt: skip
        if np.dtype(a.dtype) != ref.dtype:
            raise ClientUpdateError(f"The update of {where} has array {k!r} of dtype "
                                    f"{a.dtype}, expected {ref.dtype} (the model's).")  # fmt: skip
        arrays.append(_checked_view(a, k, ref, where))
    metrics = next(iter(content.metric_records.values()), None)
    if metrics is None or weighted_by_key not in metrics:
        raise ClientUpdateError(
            f"The reply of {where} has no {weighted_by_key!r} metric (the samples used)."
        )
    weight = metrics[weighted_by_key]
    if isinstance(weight, bool) or not isinstance(weight, int | float | np.number):
        raise ClientUpdateError(
            f"The reply of {where} reports {weighted_by_key} = {weight!r}, a "
            f"{type(weight).__name__}; it must be one number > 0 (the samples used)."
        )
    weight = float(weight)
    if not np.isfinite(weight) or weight <= 0:
        raise ClientUpdateError(
            f"The reply of {where} reports {weighted_by_key} = {weight!r}; it must be > 0."
        )
    cost = reply_cost(metrics, where, cost_metric=cost_metric, cost_scale=cost_scale,
                      required=cost_required)
    return arrays, weight, cost, metrics


def _checked_view(array: Array, key: str, ref: np.ndarray, where: str) -> np.ndarray:
    """The array's bytes as a view (:func:`~eegrad.flower.model_arrays.array_view`: only the
    header is parsed), refused where they are not what its metadata says (another dtype or
    shape in the ``.npy`` header, too few bytes, no header): read as they are, they would be
    folded as other numbers."""
    try:
        view = array_view(array)
    except (ValueError, TypeError, EOFError) as err:
        raise ClientUpdateError(
            f"The update of {where} has array {key!r} whose bytes cannot be read as its "
            f"metadata says ({ref.dtype}, shape {ref.shape}): {err}."
        ) from None
    if view.dtype != ref.dtype or view.shape != ref.shape:
        raise ClientUpdateError(
            f"The update of {where} has array {key!r} whose bytes hold {view.dtype}, shape "
            f"{view.shape}, where its metadata says {ref.dtype}, shape {ref.shape}: the client "
            "built its Array from other numbers than it declares."
        )
    return view


def reply_local_steps(metrics: Any, where: str) -> float:
    """A reply's reported local steps (metric ``local-steps``): NaN where absent (the rule then
    keeps its prior as it was); a value that is not finite and > 0 is an error naming ``where``
    — the node and the round."""
    if LOCAL_STEPS_KEY not in metrics:
        return float("nan")
    steps = float(metrics[LOCAL_STEPS_KEY])
    if not math.isfinite(steps) or steps <= 0:
        raise ClientUpdateError(
            f"The reply of {where} reports {LOCAL_STEPS_KEY} = {steps!r}; it must be finite and "
            "> 0 (the local optimizer steps its client took)."
        )
    return steps


def reply_cost(metrics: Any, where: str, *, cost_metric: str | None = "cost",
               cost_scale: float = 1.0, required: bool = False) -> float:  # fmt: skip
    """A reply's cost: ``cost_scale`` times its metric ``cost_metric`` (NaN where absent, unless
    ``required``: then an error naming ``where`` — the node and the round — and the metric);
    a negative or non-finite cost is an error naming ``where``. ``cost_metric=None``: every
    reply costs ``cost_scale`` (a client's training counts as one)."""
    if cost_metric is None:
        return float(cost_scale)
    if cost_metric not in metrics:
        if required:
            carried = sorted(metrics.keys())
            hint = ("choose_clients(..., unit='samples') (EEGradStrategy's cost_metric="
                    "'num-examples', with cost_scale the cost of one sample) counts the samples "
                    "each client trained on" if "num-examples" in carried else
                    f"choose_clients(..., unit=) (EEGradStrategy's cost_metric=) one of "
                    f"{carried}, or unit='trainings' (cost_metric=None): each reply counts "
                    "one")  # fmt: skip
            raise ClientUpdateError(
                f"The reply of {where} has no {cost_metric!r} metric: with a total budget every "
                f"client reports what its training cost (cost_metric={cost_metric!r}). Its "
                f"metrics are {carried}; {hint}."
            )
        return float("nan")
    cost = cost_scale * float(metrics[cost_metric])
    if not np.isfinite(cost) or cost < 0:
        raise ClientUpdateError(
            f"The reply of {where} reports a cost of {cost!r} ({cost_metric!r} × {cost_scale:g});"
            " it must be finite and >= 0."
        )
    return cost


class RoundFold:
    """One round's replies folded as they come (the module's notes).

    Parameters
    ----------
    server_round : int
        The round (for the errors' messages).
    keys, model : list
        The model's array names and arrays (the round's w, in their dtypes).
    arrayrecord_key, weighted_by_key : str
        Where a reply holds its arrays and its weight.
    cost : dict, optional
        How a reply's cost is read (:func:`read_reply`'s ``cost_metric``, ``cost_scale``,
        ``cost_required``).
    """

    #: Whether the clients' reported costs are read (not under central DP, where they would be
    #: an unnoised release of the clients' data).
    reveals_costs = True
    #: Whether the replies' reported local steps are read (:meth:`local_steps`).
    reads_local_steps = False

    def __init__(self, server_round: int, keys: list[str], model: list[np.ndarray], *,
                 arrayrecord_key: str, weighted_by_key: str,
                 cost: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.server_round = server_round
        self.keys, self.model = keys, model
        self._keys = {"arrayrecord_key": arrayrecord_key, "weighted_by_key": weighted_by_key,
                      **(cost or {})}  # fmt: skip
        self.weighted_by_key = weighted_by_key
        #: Each folded reply's reported cost (NaN where it reported none), by node id.
        self.node_costs: dict[int, float] = {}
        self._metric_sums: dict[str, Any] = {}
        self._metric_weights: dict[str, float] = {}  # the weights of the replies with each
        # the first reply's metrics (name -> None for a number, the length of a list) and node
        self._metric_kinds: dict[str, int | None] | None = None
        self._metric_first: Any = None

    @property
    def costs(self) -> list[float]:
        """The folded replies' reported costs (NaN where a reply reported none)."""
        return list(self.node_costs.values())

    @property
    def replied(self) -> int:
        """The replies folded."""
        return len(self.node_costs)

    def _read(self, msg: Message) -> tuple[list[Array], float, float, Any]:
        out = read_reply(msg, self.server_round, self.keys, self.model, **self._keys)
        self.node_costs[int(msg.metadata.src_node_id)] = out[2]
        return out

    def local_steps(self) -> float | None:
        """The mean of the replies' reported local steps, where every folded reply reported
        them (None otherwise, and where the path reads no client metric)."""
        return None

    def _inconsistent(self, msg: Message, kinds: dict[str, int | None],
                      key: str | None = None) -> ClientUpdateError:  # fmt: skip
        """The error of a reply whose metrics differ from the round's first reply's: a mean
        over some replies, divided by all their weights, would be diluted (Flower's FedAvg
        refuses such replies too)."""
        first = dict(self._metric_kinds or {})
        if key is not None:  # an optional metric in two shapes
            first.setdefault(key, None if kinds[key] is not None else -1)
        missing = sorted(set(first) - set(kinds))
        extra = sorted(set(kinds) - set(first))

        def kind(n: int | None) -> str:
            return "a number" if n is None else "a list" if n < 0 else f"a list of {n}"

        if missing or extra:
            what = (f"has no {missing[0]!r}" if missing else f"has {extra[0]!r}") + \
                f", which the reply of node {self._metric_first} " + \
                ("has" if missing else "has not")  # fmt: skip
        else:
            k = next(k for k in first if first[k] != kinds[k])
            what = (f"reports {k!r} as {kind(kinds[k])}, where node {self._metric_first} "
                    f"reports {kind(first[k])}")
        return ClientUpdateError(
            f"The reply of {self._source(msg)} {what}: every client of a round must report the "
            "same metrics (their weighted means are aggregated, as Flower's FedAvg does); "
            "report each metric from every client, in one shape, or from none."
        )

    def _source(self, msg: Message) -> str:
        """How an error names ``msg``: its node and the round (:func:`reply_source`)."""
        return reply_source(msg.metadata.src_node_id, self.server_round)

    def _nonfinite(self, msg: Message, arrays: Sequence[Any] = ()) -> NonFiniteGradientError:
        """The error of a reply whose update is not finite — or is finite, but so large that its
        squared norm overflows float64 (where ``arrays`` show that)."""
        if arrays and all(np.all(np.isfinite(a)) for a in arrays):
            return NonFiniteGradientError(
                f"The update of {self._source(msg)} is finite but too large: its squared norm "
                "overflows float64 (above about 1e308); such an update cannot be averaged."
            )
        return NonFiniteGradientError(
            f"The update of {self._source(msg)} contains NaN or Inf."
        )

    def add(self, msg: Message) -> None:
        """Fold one reply (read, folded and dropped)."""
        raise NotImplementedError

    def evidence(self, reads: frozenset[str]) -> tuple[list[Any], dict[str, Any]]:
        """The round (at least one reply folded): its mean update in the model's arrays, and
        the parts' spread as fields of its record (:class:`~eegrad.selectors.evidence.
        RoundEvidence`), of which the rule ``reads`` what it names."""
        raise NotImplementedError

    @property
    def total_weight(self) -> float:
        """The round's total weight (the mean's denominator)."""
        raise NotImplementedError

    def client_metrics(self) -> dict[str, Any]:
        """The replies' other metrics, weighted means by their weights as Flower's
        ``aggregate_metricrecords`` makes them (none where the path reveals only a mean); a
        metric of eegrad's own that only some replies report (``local-steps``, the cost), a
        mean over those that do."""
        out = {}
        for k, v in self._metric_sums.items():
            W = self._metric_weights[k]
            out[k] = [x / W for x in v] if isinstance(v, list) else v / W
        return out

    def _add_metrics(self, metrics: Any, weight: float, msg: Message) -> None:
        optional = {LOCAL_STEPS_KEY, self._keys.get("cost_metric")}  # eegrad's, read apart
        kinds = {k: len(v) if isinstance(v, list) else None for k, v in metrics.items()
                 if k != self.weighted_by_key and k not in optional}  # fmt: skip
        if self._metric_kinds is None:
            self._metric_kinds, self._metric_first = kinds, msg.metadata.src_node_id
        elif kinds != self._metric_kinds:
            raise self._inconsistent(msg, kinds)
        for k, v in metrics.items():
            if k == self.weighted_by_key:
                continue
            old = self._metric_sums.get(k)
            if isinstance(v, list) or isinstance(old, list):
                if not (isinstance(v, list) and (old is None or len(old) == len(v))):
                    raise self._inconsistent(msg, {**kinds, k: len(v) if isinstance(v, list)
                                                   else None}, key=k)  # fmt: skip
                self._metric_sums[k] = [weight * x for x in v] if old is None else \
                    [o + weight * x for o, x in zip(old, v, strict=True)]  # fmt: skip
            else:
                self._metric_sums[k] = (0.0 if old is None else old) + weight * v
            self._metric_weights[k] = self._metric_weights.get(k, 0.0) + weight


class PlainFold(RoundFold):
    """The updates themselves, folded into a :class:`~eegrad.parts.PullAccumulator` (one pass
    over each reply in the model's dtype, float64 scalars; no n × d stack). ``spread``: whether
    the rule learns from the parts' spread."""

    reads_local_steps = True

    def __init__(self, *args: Any, spread: bool = True, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.pull = PullAccumulator(reference=self.model, spread=spread)
        # The replies' reported local steps: their sum, and the replies folded and those that
        # reported them (a running sum: the fold's memory does not grow with n).
        self._steps_sum, self._replies, self._reported = 0.0, 0, 0

    @property
    def total_weight(self) -> float:
        return self.pull.total_weight

    def add(self, msg: Message) -> None:
        arrays, weight, _, metrics = self._read(msg)
        steps = reply_local_steps(metrics, self._source(msg))
        self._replies += 1
        if math.isfinite(steps):
            self._steps_sum += steps
            self._reported += 1
        try:
            self.pull.add(arrays, weight)
        except NonFiniteGradientError:
            raise self._nonfinite(msg, arrays) from None
        self._add_metrics(metrics, weight, msg)

    def local_steps(self) -> float | None:
        if self._replies == 0 or self._reported < self._replies:
            return None
        return self._steps_sum / self._replies

    def evidence(self, reads: frozenset[str]) -> tuple[list[Any], dict[str, Any]]:
        pull = self.pull
        if not pull.spread:
            return pull.mean(), {}
        spread = pull.weighted_spread() if "weighted_spread" in reads else None
        return pull.mean(), pair_fields(pull.pair_sum(), pull.weights, weighted_spread=spread)


class SumsFold(RoundFold):
    """Sums only, as secure aggregation reveals them: the replies of clients wrapped with
    :func:`~eegrad.flower.with_spread_sums` (arrays ω·u, metrics ω, ω², ω‖u‖², 1/ω) are added
    up and nothing else of a reply is read. A non-finite reply is seen only in the sum, so its
    error names the round, not the node."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._total: list[np.ndarray] | None = None
        self._scalars = np.zeros(5)  # n, W, W2, Σω‖u‖², Σ1/ω

    @property
    def total_weight(self) -> float:
        return float(self._scalars[1])

    def add(self, msg: Message) -> None:
        arrays, weight, _, metrics = self._read(msg)
        missing = [k for k in SUMS_METRICS if k not in metrics]
        if missing:
            raise ClientUpdateError(
                f"The reply of {self._source(msg)} has no {missing[0]!r}: with secure_sums=True "
                "the clients' train function must be wrapped with "
                "eegrad.flower.with_spread_sums."
            )
        self._total = [v.astype(v.dtype, copy=True) for v in arrays] if self._total is None \
            else [np.add(t, v, out=t) for t, v in zip(self._total, arrays, strict=True)]  # fmt: skip
        self._scalars += [1.0, weight, *(float(metrics[k]) for k in SUMS_METRICS)]

    def sums(self) -> SpreadSums:
        """The round's :class:`~eegrad.spread.SpreadSums`; raises naming the round if they hold
        NaN or Inf."""
        return self._checked()[0]

    def _checked(self) -> tuple[SpreadSums, float]:
        """The round's sums and their weighted spread Q (one pass over the sum), checked
        finite."""
        s = self._scalars
        sums = SpreadSums(n=int(s[0]), total_weight=float(s[1]), total_weight2=float(s[2]),
                          weighted_sum=self._total, weighted_squares=float(s[3]),
                          inverse_weight_sum=float(s[4]))  # fmt: skip
        spread = sums.weighted_spread()
        if not (math.isfinite(spread) and all(np.all(np.isfinite(t)) for t in self._total)):
            raise NonFiniteGradientError(
                f"The sum of the replies at server round {self.server_round} contains NaN or "
                "Inf (with secure sums the node cannot be named)."
            )
        return sums, spread

    def evidence(self, reads: frozenset[str]) -> tuple[list[Any], dict[str, Any]]:
        sums, spread = self._checked()
        return sums.mean(), sums.evidence(spread)

    def client_metrics(self) -> dict[str, Any]:
        return {}  # the sums protocol's scalars are its own; nothing else is read


class PrivateFold(RoundFold):
    """Central DP (:mod:`eegrad.flower.privacy`): each update clipped to rC as it is folded,
    equal weights; :meth:`finish` releases the mean of the n asked with Gaussian noise and tells
    the rule the release alone. No client metric passes (it would be an unnoised release): not
    even a reported cost, so every reply costs ``cost_scale`` (a training counts one)."""

    reveals_costs = False

    def __init__(self, *args: Any, private: PrivateRounds, n: int, **kw: Any) -> None:
        kw["cost"] = {**(kw.get("cost") or {}), "cost_metric": None, "cost_required": False}
        super().__init__(*args, **kw)
        self.pull = PullAccumulator(reference=self.model, spread=True)
        self.private, self.n = private, n
        self._spread = 0.0  # Σ a‖û_i‖²/C

    @property
    def total_weight(self) -> float:
        return float(self.pull.count)

    def add(self, msg: Message) -> None:
        arrays, _, _, _ = self._read(msg)
        norm2 = update_norm2(arrays, self.model)
        if not math.isfinite(norm2):
            raise self._nonfinite(msg, arrays)
        scale, coordinate = self.private.clip(norm2)
        self.pull.add(arrays, 1.0, scale=scale)  # equal weights: DP-FedAvg's sensitivity
        self._spread += coordinate

    def evidence(self, reads: frozenset[str]) -> tuple[list[Any], dict[str, Any]]:
        pull = self.pull
        released = pull.mean()
        released = released if isinstance(released, list) else [released]
        pair_sum = self.private.release(released, pull.count, pull.size, self._spread, self.n)
        return released, pair_fields(pair_sum, np.ones(pull.count), noisy=True)

    def client_metrics(self) -> dict[str, Any]:
        return {}
