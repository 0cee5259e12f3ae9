"""The compiled engine: blocks of realizations run by Numba kernels on threads.

A rule with a compiled index declares how the engine runs it (its
:class:`~eegrad.selectors.base.KernelSpec`); the engine looks the spec's ``kernel`` up in its
registry of kernels (:func:`register_kernel`): ``"index"`` (the per-iterate rules,
:func:`.numba_kernels.run_block`) and ``"memory"`` (the rules with memory,
:func:`.memory_kernels.run_memory_block`). A new compiled rule is its rule module plus its
kernel module in :mod:`eegrad.engines`, which registers a kernel under a new name; the engine
imports the package's modules when it meets a name it does not know, so no list is edited.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._random import RealizationStreams
from .._validation import InvalidParameterError
from ..oracle import IterateOracle
from ..selectors.base import KernelSpec, Selector, has_kernel

__all__ = ["KernelRun", "register_kernel", "run_blocks", "run_rounds", "unsupported_reason"]



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
    spec = selector.kernel_spec(T)
    kernel = _kernel(spec.kernel)
    run = KernelRun.prepare(at, spec, streams, checkpoints)
    kernel(run, selector, spec, T, streams, threads)
    return run.total, run.ckpt_counts


#: A kernel: ``kernel(run, selector, spec, T, streams, threads)`` runs T rounds of every block
#: (:func:`run_blocks`), fills ``run`` and leaves the selector's counts and statistics as the
#: NumPy engine would (``selector.absorb``).
Kernel = Callable[..., None]

_KERNELS: dict[str, Kernel] = {}


def register_kernel(name: str) -> Callable[[Kernel], Kernel]:
    """Decorator: register a kernel under the name a rule's ``KernelSpec.kernel`` gives."""

    def decorate(kernel: Kernel) -> Kernel:
        _KERNELS[name] = kernel
        return kernel

    return decorate


def _kernel(name: str) -> Kernel:
    """The registered kernel ``name``, after the engines' modules are imported if needed."""
    if name not in _KERNELS:
        from .._discover import import_package_modules

        import_package_modules(__package__)
    try:
        return _KERNELS[name]
    except KeyError:
        raise InvalidParameterError(
            f"No compiled kernel is registered as {name!r} (a rule's KernelSpec.kernel); known: "
            f"{', '.join(map(repr, _KERNELS))}."
        ) from None


@register_kernel("index")
def _run_index_rounds(run: KernelRun, selector: Selector, spec: KernelSpec, T: int,
                      streams: RealizationStreams, threads: int | None) -> None:  # fmt: skip
    """The per-iterate rules (:func:`numba_kernels.run_block`, the rule by its code)."""
    from . import numba_kernels as k

    rule, params = k.RULE_CODES[spec.rule], np.array(spec.params or (0.0,), dtype=np.float64)
    P = np.zeros(run.total.shape[0]) if spec.P is None else spec.P

    def block(b: int, sl: slice, ckpts: np.ndarray) -> None:
        k.run_block(streams.generators[b], run.sgens[b], run.grad[sl], run.sqrt_m[sl], run.scale,
                    rule, params, P[sl], T, run.total[sl], run.count[sl], run.mean[sl],
                    run.sq_dev[sl], spec.keep_stats, run.ckpts, ckpts)  # fmt: skip

    run_blocks(block, run, streams, threads)
    selector.absorb(run.count, T, run.mean, run.sq_dev)


