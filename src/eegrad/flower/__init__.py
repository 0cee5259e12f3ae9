"""EE-Grad where federated learning runs: a Flower strategy and its client side.

The ``flower`` extra (``pip install "eegrad[flower]"``, Flower 1.41 or 1.42). A Flower user hands the
strategy they train with to :class:`EEGradStrategy` (``strategy=FedAdam(...)``; or none, for
FedAvg's step) in their ``ServerApp``, and wraps their gradient code with :func:`budgeted_train`
(NumPy) or their PyTorch model with :func:`budgeted_torch_train` (local epochs) in their
``ClientApp``; the rest of the app stays. Privacy: :class:`CentralDP`, sums only
(:func:`with_spread_sums`), Flower's SecAgg+ (:func:`start_secaggplus`, :func:`secaggplus_train`).
:class:`LocalGrid` runs a strategy and a ``ClientApp`` in one process, synchronously, for tests
and seeded studies. How the parts fit: ``docs/architecture.md``.

``import eegrad`` never imports Flower; importing this module without it raises an error that
names the extra.
"""

from __future__ import annotations

try:
    import flwr  # noqa: F401
except ModuleNotFoundError as exc:  # pragma: no cover - exercised without the extra
    raise ModuleNotFoundError(
        "eegrad.flower needs Flower: install the 'flower' extra, "
        "pip install \"eegrad[flower]\" (flwr[simulation,dp] 1.41 or 1.42)."
    ) from exc

from .client import DeviceCost, WallClock, budgeted_train, with_spread_sums
from .front import choose_clients
from .grid import LocalGrid
from .inner import UnsupportedStrategyError
from .privacy import CentralDP, PrivacyBudgetExhausted, calibrate_noise, epsilon_spent
from .replies import ClientUpdateError
from .round_report import RoundReport
from .secagg import secaggplus_train, start_secaggplus
from .state import RunState
from .stops import RunStopped
from .strategy import BudgetSpent, EEGradStrategy
from .torch_client import budgeted_torch_train

__all__ = [
    "BudgetSpent",
    "CentralDP",
    "ClientUpdateError",
    "DeviceCost",
    "EEGradStrategy",
    "LocalGrid",
    "PrivacyBudgetExhausted",
    "RoundReport",
    "RunState",
    "RunStopped",
    "UnsupportedStrategyError",
    "WallClock",
    "budgeted_torch_train",
    "budgeted_train",
    "calibrate_noise",
    "choose_clients",
    "epsilon_spent",
    "secaggplus_train",
    "start_secaggplus",
    "with_spread_sums",
]
