"""Selection rules behind one ask/tell interface."""

from .anchored import AnchoredPlan, AnchoredProgress
from .base import IndexSelector, ProtocolError, Selector
from .baselines import FixedArm, Greedy, OptimalArm, RoundRobin
from .budget import BudgetThompson
from .defaults import DEFAULT_RULE, default_selector
from .eegrad import EEGrad
from .evidence import Outlook, RoundEvidence
from .memory import MemoryRule
from .memory_rules import MemoryKLLCB, MemoryThompson
from .model_rule import ModelRule
from .noise_model import NoiseModel
from .progress import ProgressThompson
from .progress_model import ProgressModel
from .registry import (
    RuleInfo,
    all_rules,
    make_rule,
    register_rule,
    rule_info,
    rule_names,
    unregister_rule,
)
from .rules import KLLCB, ChiSquareLCB, ThompsonVariance
from .spread import SpreadThompson

__all__ = [
    "DEFAULT_RULE",
    "KLLCB",
    "AnchoredPlan",
    "AnchoredProgress",
    "BudgetThompson",
    "ChiSquareLCB",
    "EEGrad",
    "FixedArm",
    "Greedy",
    "IndexSelector",
    "MemoryKLLCB",
    "MemoryRule",
    "MemoryThompson",
    "ModelRule",
    "NoiseModel",
    "OptimalArm",
    "Outlook",
    "ProgressModel",
    "ProgressThompson",
    "ProtocolError",
    "RoundEvidence",
    "RoundRobin",
    "RuleInfo",
    "Selector",
    "SpreadThompson",
    "ThompsonVariance",
    "all_rules",
    "default_selector",
    "make_rule",
    "register_rule",
    "rule_info",
    "rule_names",
    "unregister_rule",
]
