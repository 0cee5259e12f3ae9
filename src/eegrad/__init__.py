"""eegrad: EE-Grad, exploration and exploitation for cost-efficient mini-batch SGD.

The public API; see ``paper/ee-grad.tex`` for the symbols.
"""

from importlib.metadata import PackageNotFoundError, version

from ._validation import (
    InvalidParameterError,
    InvalidParameterTypeError,
    NonFiniteGradientError,
)
from .arms import Arms
from .loop import GradientEstimator
from .objectives import LeastSquares, LogisticRegression, Objective, Quadratic, QuadraticForm
from .oracle import (
    CallableOracle,
    Gaussian,
    GaussianOracle,
    MiniBatchOracle,
    Rademacher,
    RademacherOracle,
    Truth,
    Uniform,
    UniformOracle,
)
from .rounds import GradientEstimate, estimate_gradient
from .selectors import (
    KLLCB,
    AnchoredPlan,
    AnchoredProgress,
    BudgetThompson,
    ChiSquareLCB,
    EEGrad,
    FixedArm,
    Greedy,
    IndexSelector,
    MemoryKLLCB,
    MemoryThompson,
    OptimalArm,
    Outlook,
    ProgressThompson,
    ProtocolError,
    RoundEvidence,
    RoundRobin,
    Selector,
    SpreadThompson,
    ThompsonVariance,
    all_rules,
    default_selector,
    make_rule,
    register_rule,
)
from .sgd import SGDResult, run_sgd
from .statistics import ArmStatistics

try:
    __version__ = version("eegrad")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "KLLCB",
    "AnchoredPlan",
    "AnchoredProgress",
    "ArmStatistics",
    "Arms",
    "BudgetThompson",
    "CallableOracle",
    "ChiSquareLCB",
    "EEGrad",
    "FixedArm",
    "Gaussian",
    "GaussianOracle",
    "GradientEstimate",
    "GradientEstimator",
    "Greedy",
    "IndexSelector",
    "InvalidParameterError",
    "InvalidParameterTypeError",
    "LeastSquares",
    "LogisticRegression",
    "MemoryKLLCB",
    "MemoryThompson",
    "MiniBatchOracle",
    "NonFiniteGradientError",
    "Objective",
    "OptimalArm",
    "Outlook",
    "ProgressThompson",
    "ProtocolError",
    "Quadratic",
    "QuadraticForm",
    "Rademacher",
    "RademacherOracle",
    "RoundEvidence",
    "RoundRobin",
    "SGDResult",
    "Selector",
    "SpreadThompson",
    "ThompsonVariance",
    "Truth",
    "Uniform",
    "UniformOracle",
    "__version__",
    "all_rules",
    "default_selector",
    "estimate_gradient",
    "make_rule",
    "register_rule",
    "run_sgd",
]
