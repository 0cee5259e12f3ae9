"""The running-mean update of the compiled kernels, written once and inlined in each kernel's
single pass: the arms' statistics of the simulation engine (:mod:`.numba_kernels`), a user's
loop (:mod:`.loop_kernels`) and a pull's parts (:mod:`.parts_kernels`). It is the compiled
counterpart of :func:`eegrad.statistics.welford_deviation` and
:func:`eegrad.statistics.welford_fold`; each kernel sums the squared deviations and scales
them by (1 − 1/γ) itself (in float64).

Imported only when Numba is installed.
"""

from __future__ import annotations

import numba as nb


@nb.njit(inline="always")
def fold_coordinate(old, x, count):  # pragma: no cover - compiled
    """One coordinate of the running update: δ = x − m_old and m_old + δ/γ.

    ``count`` is γ, the count with this output, or W/ω for an output of weight ω joining the
    total weight W (West's weighted update). Returns ``(delta, new_mean)``."""
    delta = x - old
    return delta, old + delta / count
