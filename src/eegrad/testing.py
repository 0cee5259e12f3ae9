"""The common contract of selection rules, as public checks (the idea of scikit-learn's
``check_estimator``).

A rule written by a user — a :class:`~eegrad.Selector` subclass, registered or not — is checked
with one call::

    from eegrad.testing import check_rule
    check_rule(MyRule(scale=2.0))

:func:`check_rule` runs every check of :data:`RULE_CHECKS` on a fresh copy of the rule and
raises :class:`AssertionError` naming the check that failed. Each check is also a public
function of one argument (the rule), so a test suite can parametrise over them; eegrad's own
contract tests (``tests/test_rule_contract.py``) run every check on every registered rule.

What the checks ask of a rule:

- its parameters round-trip (``type(rule)(**rule.get_params())`` has the same parameters), and
  its ``repr`` names its class;
- the ask/tell protocol: ``ask`` before ``init``, two asks, a tell after a withdrawn ask and a
  tell of other arms are each a :class:`~eegrad.ProtocolError`; choices are arms 0..N−1 of
  dtype int64, shape (R,); ``next_iterate`` and ``reset`` leave it ready to ask;
- bad gradients and summaries are refused at the public boundary with an error naming the
  parameter (``'gradients'``, ``'parts'``, ``'sq_increment'``, ``'pair_sums'``, ``'weights'``);
- its choices depend only on its parameters and on what it was told;
- index rules and rules with memory pull every arm twice first, in order (Algorithm 1); a rule
  that does not need the simulator's truth runs without it;
- the five public paths — :func:`~eegrad.estimate_gradient` on the NumPy and (with Numba
  installed) the compiled engine, :func:`~eegrad.run_sgd`, and
  :class:`~eegrad.GradientEstimator`'s ``tell`` and ``tell_parts`` — each run, or refuse with
  eegrad's own error (:class:`~eegrad.InvalidParameterError` or
  :class:`~eegrad.InvalidParameterTypeError`) whose message names the rule's class.

The checks use no test framework: they need only NumPy (and Numba for the compiled path, which
is checked where it is installed).
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ._validation import InvalidParameterError, InvalidParameterTypeError
from .arms import Arms
from .engines import EngineFallbackWarning, numba_available
from .loop import GradientEstimator
from .objectives import Quadratic
from .oracle import GaussianOracle, Truth
from .rounds import estimate_gradient
from .selectors.base import IndexSelector, ProtocolError, Selector
from .selectors.memory import MemoryRule
from .sgd import run_sgd

__all__ = [
    "RULE_CHECKS",
    "check_ask_tell_protocol",
    "check_bad_gradients_are_named",
    "check_choices_depend_only_on_the_seed_and_the_observations",
    "check_parameters_round_trip",
    "check_predicted_variances",
    "check_public_paths",
    "check_rule",
    "check_summaries_are_checked_at_the_public_boundary",
    "check_warm_up",
]

#: Sizes of the checks' runs: R realizations, N arms, d coordinates, and the arms' σ_n².
R, N, D = 3, 4, 2
SIGMA2 = np.array([4.0, 2.5, 2.0, 2.2])


def _truth() -> Truth:
    return Truth(sigma2=SIGMA2.copy(), S=np.ones(R))


@contextmanager
def _raises(kinds: type | tuple[type, ...], match: str | None = None,
            what: str = "") -> Iterator[None]:  # fmt: skip
    """Assert that the block raises one of ``kinds`` whose message matches ``match``."""
    try:
        yield
    except kinds as err:
        if match is not None and not re.search(match, str(err)):
            raise AssertionError(f"{what}: the error {type(err).__name__}({str(err)!r}) does not "
                                 f"match {match!r}") from err  # fmt: skip
        return
    names = kinds.__name__ if isinstance(kinds, type) else " or ".join(k.__name__ for k in kinds)
    raise AssertionError(f"{what}: expected {names}, nothing was raised")


def _tell(sel: Selector, arms: np.ndarray, rng: np.random.Generator) -> None:
    """Tell a round: Gaussian gradients of variance σ² of the arms (as parts for a rule that
    learns from parts: n parts whose mean has that variance)."""
    scale = np.sqrt(SIGMA2[arms])[:, None]
    if sel.uses_parts:
        m = int(arms.max()) + 1
        parts = rng.standard_normal((R, m, D)) * scale[:, :, None] * np.sqrt(arms + 1)[:, None, None]
        weights = (np.arange(m)[None, :] <= arms[:, None]).astype(float)
        sel.tell_parts(arms, parts, weights, **_signal_of(sel, parts, weights))
    else:
        sel.tell(arms, rng.standard_normal((R, D)) * scale)


def _signal_of(sel: Selector, parts: np.ndarray, weights: np.ndarray) -> dict[str, Any]:
    """The record's signal for a rule that reads it (the squared norm of the parts' weighted
    mean), as a driver tells it with the parts: one record."""
    if "signal" not in sel.reads:
        return {}
    mean = np.einsum("rk,rkd->rd", weights, parts) / weights.sum(axis=1, keepdims=True)
    return {"mean_norm2": np.einsum("rd,rd->r", mean, mean)}


def _run(sel: Selector, rounds: int, seed: int = 0) -> np.ndarray:
    """``rounds`` rounds of ``sel`` on R realizations with the simulator's truth; the picks,
    shape (rounds, R)."""
    rng = np.random.default_rng(seed)
    sel.init(R, N, D, truth=_truth())
    picks = []
    for t in range(1, rounds + 1):
        arms = sel.ask(t)
        picks.append(arms.copy())
        _tell(sel, arms, rng)
    return np.array(picks)


def check_parameters_round_trip(rule: Selector) -> None:
    """``type(rule)(**rule.get_params())`` has the same parameters; its ``repr`` names the
    class."""
    params = rule.get_params()
    again = type(rule)(**params)
    if again.get_params() != params:
        raise AssertionError(f"{type(rule).__name__}(**get_params()) has the parameters "
                             f"{again.get_params()!r}, not {params!r}")  # fmt: skip
    if not repr(again).startswith(f"{type(rule).__name__}("):
        raise AssertionError(f"repr {again!r} does not start with the class name")


def check_ask_tell_protocol(rule: Selector) -> None:
    """Asks before ``init``, twice, after a withdrawal and of other arms are refused; choices
    are valid arms; ``next_iterate`` and ``reset`` leave the rule ready."""
    sel = copy.deepcopy(rule)
    what = f"{type(rule).__name__}"
    with _raises(ProtocolError, what=f"{what}.ask() before init()"):
        sel.ask()
    rounds = max(sel.min_rounds(N), 3 * N)
    picks = _run(sel, rounds)
    if picks.shape != (rounds, R) or picks.dtype != np.int64:
        raise AssertionError(f"{what}: choices of shape {picks.shape} and dtype {picks.dtype}, "
                             f"not ({rounds}, {R}) and int64")  # fmt: skip
    if picks.min() < 0 or picks.max() >= N:
        raise AssertionError(f"{what}: a choice outside the arms 0..{N - 1}")
    arms = sel.ask()
    with _raises(ProtocolError, what=f"{what}.ask() twice without a tell"):
        sel.ask()
    sel.withdraw()
    with _raises(ProtocolError, what=f"{what}.tell() after the ask was withdrawn"):
        sel.tell(arms, np.zeros((R, D)))
    arms = sel.ask()
    with _raises(ProtocolError, what=f"{what}.tell_parts() of other arms than asked"):
        sel.tell_parts((arms + 1) % N, np.zeros((R, 1, D)), np.ones((R, 1)))
    sel.next_iterate(truth=_truth())
    if sel.ask().shape != (R,):
        raise AssertionError(f"{what}: ask() after next_iterate() is not of shape ({R},)")
    sel.reset()
    if sel.ask(1).shape != (R,):
        raise AssertionError(f"{what}: ask() after reset() is not of shape ({R},)")


def check_bad_gradients_are_named(rule: Selector) -> None:
    """Parts of the wrong shape or with NaN, and gradients of the wrong shape, are refused with
    an :class:`~eegrad.InvalidParameterError` naming the parameter."""
    sel = copy.deepcopy(rule)
    sel.init(R, N, D, truth=_truth())
    arms = sel.ask()
    what = type(rule).__name__
    with _raises(InvalidParameterError, "'parts'", f"{what}.tell_parts() of the wrong length"):
        sel.tell_parts(arms, np.zeros((R, 2, D + 1)), np.ones((R, 2)))
    bad = np.zeros((R, 2, D))
    bad[0, 0, 0] = np.nan
    with _raises(InvalidParameterError, "finite", f"{what}.tell_parts() with NaN"):
        sel.tell_parts(arms, bad, np.ones((R, 2)))
    if not sel.uses_parts:
        with _raises(InvalidParameterError, "'gradients'", f"{what}.tell() of the wrong length"):
            sel.tell(arms, np.zeros((R, D + 1)))


def check_choices_depend_only_on_the_seed_and_the_observations(rule: Selector) -> None:
    """Two copies told the same gradients choose the same arms."""
    a = _run(copy.deepcopy(rule), 5 * N, seed=3)
    b = _run(copy.deepcopy(rule), 5 * N, seed=3)
    if not np.array_equal(a, b):
        raise AssertionError(f"{type(rule).__name__}: two copies told the same gradients chose "
                             "different arms")  # fmt: skip


def check_warm_up(rule: Selector) -> None:
    """Index rules and rules with memory pull every arm twice first, in order (Algorithm 1);
    a rule that does not need the simulator's truth runs without it."""
    sel = copy.deepcopy(rule)
    picks = _run(sel, sel.min_rounds(N))
    if isinstance(sel, IndexSelector | MemoryRule):
        expected = np.repeat(np.tile(np.arange(N), 2)[:, None], R, axis=1)
        if not np.array_equal(picks, expected):
            raise AssertionError(f"{type(rule).__name__}: the first 2N rounds pulled "
                                 f"{picks[:, 0].tolist()}, not every arm twice in order")  # fmt: skip
    if not sel.needs_truth:
        sel.init(R, N, D)
        if sel.ask().shape != (R,):
            raise AssertionError(f"{type(rule).__name__}: ask() without the truth is not of "
                                 f"shape ({R},)")  # fmt: skip


