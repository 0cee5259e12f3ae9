r"""An ablation of eegrad's default for the bench: the same fitted models, another objective.

``noise-scale``  n from the gradient noise scale (McCandlish et al., arXiv 1812.06162), read off
                 the spread as eegrad's default reads it: the critical number of clients
                 :math:`n^* = v_1 / s_1`, one client's update variance over the squared norm of
                 its mean (:class:`NoiseScaleRule`; warm-up and last round as the default's)

It lives apart from the bench's other methods (:mod:`eegrad.bench.methods`) because it reads
the default's code: a change of the default reruns it (:mod:`eegrad.bench.fingerprint`), and
not them.
"""

from __future__ import annotations

import numpy as np

from ..selectors.budget import BudgetThompson
from ..selectors.progress import ProgressThompson

__all__ = ["NoiseScaleRoundRule", "NoiseScaleRule"]


class _NoiseScale:
    r"""The objective of the gradient noise scale: the n nearest (on a log scale) to
    :math:`n^* = v_1 / s_1`, where :math:`v_1` is the fitted variance of one client's update
    and :math:`s_1` the fitted squared norm of its mean (McCandlish et al.'s
    :math:`B_\text{noise} = \operatorname{tr}\Sigma / \lVert G\rVert^2`, in clients)."""

    def critical_n(self) -> np.ndarray:
        """:math:`n^*` per realization (NaN before a fit)."""
        noise, signal = self.predicted(), self.model.signal()
        with np.errstate(invalid="ignore", divide="ignore"):
            return noise[:, 0] / signal[:, 0]

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        N = self._shape[1]
        target = self.critical_n()
        n = np.arange(1, N + 1, dtype=np.float64)[None, :]
        value = -np.abs(np.log(n) - np.log(np.clip(target, 1.0, N))[:, None])
        return np.where(np.isfinite(value), value, 0.0)


class NoiseScaleRule(_NoiseScale, BudgetThompson):
    """eegrad's default rule of a total budget with its objective replaced by the gradient
    noise scale: the same fits and warm-up, then the n nearest :math:`n^*` every round (no
    split of the budget over the rounds); the run's last round as the default's. An ablation:
    the same fitted signal, another use."""

    def rounds_bind(self) -> bool:
        """Never: the noise scale chooses every round's n itself."""
        return False


class NoiseScaleRoundRule(_NoiseScale, ProgressThompson):
    """The same ablation of eegrad's default rule of B a round (:class:`~eegrad.ProgressThompson`)."""
