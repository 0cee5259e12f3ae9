"""The Flower server's cost: EEGradStrategy against Flower's FedAvg (run by hand).

A model of P float32 numbers in 62 arrays (a ResNet-18's count of parameter arrays: 31 large
weights holding almost all of P and 31 small vectors), n client replies built as Flower builds
them (an ArrayRecord of serialised arrays and a ``num-examples`` metric), then one round's
aggregation timed: FedAvg's ``aggregate_train`` against EEGradStrategy's ``configure_train`` and
``aggregate_train`` (the model's deserialisation, the one pass over the replies, the selector's
ask and tell, the step and its serialisation), with ``FixedArm(n)``, with the default rule
(:func:`eegrad.flower.strategy.default_rule`, around Flower's FedAvg of ``fraction_train`` 1:
your n, all n, every round), and with Flower's
``FedAdam`` inside (``strategy=FedAdam()``, ``FixedArm(n)``) against ``FedAdam`` alone. Each case runs in a process of
its own, so that its peak resident memory (``ru_maxrss``) is its own: it is reported whole (the
replies included, as a server holds them) and above the process's peak before the round.

Reported: time per client update (the round's time / n, best of ``--repeat``), the peak
memory, and both as ratios to FedAvg's in the same run. Targets (issue "a real federation's
scale"): at most 1.25× FedAvg's time and peak memory at 11.2 M parameters and n = 20.

``--many`` measures the other end of scale: K = 1000 nodes on the in-process grid
(:class:`~eegrad.flower.LocalGrid`), a small model (10⁵ float32), n = 100 clients a round
(FedAvg with ``fraction_train = 0.1``, ``FixedArm(100)``, and the default rule, which explores
1..100): the strategy's own time per round (``configure_train`` + ``aggregate_train``, the
clients' time excluded), over 20 rounds.

``--stream`` measures what a deployment holds: one whole round (``start``) on the in-process
grid with ``deliver="on-pull"`` (a node runs when its reply is pulled, as replies wait on a
SuperLink), each client replying the model minus a constant; the round's own peak of traced
allocations (``tracemalloc``, above what the process held before the round) in model sizes,
and the process's peak resident memory. Flower's FedAvg holds every reply of the round (its
``send_and_receive`` returns their list); EEGradStrategy pulls one at a time and folds it.

Usage: ``python benchmarks/bench_flower_server.py [--sizes 1e6 11.2e6 25.6e6] [--clients 20 100]
[--repeat 3] [--many] [--stream]``
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import subprocess
import sys
import time

import numpy as np

STRATEGIES = ("fedavg", "eegrad-fixed", "eegrad-default", "fedadam", "eegrad-fedadam")
#: The baseline each strategy's ratios are taken to.
BASELINE = {"fedadam": "fedavg", "eegrad-fedadam": "fedadam"}
ARRAYS = 62


def shapes(total: int) -> list[tuple[int, ...]]:
    """62 arrays: 31 vectors of 512 and 31 weights sharing the rest (sizes growing 4-fold over
    the 31, as a ResNet's layers do)."""
    small = 31 * 512
    grow = np.geomspace(1.0, 4.0**4, ARRAYS // 2)
    big = np.floor(grow / grow.sum() * (total - small)).astype(int)
    big[-1] += total - small - big.sum()
    out: list[tuple[int, ...]] = []
    for b in big:
        out += [(int(b),), (512,)]
    return out


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def one(strategy: str, total: int, n: int, repeat: int) -> dict[str, float]:
    """One case in this process: seconds per client update (best of ``repeat``) and peak MiB."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
    from flwr.serverapp.strategy import FedAdam, FedAvg

    from eegrad import FixedArm
    from eegrad.flower import EEGradStrategy, LocalGrid

    logging.getLogger("flwr").setLevel(logging.ERROR)
    rng = np.random.default_rng(0)
    model = [rng.standard_normal(s).astype(np.float32) for s in shapes(total)]
    keys = [f"a{i}" for i in range(len(model))]
    initial = ArrayRecord({k: Array(a) for k, a in zip(keys, model, strict=True)})
    grid = LocalGrid(_NoClient(), n, seed=1)  # node ids; messages are answered below
    replies_content = []
    for i in range(n):
        delta = np.float32(1e-3 * (i + 1))
        arrays = ArrayRecord({k: Array(a - delta) for k, a in zip(keys, model, strict=True)})
        metrics = MetricRecord({"num-examples": 10 + i, "cost": 1.0})  # cost: of its share
        replies_content.append(RecordDict({"arrays": arrays, "metrics": metrics}))

    def replies_to(messages: list[Message]) -> list[Message]:
        out = []
        for j, msg in enumerate(messages):
            msg.metadata.__dict__["_message_id"] = f"m{j}"
            # a RecordDict of its own each round: the strategy clears a reply's once folded
            reply = Message(RecordDict(dict(replies_content[j].items())), reply_to=msg)
            reply.metadata.__dict__["_src_node_id"] = msg.metadata.dst_node_id
            out.append(reply)
        return out

    def make() -> object:
        if strategy in ("fedavg", "fedadam"):
            return FedAvg() if strategy == "fedavg" else FedAdam()
        selector = None if strategy == "eegrad-default" else FixedArm(n)
        # the default keeps your n: your FedAvg's, every node (fraction_train = 1)
        inner = (FedAdam() if strategy == "eegrad-fedadam" else
                 FedAvg() if strategy == "eegrad-default" else None)  # fmt: skip
        return EEGradStrategy(budget=10.0 * n + 1.0, c_min=10.0, selector=selector, rng=0,
                              strategy=inner)  # fmt: skip

    def round_once(s: object) -> float:
        if strategy == "fedadam":  # FedOpt keeps the round's model from configure_train
            s.current_arrays = {k: a.numpy() for k, a in initial.items()}
        if strategy in ("fedavg", "fedadam"):
            nodes = grid.get_node_ids()
            msgs = [Message(RecordDict({"arrays": initial, "config": ConfigRecord({})}),
                            dst_node_id=nid, message_type="train") for nid in nodes]  # fmt: skip
            replies = replies_to(msgs)
            t0 = time.perf_counter()
            s.aggregate_train(1, replies)
            return time.perf_counter() - t0
        t0 = time.perf_counter()
        msgs = list(s.configure_train(1, initial, ConfigRecord({}), grid))
        assert len(msgs) == n, len(msgs)
        replies = replies_to(msgs)
        t1 = time.perf_counter()
        s.aggregate_train(1, replies)
        return (t1 - t0) + (time.perf_counter() - t1)

    if strategy != "fedavg":
        _warm_up()
    before = _peak_mib()
    best = min(round_once(make()) for _ in range(repeat))
    return {"seconds_per_update": best / n, "peak_mib": _peak_mib(),
            "round_peak_mib": _peak_mib() - before}  # fmt: skip


class _NoClient:
    """A ClientApp stand-in: the benchmark answers the messages itself."""

    def __call__(self, msg, context):  # pragma: no cover - never called
        raise RuntimeError("not used")


def _warm_up() -> None:
    """Compile (or load) the Numba kernels outside the timings."""
    from eegrad.parts import PullAccumulator

    warm = [np.ones(4, np.float32)]
    for spread in (False, True):
        pull = PullAccumulator(reference=warm, spread=spread)
        pull.add(iter(warm), 1.0)


def _timed(method, spent: list[float], sizes: list[int]):
    """``method`` with its time added to ``spent[0]`` (and, for configure_train, the number of
    messages to ``sizes``)."""

    def timed(*args, **kw):
        t0 = time.perf_counter()
        out = method(*args, **kw)
        if not isinstance(out, tuple):  # configure_train: the messages
            out = list(out)
            sizes.append(len(out))
        spent[0] += time.perf_counter() - t0
        return out

    return timed


def many_nodes(rounds: int = 20, K: int = 1000, d: int = 100_000) -> None:
    """The strategies' own time per round with K nodes and up to 100 clients a round."""
    from flwr.app import Array, ArrayRecord, ConfigRecord
    from flwr.clientapp import ClientApp
    from flwr.serverapp.strategy import FedAvg

    from eegrad import FixedArm
    from eegrad.flower import DeviceCost, EEGradStrategy, LocalGrid, budgeted_train

    logging.getLogger("flwr").setLevel(logging.ERROR)
    mu = np.random.default_rng(1).standard_normal((K, 4)).astype(np.float32)

    def gradient(arrays, b, context, config):
        pid = int(context.node_config["partition-id"])
        g = np.zeros_like(arrays[0])
        g[:4] = arrays[0][:4] - mu[pid]
        return [g]

    app = ClientApp()
    app.train()(budgeted_train(gradient, DeviceCost(5.0, 1.0), lr=1.0))
    initial = ArrayRecord({"w": Array(np.zeros(d, dtype=np.float32))})
    _warm_up()
    print(f"| strategy (K = {K}, d = {d:.0e}) | mean n | ms per round (strategy only) | × FedAvg |")
    print("|---|---|---|---|")
    base = None
    for name in ("fedavg", "eegrad-fixed", "eegrad-default"):
        if name == "fedavg":
            s = FedAvg(fraction_train=0.1, min_available_nodes=K)
        else:
            s = EEGradStrategy(650.0, 6.0, aggregation=lambda n: 0.5 * (n - 1.0), rng=0,
                               selector=FixedArm(100) if name == "eegrad-fixed" else None)  # fmt: skip
        spent, sizes = [0.0], []
        for method in ("configure_train", "aggregate_train"):
            setattr(s, method, _timed(getattr(s, method), spent, sizes))
        share = ConfigRecord({"budget-share": (650.0 - 0.5 * 99) / 100})  # FedAvg's clients'
        s.start(grid=LocalGrid(app, K, seed=0), initial_arrays=initial, num_rounds=rounds,
                train_config=share if name == "fedavg" else None)  # fmt: skip
        ms = 1e3 * spent[0] / rounds
        base = base or ms
        print(f"| {name} | {np.mean(sizes):.0f} | {ms:.1f} | {ms / base:.2f} |")


def stream(strategy: str, total: int, n: int) -> dict[str, float]:
    """One whole round in this process on a grid that runs each node when its reply is pulled:
    the round's own peak of traced allocations and the process's peak."""
    import tracemalloc

    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp.strategy import FedAdam, FedAvg

    from eegrad import FixedArm
    from eegrad.flower import EEGradStrategy, LocalGrid

    logging.getLogger("flwr").setLevel(logging.ERROR)
    rng = np.random.default_rng(0)
    keys = [f"a{i}" for i in range(ARRAYS)]
    initial = ArrayRecord({k: Array(rng.standard_normal(s).astype(np.float32))
                           for k, s in zip(keys, shapes(total), strict=True)})  # fmt: skip
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: object) -> Message:
        record = msg.content["arrays"]
        out = ArrayRecord({k: Array(record[k].numpy() - np.float32(1e-3)) for k in keys})
        return Message(RecordDict({"arrays": out, "metrics": MetricRecord({"num-examples": 10,
                                                                            "cost": 1.0})}),
                       reply_to=msg)  # fmt: skip

    if strategy in ("fedavg", "fedadam"):
        s = (FedAvg if strategy == "fedavg" else FedAdam)(fraction_evaluate=0.0,
                                                          min_available_nodes=n)  # fmt: skip
    else:
        inner = FedAdam(fraction_evaluate=0.0) if strategy == "eegrad-fedadam" else None
        s = EEGradStrategy(budget=10.0 * n + 1.0, c_min=10.0, selector=FixedArm(n), rng=0,
                           strategy=inner)  # fmt: skip
        _warm_up()
    grid = LocalGrid(app, n, seed=1, deliver="on-pull")
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    s.start(grid=grid, initial_arrays=initial, num_rounds=1)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    model = 4.0 * total
    return {"round_peak_mib": peak / 2**20, "round_peak_models": peak / model,
            "process_peak_mib": _peak_mib()}  # fmt: skip


def stream_table(sizes: list[float], clients: list[int], max_gib: float) -> None:
    """The ``--stream`` table: each case in a process of its own."""
    print("| parameters | n | strategy | round's own peak MiB | in model sizes "
          "| process peak MiB |")
    print("|---|---|---|---|---|---|")
    for size in sizes:
        for n in clients:
            for s in ("fedavg", "eegrad-fixed", "fedadam", "eegrad-fedadam"):
                if s in ("fedavg", "fedadam") and 4 * size * n * 2 / 2**30 > max_gib:
                    print(f"| {size / 1e6:g} M | {n} | {s} (skipped: its replies exceed "
                          f"{max_gib:g} GiB) | | | |")
                    continue
                out = subprocess.run([sys.executable, __file__, "--stream-one", s, str(size),
                                      str(n)], capture_output=True, text=True, check=True)  # fmt: skip
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"| {size / 1e6:g} M | {n} | {s} | {r['round_peak_mib']:.0f} "
                      f"| {r['round_peak_models']:.2f} | {r['process_peak_mib']:.0f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=float, nargs="+", default=[1e6, 11.2e6, 25.6e6])
    p.add_argument("--clients", type=int, nargs="+", default=[20, 100])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-gib", type=float, default=14.0,
                   help="skip cases whose replies alone exceed this (GiB)")
    p.add_argument("--many", action="store_true", help="K = 1000 nodes, up to 100 a round")
    p.add_argument("--stream", action="store_true",
                   help="a whole round with replies pulled one at a time: the round's own peak")
    p.add_argument("--one", nargs=3, metavar=("STRATEGY", "SIZE", "N"), help=argparse.SUPPRESS)
    p.add_argument("--stream-one", nargs=3, metavar=("STRATEGY", "SIZE", "N"),
                   help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.many:
        many_nodes()
        return
    if args.stream_one:
        s, size, n = args.stream_one
        print(json.dumps(stream(s, int(float(size)), int(n))))
        return
    if args.stream:
        stream_table(args.sizes, args.clients, args.max_gib)
        return
    if args.one:
        s, size, n = args.one
        print(json.dumps(one(s, int(float(size)), int(n), args.repeat)))
        return
    print("| parameters | n | strategy | time per update (ms) | × baseline | peak MiB | × baseline "
          "| round's own peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        for n in args.clients:
            if 4 * size * n * 2 / 2**30 > args.max_gib:  # replies + their serialised bytes
                print(f"| {size / 1e6:g} M | {n} | (skipped: over {args.max_gib:g} GiB) | | | | | |")
                continue
            rows = {}
            for s in STRATEGIES:
                out = subprocess.run([sys.executable, __file__, "--repeat", str(args.repeat),
                                      "--one", s, str(size), str(n)],
                                     capture_output=True, text=True, check=True)  # fmt: skip
                rows[s] = json.loads(out.stdout.strip().splitlines()[-1])
            for s, r in rows.items():
                base = rows[BASELINE.get(s, "fedavg")]
                print(f"| {size / 1e6:g} M | {n} | {s} | {1e3 * r['seconds_per_update']:.2f} "
                      f"| {r['seconds_per_update'] / base['seconds_per_update']:.2f} "
                      f"| {r['peak_mib']:.0f} | {r['peak_mib'] / base['peak_mib']:.2f} "
                      f"| {r['round_peak_mib']:.0f} |")


if __name__ == "__main__":
    main()