def check_predicted_variances(rule: Selector) -> None:
    """``predicted()`` is None (a rule that fits no variances) or, after the warm-up, the
    fitted variance of every arm: finite and >= 0, of shape (R, N); ``step_scale()`` is None
    or of shape (R,) in [0, 1]."""
    sel = copy.deepcopy(rule)
    _run(sel, max(sel.min_rounds(N), 2 * N) + N)
    v = sel.predicted()
    if v is None:
        return
    v = np.asarray(v)
    if v.shape != (R, N) or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise AssertionError(f"{type(rule).__name__}: predicted() is not a finite, "
                             f"non-negative array of shape ({R}, {N}): {v!r}")  # fmt: skip
    rho = sel.step_scale(np.zeros(R, np.int64))
    if rho is not None and (np.shape(rho) != (R,) or not np.all((np.asarray(rho) >= 0)
                                                                & (np.asarray(rho) <= 1))):  # fmt: skip
        raise AssertionError(f"{type(rule).__name__}: step_scale() is not None nor of shape "
                             f"({R},) in [0, 1]: {rho!r}")  # fmt: skip


def check_summaries_are_checked_at_the_public_boundary(rule: Selector) -> None:
    """``tell_summary`` and ``tell_pair_sums`` refuse bad values by name; pair sums are taken
    exactly by the rules that learn from parts; ``absorb`` before ``init`` is refused."""
    sel = copy.deepcopy(rule)
    what = type(rule).__name__
    sel.init(R, N, D, truth=_truth())
    if sel.sizes != (R, N, D):
        raise AssertionError(f"{what}.sizes is {sel.sizes}, not {(R, N, D)} after init")
    if sel.tell_needs() not in ("summary", "gram", "full", "pairs"):
        raise AssertionError(f"{what}.tell_needs() is {sel.tell_needs()!r}")
    arms = sel.ask()
    with _raises(InvalidParameterError, "'sq_increment'", f"{what}.tell_summary(-1)"):
        sel.tell_summary(arms, -np.ones(R))
    with _raises(InvalidParameterError, "'pair_sums'", f"{what}.tell_pair_sums(NaN)"):
        sel.tell_pair_sums(arms, np.full(R, np.nan), np.ones((R, 2)))
    with _raises(InvalidParameterError, "'weights'", f"{what}.tell_pair_sums(weights 0)"):
        sel.tell_pair_sums(arms, np.ones(R), np.zeros((R, 2)))
    if sel.uses_parts:
        signal = {"mean_norm2": np.ones(R)} if "signal" in sel.reads else {}
        sel.tell_pair_sums(arms, np.ones(R), np.ones((R, 2)), **signal)
    else:
        with _raises(ProtocolError, "parts", f"{what}.tell_pair_sums()"):
            sel.tell_pair_sums(arms, np.ones(R), np.ones((R, 2)))
    with _raises(ProtocolError, what=f"{what}.absorb() before init()"):
        copy.deepcopy(rule).absorb(np.zeros((R, N), np.int64), 0)


