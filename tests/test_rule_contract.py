"""The contract every registered selection rule keeps (the idea of scikit-learn's
``check_estimator``): registry entry, parameters, the ask/tell protocol, shapes, errors,
warm-up and determinism. A rule registered anywhere is tested here without a line added;
``test_a_toy_rule_is_one_module`` registers one and runs it through the package."""

import numpy as np
import pytest

from eegrad import (
    EEGrad,
    InvalidParameterError,
    InvalidParameterTypeError,
    estimate_gradient,
    make_rule,
)
from eegrad.config import ConfigError
from eegrad.engines.numba_engine import unsupported_reason
from eegrad.experiment import build_selector
from eegrad.selectors import (
    IndexSelector,
    all_rules,
    register_rule,
    rule_info,
    unregister_rule,
)
from eegrad.studies import config_from_dict, run_study
from eegrad.testing import RULE_CHECKS, check_public_paths, check_rule

R, N, D = 3, 4, 2
SIGMA2 = np.array([4.0, 2.5, 2.0, 2.2])


def _make(info, **kw):
    return make_rule(info.name, **{**info.example, **kw})


RULES = [pytest.param(info, id=info.name) for info in all_rules()]
CHECKS = [pytest.param(check, id=check.__name__.removeprefix("check_")) for check in RULE_CHECKS]


@pytest.mark.parametrize("info", RULES)
def test_registry_entry(info):
    assert isinstance(info.label, str)
    assert info.label
    assert info.cls.rule_name == info.name
    assert rule_info(info.cls.__name__) is info
    assert [i.name for i in all_rules()].count(info.name) == 1


@pytest.mark.parametrize("info", RULES)
def test_unknown_and_missing_parameters_are_named(info):
    with pytest.raises(InvalidParameterError, match="no parameter 'bogus'"):
        make_rule(info.name, **info.example, bogus=1)
    for key in info.required():
        with pytest.raises(InvalidParameterError, match=repr(key)):
            make_rule(info.name)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("info", RULES)
def test_common_contract(info, check):
    """Every check of eegrad.testing (the public form of this contract) on every registered
    rule: parameters, the ask/tell protocol, errors, determinism, warm-up and the five public
    paths (each runs the rule or refuses it by name)."""
    check(_make(info))


def test_check_rule_runs_every_check_and_names_the_failing_one():
    class ForgetsItsScale(IndexSelector):
        """A rule whose get_params does not round-trip (a mistake check_rule must catch)."""

        def __init__(self, scale: float = 1.0):
            super().__init__()
            self.scale = float(scale)

        def get_params(self):
            return {"scale": self.scale + 1.0}

        def index(self, t):
            return self.scale * np.linalg.norm(self.stats.mean, axis=2)

    with pytest.raises(AssertionError, match="check_parameters_round_trip failed"):
        check_rule(ForgetsItsScale())
    with pytest.raises(InvalidParameterTypeError, match="'rule' parameter of check_rule"):
        check_rule(EEGrad)


def test_a_path_that_crashes_fails_check_public_paths():
    """A rule that crashes in the simulator with a foreign error (as SpreadThompson's tell
    once did with a TypeError) fails the paths check, naming the path."""

    class CrashesInTheSimulator(IndexSelector):
        def tell(self, arms, gradients, *, check=True):
            raise TypeError("boom")

        def index(self, t):
            return np.linalg.norm(self.stats.mean, axis=2)

    with pytest.raises(AssertionError, match=r"through estimate_gradient\(engine='numpy'\)"):
        check_public_paths(CrashesInTheSimulator())


def test_rules_that_learn_from_parts_are_refused_by_the_simulator_by_name():
    from eegrad import GaussianOracle, Quadratic, run_sgd
    from eegrad.arms import Arms

    oracle = GaussianOracle(Quadratic(d=D), Arms(SIGMA2))
    for info in all_rules():
        if info.simulated:
            continue
        for engine in ("numpy", "numba"):
            with pytest.raises(InvalidParameterError, match=info.cls.__name__ + ".*parts"):
                estimate_gradient(oracle, _make(info), np.ones((R, D)), 12, rng=0, engine=engine)
        with pytest.raises(InvalidParameterError, match="'selector' parameter of run_sgd"):
            run_sgd(oracle, _make(info), np.ones((R, D)), T=12, K=2, eta=0.5, rng=0)