@dataclass
class KernelRun:
    """The arrays one compiled run fills: the oracle's (``scale`` = √σ_n², ``grad`` = ∇F(w),
    ``sqrt_m`` = √diag M(w)), the outputs (``total`` = Σ_t G_t), the arms' statistics
    (``count``, ``mean``, ``sq_dev``, ``sq_coord``) and the counts at the checkpoints
    (``ckpts``, ``ckpt_counts``), for all realizations; each block writes its own slice.
    ``sgens``: the blocks' streams for a rule's own draws."""

    scale: np.ndarray
    grad: np.ndarray
    sqrt_m: np.ndarray
    total: np.ndarray
    count: np.ndarray
    mean: np.ndarray
    sq_dev: np.ndarray
    sq_coord: np.ndarray
    ckpts: np.ndarray
    ckpt_counts: np.ndarray
    sgens: list

    @classmethod
    def prepare(cls, at: IterateOracle, spec: KernelSpec, streams: RealizationStreams,
                checkpoints: np.ndarray | None) -> KernelRun:  # fmt: skip
        R, d = at.grad.shape
        N = at.arms.N
        ckpts = np.asarray([] if checkpoints is None else checkpoints, dtype=np.int64)
        per_coordinate = spec.state is not None and not spec.state["scalar"]
        return cls(
            scale=np.sqrt(at.arms.sigma2), grad=np.ascontiguousarray(at.grad),
            sqrt_m=np.ascontiguousarray(at.sqrt_m), total=np.zeros((R, d)),
            count=np.zeros((R, N), dtype=np.int64), mean=np.zeros((R, N, d)),
            sq_dev=np.zeros((R, N)), sq_coord=np.zeros((R, N, d if per_coordinate else 1)),
            ckpts=ckpts, ckpt_counts=np.zeros((ckpts.shape[0], R, N), dtype=np.int64),
            sgens=streams.selector_generators if spec.selector_stream else streams.generators,
        )  # fmt: skip


def run_blocks(block: Any, run: KernelRun, streams: RealizationStreams,
               threads: int | None) -> None:  # fmt: skip
    """``block(b, slice, checkpoint counts)`` for every block, on the thread pool; each block
    writes only its own slices, so the schedule cannot change a result."""

    def job(b: int) -> None:
        sl = streams.slices[b]
        ckpts = np.ascontiguousarray(run.ckpt_counts[:, sl])
        block(b, sl, ckpts)
        run.ckpt_counts[:, sl] = ckpts

    n_blocks = len(streams.slices)
    workers = min(threads or default_threads(), n_blocks)
    if workers <= 1:
        for b in range(n_blocks):
            job(b)
    else:
        pool = _pool(workers)
        futures = [pool.submit(job, b) for b in range(n_blocks)]
        for f in futures:
            f.result()


@register_kernel("memory")
def _run_memory_rounds(run: KernelRun, selector: Selector, spec: KernelSpec, T: int,
                       streams: RealizationStreams, threads: int | None) -> None:  # fmt: skip
    """The rules with memory: the round's refit and index compiled per realization
    (:func:`memory_kernels.run_memory_block`); the refit of the past iterates at an iterate's
    start is the rule's own (compiled too, :func:`memory_kernels.refit_past`)."""
    from . import memory_kernels as k

    state = spec.state
    scalar = state["scalar"]
    rule = k.MEMORY_CODES[spec.rule]
    loglog, horizon = float(spec.params[0]), int(spec.params[1])
    s2 = np.ascontiguousarray(state["sigma2"])
    cache = [np.ascontiguousarray(state[key]) for key in ("cache_num", "cache_dof", "cache_pulls")]

    def block(b: int, sl: slice, ckpts: np.ndarray) -> None:
        k.run_memory_block(streams.generators[b], run.sgens[b], run.grad[sl], run.sqrt_m[sl],
                           run.scale, rule, loglog, horizon, scalar, state["warm"],
                           state["rounds_before"], T, run.total[sl], run.count[sl], run.mean[sl],
                           run.sq_dev[sl], run.sq_coord[sl], s2[sl], cache[0][sl], cache[1][sl],
                           cache[2][sl], run.ckpts, ckpts)  # fmt: skip

    run_blocks(block, run, streams, threads)
    selector.absorb(run.count, T, run.mean, run.sq_dev,
                    sq_coord=None if scalar else run.sq_coord, sigma2=s2)  # fmt: skip