def _path_runs_or_refuses(rule: Selector, path: str, run: Callable[[Selector], Any]) -> None:
    """Run ``run`` on a copy of the rule: it completes, or raises eegrad's own error naming
    the rule's class."""
    name = type(rule).__name__
    try:
        run(copy.deepcopy(rule))
    except (InvalidParameterError, InvalidParameterTypeError) as err:
        if name not in str(err):
            raise AssertionError(f"{name} through {path}: refused with an error that does not "
                                 f"name the rule: {err}") from err  # fmt: skip
    except Exception as err:
        raise AssertionError(f"{name} through {path}: neither ran nor refused with eegrad's "
                             f"own error, but raised {type(err).__name__}: {err}") from err  # fmt: skip


def check_public_paths(rule: Selector) -> None:
    """The five public paths — ``estimate_gradient`` (NumPy and compiled engine), ``run_sgd``,
    ``GradientEstimator.tell`` and ``GradientEstimator.tell_parts`` — run the rule or refuse
    it with an :class:`~eegrad.InvalidParameterError` (or ``InvalidParameterTypeError``) that
    names it."""
    oracle = GaussianOracle(Quadratic(D), Arms(SIGMA2))
    w = np.ones((R, D))
    T = max(rule.min_rounds(N), 3 * N)

    def estimate(engine: str) -> Callable[[Selector], Any]:
        def run(sel: Selector) -> Any:
            with warnings.catch_warnings():  # a rule without a kernel runs on NumPy: expected
                warnings.simplefilter("ignore", EngineFallbackWarning)
                return estimate_gradient(oracle, sel, w, T, rng=0, engine=engine)

        return run

    def loop(parts: bool) -> Callable[[Selector], Any]:
        def run(sel: Selector) -> None:
            est = GradientEstimator(sel, N, T, dim=D, rng=0)  # the engine users get
            rng = np.random.default_rng(0)
            for _ in range(2):
                while not est.done:
                    n = est.ask()
                    g = rng.standard_normal((n, D)) * np.sqrt(SIGMA2[n - 1] * n)
                    if parts:
                        est.tell_parts(g, np.ones(n))
                    else:
                        est.tell(g.mean(axis=0))
                if not np.all(np.isfinite(est.result())):
                    raise AssertionError("the estimate is not finite")
                est.next_iterate()

        return run

    paths = {
        "estimate_gradient(engine='numpy')": estimate("numpy"),
        "run_sgd": lambda sel: run_sgd(oracle, sel, w, T=T, K=2, eta=0.5, rng=0, engine="numpy"),
        "GradientEstimator.tell": loop(parts=False),
        "GradientEstimator.tell_parts": loop(parts=True),
    }
    if numba_available():
        paths["estimate_gradient(engine='numba')"] = estimate("numba")
    for path, run in paths.items():
        _path_runs_or_refuses(rule, path, run)


