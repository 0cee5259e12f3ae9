"""Selection rules behind one ask/tell interface."""

from .base import IndexSelector, ProtocolError, Selector
from .baselines import FixedArm, Greedy, OptimalArm, RoundRobin
from .eegrad import EEGrad

__all__ = [
    "EEGrad",
    "FixedArm",
    "Greedy",
    "IndexSelector",
    "OptimalArm",
    "ProtocolError",
    "RoundRobin",
    "Selector",
]