@pytest.mark.parametrize("info", RULES)
def test_configuration_builds_what_make_rule_builds(info):
    table = {"rule": info.name, **info.example}
    data = {"arms": {"sigma2": SIGMA2.tolist()}, "selector": table}
    if not info.simulated:  # the simulator produces no parts: a clear error, not a failed run
        with pytest.raises(ConfigError, match="parts"):
            config_from_dict(data, "t.toml")
        return
    cfg = config_from_dict(data, "t.toml")
    assert build_selector(cfg.selector).get_params() == _make(info).get_params()


@pytest.mark.parametrize("info", RULES)
def test_the_compiled_flag_is_what_the_engine_runs(info):
    from eegrad import Arms, GaussianOracle, Quadratic

    oracle = GaussianOracle(Quadratic(d=D), Arms(SIGMA2))
    at = oracle.at(np.ones((R, D)))
    sel = _make(info)
    sel.init(R, N, D, truth=at.truth())
    assert (unsupported_reason(at, sel) is None) == info.compiled


@pytest.fixture
def toy_rule():
    @register_rule("toy_smallest_mean_norm", label="toy rule")
    class SmallestMeanNorm(IndexSelector):
        """Each arm twice, then the arm whose outputs' mean is shortest (a toy)."""

        def __init__(self, scale: float = 1.0):
            super().__init__()
            if not scale > 0:
                raise InvalidParameterError(f"The 'scale' parameter must be > 0. Got {scale!r}.")
            self.scale = scale

        def get_params(self):
            return {"scale": self.scale}

        def index(self, t):
            return self.scale * np.linalg.norm(self.stats.mean, axis=2)

    yield rule_info("toy_smallest_mean_norm")
    unregister_rule("toy_smallest_mean_norm")


def test_a_toy_rule_is_one_module(toy_rule):
    # Registered in one place, it is built from a configuration (its parameter checked by its
    # class), runs in a study, is named in tables, and keeps the contract above.
    data = {"name": "toy", "study": "sgd", "realizations": 8, "T": [8], "K": 2, "engine": "numpy",
            "arms": {"sigma2": SIGMA2.tolist()},
            "selector": {"rule": "toy_smallest_mean_norm", "scale": 2}}  # fmt: skip
    cfg = config_from_dict(data, "toy.toml")
    assert cfg.selector.value("scale") == 2.0
    study = run_study(cfg)
    assert "toy_smallest_mean_norm" in {r["method"] for r in study.rows}
    with pytest.raises(ConfigError, match="'scale' parameter must be > 0"):
        config_from_dict({**data, "selector": {"rule": "toy_smallest_mean_norm", "scale": -1.0}})
    check_rule(toy_rule.cls(scale=2.0))


TOY_RULE_MODULE = '''
"""A toy rule: always the largest arm (one module, found by discovery)."""
import numpy as np

from eegrad.selectors.base import Selector
from eegrad.selectors.registry import register_rule


@register_rule("toy_largest_found", label="largest arm (toy)")
class ToyLargest(Selector):
    def _select(self, t):
        R, N, _ = self._shape
        return np.full(R, N - 1, dtype=np.int64)
'''


def test_a_rule_module_placed_in_the_package_is_found(tmp_path, monkeypatch):
    """Registration by discovery: a module in the selectors package (a folder added to its
    path) is found by the registry on its first use, with no import to add, and passes the
    common checks."""
    import sys

    import eegrad.selectors
    from eegrad.selectors import registry

    (tmp_path / "toy_largest_rule.py").write_text(TOY_RULE_MODULE)
    monkeypatch.setattr(eegrad.selectors, "__path__", [*eegrad.selectors.__path__, str(tmp_path)])
    try:
        info = registry.rule_info("toy_largest_found")
        assert info.cls.__name__ == "ToyLargest"
        rule = registry.make_rule("toy_largest_found")
        rule.init(1, 4, 2)
        assert rule.ask(1).tolist() == [3]
    finally:
        registry.unregister_rule("toy_largest_found")
        sys.modules.pop("eegrad.selectors.toy_largest_rule", None)