#: Every check :func:`check_rule` runs, in order.
RULE_CHECKS: tuple[Callable[[Selector], None], ...] = (
    check_parameters_round_trip,
    check_ask_tell_protocol,
    check_bad_gradients_are_named,
    check_choices_depend_only_on_the_seed_and_the_observations,
    check_warm_up,
    check_predicted_variances,
    check_summaries_are_checked_at_the_public_boundary,
    check_public_paths,
)


def check_rule(rule: Selector) -> None:
    """Check that a selection rule keeps eegrad's common contract (the module's list).

    Parameters
    ----------
    rule : Selector
        An instance with the parameters to check; each check works on its own copy, so
        ``rule`` itself is left as it was.

    Raises
    ------
    InvalidParameterTypeError
        If ``rule`` is not a :class:`~eegrad.Selector`.
    AssertionError
        At the first check the rule fails, naming the check and what went wrong.

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad import IndexSelector
    >>> from eegrad.testing import check_rule
    >>> class SmallestMeanNorm(IndexSelector):
    ...     '''Each arm twice, then the arm whose outputs' mean is shortest (a toy).'''
    ...     def index(self, t):
    ...         return np.linalg.norm(self.stats.mean, axis=2)
    >>> check_rule(SmallestMeanNorm())
    """
    if not isinstance(rule, Selector):
        raise InvalidParameterTypeError(
            f"The 'rule' parameter of check_rule must be a Selector instance (e.g. EEGrad()). "
            f"Got {rule!r} instead."
        )
    for check in RULE_CHECKS:
        try:
            check(rule)
        except AssertionError as err:
            raise AssertionError(f"{check.__name__} failed for {rule!r}: {err}") from err
