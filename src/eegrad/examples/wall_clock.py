r"""What a wall-clock budget does to the paper's model, measured on this machine.

The paper's model (Section 2) gives arm n a fixed fidelity: each of the n clients spends
:math:`(B - D(n))/n` and so computes a mini-batch of a known size :math:`\theta_n`, the same every
time, whatever the other clients do. With :class:`eegrad.flower.WallClock` the budget is time: a
client computes mini-batches until its share of seconds is spent, and the samples it gets
through — its θ — are whatever the device delivers. Two assumptions then break:

* **θ is random.** The same share buys a different batch each round (timer granularity, caches,
  the operating system). The arms' variances σ_n² are then averages over θ, still fixed per n, so
  the bandit model holds on average, with extra noise.
* **θ depends on n through contention.** When the n clients share hardware (a simulation on one
  machine, or devices behind one link), n clients at once each get less done per second than one
  alone: the cost of a sample rises with n, so C is no longer a function of θ alone and
  :math:`\theta_n` is not :math:`C^{-1}((B - D(n))/n)`. A rule that learns the arms' variances
  from data (EE-Grad's, or :class:`~eegrad.SpreadThompson`) still measures the right thing — the
  variance that n clients actually deliver — but the paper's premise that a cheaper share buys
  a proportionally smaller batch, independently per client, does not hold.

:func:`measure` runs the real client path (:func:`eegrad.flower.budgeted_train` with a
``WallClock`` device, called through :class:`eegrad.flower.LocalGrid`) for n clients sharing a
round's budget, once one after another (``alone``: no contention) and once all at the same time
in n processes (``together``: as Flower's simulation runs them). The gradient is softmax
regression on scikit-learn's 8×8 digits.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_integer, check_real, fail
from ..arms import per_client_spend
from ..costs import LinearAggregation
from ..results import environment, write_json, write_table

__all__ = ["COLUMNS", "main", "measure", "summarise"]

COLUMNS = ("n", "mode", "rep", "client", "share", "samples", "seconds")
MODES = ("alone", "together")


@lru_cache(maxsize=1)
def _client(seconds_per_unit: float, chunk: int) -> Any:
    """A one-node LocalGrid running a ClientApp with a WallClock device (one per process)."""
    from flwr.clientapp import ClientApp

    from ..flower import LocalGrid, WallClock, budgeted_train
    from .flower_setting import _load, softmax_loss_grad

    X, y = _load("digits")

    def gradient(arrays, batch_size, context, config):
        rng = np.random.default_rng([int(config["server-round"]), int(config["client"])])
        take = rng.choice(y.size, batch_size, replace=False)
        return [softmax_loss_grad(arrays[0], X[take], y[take])[1]]

    app = ClientApp()
    app.train()(budgeted_train(gradient, WallClock(seconds_per_unit, chunk=chunk), lr=0.5))
    return LocalGrid(app, 1)


def _one_client(share: float, start_at: float, rep: int, client: int, seconds_per_unit: float,
                chunk: int) -> tuple[int, float]:  # fmt: skip
    """One client's round: wait until ``start_at`` (time.time()), then spend ``share``."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, MessageType, RecordDict

    grid = _client(seconds_per_unit, chunk)
    w = np.zeros((64 + 1) * 10)
    content = RecordDict({"arrays": ArrayRecord({"w": Array(w)}),
                          "config": ConfigRecord({"budget-share": share, "server-round": rep,
                                                  "client": client})})  # fmt: skip
    msg = grid.create_message(content, MessageType.TRAIN, grid.node_ids[0], "wall-clock")
    time.sleep(max(0.0, start_at - time.time()))
    (reply,) = grid.send_and_receive([msg])
    if reply.has_error():
        raise RuntimeError(reply.error.reason)
    metrics = reply.content["metrics"]
    return int(metrics["num-examples"]), float(metrics["seconds"])


