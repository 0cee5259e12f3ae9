"""The compiled fit and choice of the rules with memory, attached to them from the engines' side.

:class:`~eegrad.selectors.memory.MemoryRule` runs its refit at an iterate's end and, for one
realization (a user's loop), each round's choice on NumPy; where its driver allows the compiled
path (``compiled_choice``) it calls the object in its ``compiled`` attribute instead. This module
defines that object and attaches it when :mod:`eegrad.engines` is imported, so that the
selectors never import the engines (the layers of docs/architecture.md): the same operations
in their order, so the same σ² and the same choices (:mod:`eegrad.engines.memory_kernels`). Numba is
imported on the first call, never by attaching.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..selectors.memory import MemoryRule

__all__ = ["CompiledMemory", "attach"]


class CompiledMemory:
    """The compiled refit and choice of a :class:`~eegrad.selectors.memory.MemoryRule`."""

    @staticmethod
    def refit_past(rule: Any) -> tuple[np.ndarray, np.ndarray]:
        """The sweeps of the rule's refit of its past iterates in compiled code
        (:func:`eegrad.engines.memory_kernels.refit_past`), without NumPy's per-call overhead:
        sets the rule's σ² and returns the past iterates' terms."""
        from . import memory_kernels as k

        R, K, N = rule._past_count.shape
        num, nu = np.empty((R, K, N)), np.empty((R, K, N))
        s2 = np.array(rule.sigma2, dtype=np.float64)  # a fresh array, as sigma2_update's
        k.refit_past(*map(np.ascontiguousarray, (rule._past_count, rule._past_where,
                                                 rule._past_sq)), s2,
                     np.ascontiguousarray(rule._frozen_num), np.ascontiguousarray(rule._frozen_dof),
                     rule._shape[2], rule.scalar, rule.iterations, num, nu)  # fmt: skip
        rule.sigma2 = s2
        return num, nu

    @staticmethod
    def choose(rule: Any, t: int) -> int:
        """Round t's refit, index and argmin for one realization in compiled code
        (:func:`eegrad.engines.memory_kernels.memory_choice`: the operations of the rule's
        ``_refit_current`` and ``index`` in their order, so the same choice), without NumPy's
        per-call overhead on arrays of N numbers — a user's loop (R = 1)."""
        from . import memory_kernels as k

        N, d = rule._shape[1], rule._shape[2]
        name, (loglog, horizon), _ = rule._kernel_rule()
        tg = rule.rounds_before + t
        rule.check_horizon(tg, stacklevel=6)
        st = rule.stats
        count = st.count[0].astype(np.float64)
        if rule._cur_gram is not None:
            gram, where = True, rule._cur_gram[0]
        elif rule.scalar and not count.any():  # no pull yet: any Gram matrix gives S = Q = 0
            gram, where = True, np.zeros((N, N))
        else:
            gram, where = False, st.mean[0]
        if rule._scratch is None:
            rule._scratch = k.memory_scratch(N, d, rule.scalar, 1)
        sq_coord = rule._no_coord if rule.scalar else st.sq_coord[0]
        gen = rule._choice_generator()
        return int(k.memory_choice(k.MEMORY_CODES[name], loglog, horizon, tg, d, rule.scalar,
                                   gram, count, where, st.sq_dev[0], sq_coord, rule.sigma2[0],
                                   rule._cache_num[0], rule._cache_dof[0], rule._cache_pulls[0],
                                   gen, 0, *rule._scratch))  # fmt: skip


def attach() -> None:
    """Give the rules with memory their compiled fit and choice (done by ``import
    eegrad.engines``)."""
    MemoryRule.compiled = CompiledMemory()
