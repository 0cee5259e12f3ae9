"""The compiled engine: blocks of realizations run by Numba kernels on threads."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._random import RealizationStreams
from ..oracle import IterateOracle
from ..selectors.base import KernelSpec, Selector, has_kernel

__all__ = ["run_rounds", "unsupported_reason"]



def unsupported_reason(at: Any, selector: Selector) -> str | None:
    """Why the kernels cannot run this case, or None if they can."""
    if type(at) is not IterateOracle:
        return f"oracle {type(getattr(at, 'oracle', at)).__name__}"
    noise = at.oracle.noise
    if not (noise.direct and noise.kind == "normal"):
        return f"noise family {noise.name!r} (only Gaussian, drawn directly)"
    if not has_kernel(type(selector)):
        return f"selector {type(selector).__name__}"
    return None


def default_threads() -> int:
    return os.cpu_count() or 1


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    """A process-wide pool per worker count, created once (threads start only once)."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = _POOLS[workers] = ThreadPoolExecutor(max_workers=workers,
                                                    thread_name_prefix="eegrad")  # fmt: skip
    return pool


def run_rounds(
    at: IterateOracle,
    selector: Selector,
    T: int,
    streams: RealizationStreams,
    threads: int | None = None,
    checkpoints: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run T rounds for all blocks; returns Σ_t G_t of shape (R, d) and the counts after each
    round in ``checkpoints`` (shape (k, R, N)), and leaves the selector's counts and
    statistics as the NumPy engine would."""
    from . import numba_kernels as k

    spec = selector.kernel_spec(T)
    if spec.kernel == "memory":
        return _run_memory_rounds(at, selector, spec, T, streams, threads, checkpoints)
    R, d = at.grad.shape
    N = at.arms.N
    rule, params = k.RULE_CODES[spec.rule], np.array(spec.params or (0.0,), dtype=np.float64)
    P = np.zeros(R) if spec.P is None else spec.P
    keep = spec.keep_stats
    scale = np.sqrt(at.arms.sigma2)
    total = np.zeros((R, d))
    count = np.zeros((R, N), dtype=np.int64)
    mean = np.zeros((R, N, d))
    sq = np.zeros((R, N))
    grad = np.ascontiguousarray(at.grad)
    sqrt_m = np.ascontiguousarray(at.sqrt_m)
    ckpts = np.asarray([] if checkpoints is None else checkpoints, dtype=np.int64)
    ckpt_counts = np.zeros((ckpts.shape[0], R, N), dtype=np.int64)
    sgens = streams.selector_generators if spec.selector_stream else streams.generators

    def job(b: int) -> None:
        sl = streams.slices[b]
        block_ckpts = np.ascontiguousarray(ckpt_counts[:, sl])
        k.run_block(streams.generators[b], sgens[b], grad[sl], sqrt_m[sl], scale, rule, params,
                  P[sl], T, total[sl], count[sl], mean[sl], sq[sl], keep, ckpts,
                  block_ckpts)  # fmt: skip
        ckpt_counts[:, sl] = block_ckpts

    _run_blocks(job, len(streams.slices), threads)
    selector.absorb(count, T, mean, sq)
    return total, ckpt_counts


def _run_blocks(job: Any, n_blocks: int, threads: int | None) -> None:
    workers = min(threads or default_threads(), n_blocks)
    if workers <= 1:
        for b in range(n_blocks):
            job(b)
    else:
        # Blocks are handed out one per task; each writes only its own slices, so the
        # schedule cannot change a result.
        pool = _pool(workers)
        futures = [pool.submit(job, b) for b in range(n_blocks)]
        for f in futures:
            f.result()


def _run_memory_rounds(at: IterateOracle, selector: Selector, spec: KernelSpec, T: int,
                       streams: RealizationStreams, threads: int | None,
                       checkpoints: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The rules with memory: the round's refit and index compiled per realization
    (:func:`numba_kernels.run_memory_block`); the refit of the past iterates at an iterate's
    start stays the rule's own (NumPy, once per iterate)."""
    from . import numba_kernels as k

    R, d = at.grad.shape
    N = at.arms.N
    state = spec.state
    scalar = state["scalar"]
    rule = k.MEMORY_CODES[spec.rule]
    loglog, horizon = float(spec.params[0]), int(spec.params[1])
    s2 = np.ascontiguousarray(state["sigma2"])
    cache = [np.ascontiguousarray(state[key]) for key in ("cache_num", "cache_dof", "cache_pulls")]
    scale = np.sqrt(at.arms.sigma2)
    total = np.zeros((R, d))
    count = np.zeros((R, N), dtype=np.int64)
    mean = np.zeros((R, N, d))
    sq_dev = np.zeros((R, N))
    sq_coord = np.zeros((R, N, 1 if scalar else d))
    grad = np.ascontiguousarray(at.grad)
    sqrt_m = np.ascontiguousarray(at.sqrt_m)
    ckpts = np.asarray([] if checkpoints is None else checkpoints, dtype=np.int64)
    ckpt_counts = np.zeros((ckpts.shape[0], R, N), dtype=np.int64)
    sgens = streams.selector_generators if spec.selector_stream else streams.generators

    def job(b: int) -> None:
        sl = streams.slices[b]
        block_ckpts = np.ascontiguousarray(ckpt_counts[:, sl])
        k.run_memory_block(streams.generators[b], sgens[b], grad[sl], sqrt_m[sl], scale, rule,
                           loglog, horizon, scalar, state["warm"], state["rounds_before"], T,
                           total[sl], count[sl], mean[sl], sq_dev[sl], sq_coord[sl], s2[sl],
                           cache[0][sl], cache[1][sl], cache[2][sl], ckpts,
                           block_ckpts)  # fmt: skip
        ckpt_counts[:, sl] = block_ckpts

    _run_blocks(job, len(streams.slices), threads)
    selector.absorb(count, T, mean, sq_dev, sq_coord=None if scalar else sq_coord, sigma2=s2)
    return total, ckpt_counts
