r"""The client side: a train function that honours the share of the round's budget it is sent.

The server (:class:`~eegrad.flower.EEGradStrategy`, or Flower's ``FedAvg`` with the share in its
``train_config``) sends each of the n clients it asks the model and ``budget-share``, the
per-client spend :math:`(B - D(n))/n` of the paper's Section 2. :func:`budgeted_train` turns a
user's gradient function into a Flower train function that spends it, in one of two modes:

* :class:`DeviceCost` — *virtual cost* (deterministic, for tests and studies): the device has a
  fixed overhead and a speed, :math:`C_i(b) = o_i + b / s_i` for a batch of b samples, and
  processes the largest batch its share affords, :math:`b = \lfloor (\text{share} - o_i) s_i
  \rfloor` (at most ``max_samples``).
* :class:`WallClock` — *real time*: the client computes gradients on mini-batches of ``chunk``
  samples until its share, in seconds (``seconds_per_unit`` per budget unit), is spent, and
  reports the samples used and the time taken. The unknown cost-fidelity function C is then the
  real device.

Either way the reply is what ``FedAvg`` expects — the updated arrays and a metric record with
``num-examples`` (the samples used, the weight of the update) — plus ``cost`` (budget units
spent) and ``seconds``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict

from .._validation import InvalidParameterError, check_callable, check_integer, check_real, fail
from .model_arrays import array_of

__all__ = ["DeviceCost", "WallClock", "budgeted_train", "with_spread_sums"]

#: The config key the server sends the per-client spend under.
SHARE_KEY = "budget-share"
#: The config key by which the server asks for sums-only replies (``secure_sums=True``).
SUMS_KEY = "eegrad-sums"
#: The metric of a reply that reports the local optimizer steps its client took (the helpers
#: :func:`budgeted_train` and :func:`~eegrad.flower.budgeted_torch_train` report it; the default
#: rule reads it as the prior of how the update grows with the share, where every reply has it).
LOCAL_STEPS_KEY = "local-steps"
#: The metrics a sums-only reply adds: ω², ω‖u‖² and 1/ω.
SUMS_METRICS = ("eegrad-weight2", "eegrad-weighted-squares", "eegrad-inverse-weight")


@dataclass(frozen=True)
class DeviceCost:
    r"""A virtual device: a batch of b samples costs :math:`o + b/s` budget units.

    Parameters
    ----------
    overhead : float
        o >= 0, the fixed cost of taking part (start-up, communication).
    speed : float
        s > 0, samples per budget unit.
    max_samples : int, optional
        The largest batch (e.g. the client's data size): a larger share buys no more.
    """

    overhead: float
    speed: float
    max_samples: int | None = None

    def __post_init__(self) -> None:
        check_real(self.overhead, "overhead", "DeviceCost", ge=0)
        check_real(self.speed, "speed", "DeviceCost", gt=0)
        if self.max_samples is not None:
            check_integer(self.max_samples, "max_samples", "DeviceCost", ge=1)

    def samples(self, share: float) -> int:
        """The largest batch the share affords: ⌊(share − o) s⌋, at most ``max_samples``."""
        b = math.floor((share - self.overhead) * self.speed + 1e-9)
        return b if self.max_samples is None else min(b, self.max_samples)

    def cost(self, samples: int) -> float:
        """The cost of a batch: o + b/s."""
        return self.overhead + samples / self.speed


@dataclass(frozen=True)
class WallClock:
    """Real time: a share of u budget units is ``u * seconds_per_unit`` seconds of computing.

    Parameters
    ----------
    seconds_per_unit : float
        Seconds per budget unit, > 0.
    chunk : int
        Samples per gradient call, >= 1.
    max_samples : int, optional
        Stop early after this many samples.
    """

    seconds_per_unit: float = 1.0
    chunk: int = 8
    max_samples: int | None = None

    def __post_init__(self) -> None:
        check_real(self.seconds_per_unit, "seconds_per_unit", "WallClock", gt=0)
        check_integer(self.chunk, "chunk", "WallClock", ge=1)
        if self.max_samples is not None:
            check_integer(self.max_samples, "max_samples", "WallClock", ge=1)


def check_metric_key(key: Any, name: str, owner: str) -> str:
    """``key`` if it can name a metric (a non-empty string), else the standard error."""
    if not isinstance(key, str) or not key:
        raise fail(name, owner, "a non-empty string naming a metric", key)
    return key


def received_share(config: ConfigRecord) -> float:
    """The budget share a train message's config carries, or an error saying who must send it."""
    if SHARE_KEY not in config:
        raise InvalidParameterError(
            f"The train message has no {SHARE_KEY!r} in its config: the server must send each "
            "client its share of the round's budget (EEGradStrategy does; with FedAvg put it "
            "in train_config)."
        )
    return float(config[SHARE_KEY])


#: The key of FedProx's proximal weight in the train config (Flower's ``FedProx`` sets it).
PROXIMAL_KEY = "proximal-mu"


def proximal_mu(config: ConfigRecord, where: str) -> float:
    r"""μ of FedProx's proximal term :math:`(\mu/2)\|w - w_t\|^2` from the train config (0
    without it); raises naming ``where`` for a negative or non-finite μ."""
    mu = float(config.get(PROXIMAL_KEY, 0.0))
    if not (math.isfinite(mu) and mu >= 0):
        raise InvalidParameterError(
            f"The train config of {where} has {PROXIMAL_KEY} = {mu!r}; it must be finite and >= 0."
        )
    return mu


Gradient = Callable[[list[np.ndarray], int, Context, ConfigRecord], list[np.ndarray]]


def budgeted_train(
    gradient: Gradient,
    device: DeviceCost | WallClock | Callable[[Context, ConfigRecord], DeviceCost | WallClock],
    *,
    lr: float = 0.1,
    local_steps: int = 1,
    batch_size: int | None = None,
    weighted_by_key: str = "num-examples",
    arrayrecord_key: str = "arrays",
    configrecord_key: str = "config",
) -> Callable[[Message, Context], Message]:
    r"""Turn ``gradient(arrays, batch_size, context, config)`` into a Flower train function that spends
    the share of the budget it is sent.

    Parameters
    ----------
    gradient : callable
        ``gradient(arrays, batch_size, context, config) -> list of arrays``: the gradient of the
        loss at the model ``arrays`` (a list of NumPy arrays, in the ArrayRecord's order) on a
        fresh mini-batch of ``batch_size`` samples of the client's data (drawn as the user
        likes); ``config`` is the ConfigRecord the server sent (``server-round``,
        ``budget-share`` and the run's ``train_config``). With FedProx as the server's inner
        strategy (``EEGradStrategy(strategy=FedProx(...))``), the config's ``proximal-mu`` μ adds
        :math:`\mu(w - w_t)` to every local step's gradient, :math:`w_t` the model received.
    device : DeviceCost, WallClock, or callable
        The budget model, or ``(context, config) -> model`` for heterogeneous devices (e.g.
        from ``context.node_config["partition-id"]``).
    lr : float
        Local step size. With ``local_steps=1`` (FedSGD) the update the server receives is
        ``lr`` times one gradient on the whole batch — the paper's model; with more local steps
        the batch is split among them and the update is a model delta (a pseudo-gradient,
        biased by client drift, which the paper's model does not cover).
    local_steps : int
        Local SGD steps, >= 1.
    batch_size : int, optional
        With :class:`DeviceCost`, spend the b samples the share buys in local steps on
        mini-batches of this size (>= 1; the last one smaller), each a fresh batch drawn by
        ``gradient``: a larger share buys more local steps, as a client that trains
        mini-batches does (``local_steps`` must then be 1). None (default): ``local_steps``
        steps on b samples in all.
    weighted_by_key : str
        The metric the reply carries its weight (the samples used) under: the strategy's own
        ``weighted_by_key`` (FedAvg's and :class:`~eegrad.flower.EEGradStrategy`'s default,
        ``"num-examples"``).

    Returns
    -------
    callable
        ``train(message, context) -> Message``, to register with ``@app.train()`` or call from
        it. The reply holds the updated arrays under ``arrayrecord_key`` and a metric record
        ``metrics`` with the weight (under ``weighted_by_key``), ``cost``, ``local-steps`` (the
        local SGD steps taken) and ``seconds``.

    Raises
    ------
    InvalidParameterError
        In the client, when the message has no ``budget-share`` or the share buys no sample;
        Flower returns it to the server as the node's error reply.

    Examples
    --------
    >>> from flwr.clientapp import ClientApp
    >>> from eegrad.flower import DeviceCost, budgeted_train
    >>> def gradient(arrays, batch_size, context, config):
    ...     return [a * 0.0 for a in arrays]  # the user's code
    >>> app = ClientApp()
    >>> train = app.train()(budgeted_train(gradient, DeviceCost(overhead=1.0, speed=4.0)))
    """
    owner = "budgeted_train"
    check_callable(gradient, "gradient", owner)
    lr = check_real(lr, "lr", owner, gt=0)
    local_steps = check_integer(local_steps, "local_steps", owner, ge=1)
    check_metric_key(weighted_by_key, "weighted_by_key", owner)
    if batch_size is not None:
        batch_size = check_integer(batch_size, "batch_size", owner, ge=1)
        if local_steps != 1:
            raise fail("local_steps", owner, "1 with a batch_size (the share decides the "
                       "steps)", local_steps)  # fmt: skip
    if not isinstance(device, DeviceCost | WallClock):
        check_callable(device, "device", owner)

    def train(msg: Message, context: Context) -> Message:
        record = msg.content[arrayrecord_key]
        keys = list(record.keys())
        received = [record[k].numpy() for k in keys]
        arrays = [a.astype(np.float64) for a in received]  # the user's gradient sees float64
        config = msg.content[configrecord_key]
        share = received_share(config)
        model = device if isinstance(device, DeviceCost | WallClock) else device(context, config)
        mu = proximal_mu(config, f"node {context.node_id} at server round "
                         f"{config.get('server-round', '?')}")  # fmt: skip

        def grad(arrays: list[np.ndarray], b: int) -> list[np.ndarray]:
            g = gradient(arrays, b, context, config)
            if not mu:
                return g
            return [gi + mu * (a - w0) for gi, a, w0 in zip(g, arrays, anchor, strict=True)]

        anchor = [a.copy() for a in arrays]
        start = time.perf_counter()
        if isinstance(model, DeviceCost):
            total = model.samples(share)
            if total < 1:
                raise InvalidParameterError(
                    f"The budget share {share:g} buys no sample on this device (overhead "
                    f"{model.overhead:g}, speed {model.speed:g}): the server's c_min is too low."
                )
            if batch_size is None:
                sizes = [total // local_steps + (i < total % local_steps)
                         for i in range(local_steps)]  # fmt: skip
            else:  # mini-batches: a larger share buys more local steps
                sizes = [batch_size] * (total // batch_size) + [total % batch_size]
            sizes = [s for s in sizes if s > 0]
            for b in sizes:
                g = grad(arrays, b)
                arrays = [a - lr * gi for a, gi in zip(arrays, g, strict=True)]
            steps = len(sizes)
            cost = model.cost(total)
        else:
            seconds = share * model.seconds_per_unit
            total, acc = 0, None
            while True:  # at least one chunk, then until the time share is spent
                g = grad(arrays, model.chunk)
                acc = [gi * model.chunk for gi in g] if acc is None else [
                    a + gi * model.chunk for a, gi in zip(acc, g, strict=True)]  # fmt: skip
                total += model.chunk
                elapsed = time.perf_counter() - start
                full = model.max_samples is not None and total >= model.max_samples
                if elapsed >= seconds or full:
                    break
            arrays = [a - lr * s / total for a, s in zip(arrays, acc, strict=True)]
            steps = 1  # one step by the mean gradient of the chunks
            cost = (time.perf_counter() - start) / model.seconds_per_unit
        # The reply keeps the model's dtypes, as the server's aggregation expects.
        out = ArrayRecord({k: array_of(np.asarray(a, dtype=r.dtype))
                           for k, a, r in zip(keys, arrays, received, strict=True)})  # fmt: skip
        metrics = MetricRecord({weighted_by_key: int(total), "cost": float(cost),
                                LOCAL_STEPS_KEY: steps,
                                "seconds": time.perf_counter() - start})  # fmt: skip
        return Message(RecordDict({arrayrecord_key: out, "metrics": metrics}), reply_to=msg)

    return train


def with_spread_sums(
    train: Callable[[Message, Context], Message],
    *,
    weighted_by_key: str = "num-examples",
    arrayrecord_key: str = "arrays",
    configrecord_key: str = "config",
) -> Callable[[Message, Context], Message]:
    r"""Make a client's reply a summand, for a server that reads only sums (secure aggregation).

    Where the server asks for it (``EEGradStrategy(..., secure_sums=True)``), the wrapped train
    function replies, instead of its model :math:`w_i`, the weighted update
    :math:`\omega_i u_i = \omega_i (w - w_i)` (in the model's dtypes) and adds the metrics
    ``eegrad-weight2`` (:math:`\omega_i^2`), ``eegrad-weighted-squares``
    (:math:`\omega_i\|u_i\|^2`, float64) and ``eegrad-inverse-weight`` (:math:`1/\omega_i`,
    for a rule with ``noise_order=2``), ω being the reply's ``num-examples``. A secure sum of
    the replies is then all the server needs (:class:`eegrad.spread.SpreadSums`): the weighted
    mean update and the spread the rule learns from. Otherwise the reply is unchanged.

    Examples
    --------
    >>> from flwr.clientapp import ClientApp
    >>> from eegrad.flower import DeviceCost, budgeted_train, with_spread_sums
    >>> def gradient(arrays, batch_size, context, config):
    ...     return [a * 0.0 for a in arrays]  # the user's code
    >>> app = ClientApp()
    >>> train = app.train()(with_spread_sums(budgeted_train(gradient, DeviceCost(1.0, 4.0))))
    """
    check_callable(train, "train", "with_spread_sums")

    def summand(msg: Message, context: Context) -> Message:
        reply = train(msg, context)
        if not bool(msg.content[configrecord_key].get(SUMS_KEY, False)) or reply.has_error():
            return reply
        sent = msg.content[arrayrecord_key]
        mine = reply.content[arrayrecord_key]
        metrics = next(iter(reply.content.metric_records.values()))
        omega = float(metrics[weighted_by_key])
        out, squares = {}, 0.0
        for k in sent:
            w, wi = sent[k].numpy(), mine[k].numpy()
            u = np.subtract(w, wi, dtype=np.float64)
            squares += float(u @ u) if u.ndim == 1 else float(np.sum(u * u))
            out[k] = array_of((omega * u).astype(w.dtype))
        metrics[SUMS_METRICS[0]] = omega * omega
        metrics[SUMS_METRICS[1]] = omega * squares
        metrics[SUMS_METRICS[2]] = 1.0 / omega if omega > 0 else 0.0
        reply.content[arrayrecord_key] = ArrayRecord(out)
        return reply

    return summand