def measure(ns: tuple[int, ...] = (1, 2, 4, 8), *, reps: int = 10, budget: float = 100.0,
            aggregation_per_client: float = 0.5, seconds_per_unit: float = 2e-3,
            chunk: int = 8) -> list[dict[str, Any]]:  # fmt: skip
    """Samples bought by each of n clients sharing one round's budget, alone and together.

    Parameters
    ----------
    ns : tuple of int
        Client counts n >= 1; each client's share is (B − D(n))/n, D(n) = a (n − 1).
    reps : int
        Rounds per (n, mode).
    budget : float
        B, in budget units; a unit is ``seconds_per_unit`` seconds.
    aggregation_per_client : float
        a in D(n) = a (n − 1), >= 0.
    seconds_per_unit, chunk : float, int
        The :class:`~eegrad.flower.WallClock` device.

    Returns
    -------
    list of dict
        Rows of :data:`COLUMNS`: per (n, mode, rep, client) the share, the samples processed
        and the seconds taken.
    """
    owner = "eegrad.examples.wall_clock.measure"
    ns = tuple(check_integer(n, "ns", owner, ge=1) for n in ns)
    reps = check_integer(reps, "reps", owner, ge=1)
    budget = check_real(budget, "budget", owner, gt=0)
    a = check_real(aggregation_per_client, "aggregation_per_client", owner, ge=0)
    seconds_per_unit = check_real(seconds_per_unit, "seconds_per_unit", owner, gt=0)
    chunk = check_integer(chunk, "chunk", owner, ge=1)
    aggregation = LinearAggregation(b=a)
    for n in ns:
        if per_client_spend(budget, aggregation, n) <= 0:
            raise fail("ns", owner, f"client counts whose share (B - D(n))/n is > 0 (B = {budget:g})",
                       n)  # fmt: skip
    rows: list[dict[str, Any]] = []
    args = (seconds_per_unit, chunk)
    with ProcessPoolExecutor(max_workers=max(ns)) as pool:
        # Start every worker and build its client before any clock starts.
        list(pool.map(_one_client, [1.0] * max(ns), [time.time() + 1.0] * max(ns),
                      [0] * max(ns), range(max(ns)), [seconds_per_unit] * max(ns),
                      [chunk] * max(ns)))  # fmt: skip
        for n in ns:
            share = float(per_client_spend(budget, aggregation, n))
            for rep in range(reps):
                alone = [_one_client(share, 0.0, rep, c, *args) for c in range(n)]
                start = time.time() + 0.2
                futures = [pool.submit(_one_client, share, start, rep, c, *args) for c in range(n)]
                together = [f.result() for f in futures]
                for mode, results in zip(MODES, (alone, together), strict=True):
                    for c, (samples, seconds) in enumerate(results):
                        rows.append({"n": n, "mode": mode, "rep": rep, "client": c,
                                     "share": share, "samples": samples, "seconds": seconds})  # fmt: skip
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (n, mode): mean samples per client, their coefficient of variation over rounds and
    clients, and samples per second; ``together / alone`` is the ratio of mean samples."""
    out = []
    for n in sorted({r["n"] for r in rows}):
        mean = {}
        for mode in MODES:
            s = np.array([r["samples"] for r in rows if r["n"] == n and r["mode"] == mode], float)
            t = np.array([r["seconds"] for r in rows if r["n"] == n and r["mode"] == mode], float)
            mean[mode] = s.mean()
            out.append({"n": n, "mode": mode, "share": next(r["share"] for r in rows
                                                             if r["n"] == n),
                        "samples_mean": float(s.mean()),
                        "samples_cv": float(s.std(ddof=1) / s.mean()) if s.size > 1 else 0.0,
                        "samples_per_second": float(s.sum() / t.sum()),
                        "together_over_alone": float("nan")})  # fmt: skip
        out[-1]["together_over_alone"] = float(mean["together"] / mean["alone"])
    return out


def main(out: str | Path = "results/wall-clock", *, ns: tuple[int, ...] = (1, 2, 4, 8),
         reps: int = 10, seconds_per_unit: float = 2e-3,
         progress: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """Measure and write ``wall_clock.csv`` (rows of :data:`COLUMNS`) and ``metadata.json``."""
    import os

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = measure(ns, reps=reps, seconds_per_unit=seconds_per_unit)
    write_table(out / "wall_clock.csv", rows, COLUMNS)
    summary = summarise(rows)
    write_json(out / "metadata.json", {
        "example": "wall-clock", "ns": list(ns), "reps": reps, "budget": 100.0,
        "aggregation_per_client": 0.5, "seconds_per_unit": seconds_per_unit, "chunk": 8,
        "cpus": os.cpu_count(), "summary": summary, "versions": environment(),
        "wall_time_s": time.perf_counter() - t0})  # fmt: skip
    if progress:
        print(f"{'n':>3} {'mode':>9} {'share (s)':>10} {'samples':>9} {'CV':>6} "
              f"{'samples/s':>10} {'together/alone':>15}")  # fmt: skip
        for s in summary:
            ratio = "" if np.isnan(s["together_over_alone"]) else f"{s['together_over_alone']:.2f}"
            print(f"{s['n']:>3} {s['mode']:>9} {s['share'] * seconds_per_unit:>10.4f} "
                  f"{s['samples_mean']:>9.1f} {s['samples_cv']:>6.2f} "
                  f"{s['samples_per_second']:>10.0f} {ratio:>15}")  # fmt: skip
    return summary
