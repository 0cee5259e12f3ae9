"""The contract every registered selection rule keeps (the idea of scikit-learn's
``check_estimator``): registry entry, parameters, the ask/tell protocol, shapes, errors,
warm-up and determinism. A rule registered anywhere is tested here without a line added;
``test_a_toy_rule_is_one_module`` registers one and runs it through the package."""

import numpy as np
import pytest

from eegrad import InvalidParameterError, ProtocolError, make_rule
from eegrad.config import ConfigError, config_from_dict
from eegrad.engines.numba_engine import unsupported_reason
from eegrad.experiment import build_selector, run_study
from eegrad.oracle import Truth
from eegrad.selectors import (
    IndexSelector,
    MemoryRule,
    all_rules,
    register_rule,
    rule_info,
    unregister_rule,
)

R, N, D = 3, 4, 2
SIGMA2 = np.array([4.0, 2.5, 2.0, 2.2])
TRUTH = Truth(sigma2=SIGMA2, S=np.ones(R))


def _make(info, **kw):
    return make_rule(info.name, **{**info.example, **kw})


def _tell(sel, arms, rng):
    """Tell a round: Gaussian gradients of variance σ² of the arms (as parts for a rule that
    learns from parts: n parts whose mean has that variance)."""
    scale = np.sqrt(SIGMA2[arms])[:, None]
    if sel.uses_parts:
        m = int(arms.max()) + 1
        parts = rng.standard_normal((R, m, D)) * scale[:, :, None] * np.sqrt(arms + 1)[:, None, None]
        weights = (np.arange(m)[None, :] <= arms[:, None]).astype(float)
        sel.tell_parts(arms, parts, weights)
    else:
        sel.tell(arms, rng.standard_normal((R, D)) * scale)


def _run(sel, rounds, seed=0):
    rng = np.random.default_rng(seed)
    sel.init(R, N, D, truth=TRUTH)
    picks = []
    for t in range(1, rounds + 1):
        arms = sel.ask(t)
        picks.append(arms.copy())
        _tell(sel, arms, rng)
    return np.array(picks)


RULES = [pytest.param(info, id=info.name) for info in all_rules()]


@pytest.mark.parametrize("info", RULES)
def test_registry_entry(info):
    assert isinstance(info.label, str)
    assert info.label
    assert info.cls.rule_name == info.name
    assert rule_info(info.cls.__name__) is info
    assert [i.name for i in all_rules()].count(info.name) == 1


@pytest.mark.parametrize("info", RULES)
def test_parameters_round_trip(info):
    sel = _make(info)
    params = sel.get_params()
    assert set(params) <= set(info.parameters())
    again = type(sel)(**params)
    assert again.get_params() == params
    assert repr(again).startswith(f"{info.cls.__name__}(")


@pytest.mark.parametrize("info", RULES)
def test_unknown_and_missing_parameters_are_named(info):
    with pytest.raises(InvalidParameterError, match="no parameter 'bogus'"):
        make_rule(info.name, **info.example, bogus=1)
    for key in info.required():
        with pytest.raises(InvalidParameterError, match=repr(key)):
            make_rule(info.name)


@pytest.mark.parametrize("info", RULES)
def test_ask_tell_protocol(info):
    sel = _make(info)
    with pytest.raises(ProtocolError):
        sel.ask()
    rounds = max(sel.min_rounds(N), 3 * N)
    picks = _run(sel, rounds)
    assert picks.shape == (rounds, R)
    assert picks.dtype == np.int64
    assert picks.min() >= 0
    assert picks.max() < N
    arms = sel.ask()
    with pytest.raises(ProtocolError):
        sel.ask()  # twice without a tell
    with pytest.raises(ProtocolError):
        sel.withdraw() or sel.tell(arms, np.zeros((R, D)))  # the ask was withdrawn
    arms = sel.ask()
    other = (arms + 1) % N
    with pytest.raises(ProtocolError):
        sel.tell_parts(other, np.zeros((R, 1, D)), np.ones((R, 1)))
    sel.next_iterate(truth=TRUTH)
    assert sel.ask().shape == (R,)
    sel.reset()
    assert sel.ask(1).shape == (R,)


@pytest.mark.parametrize("info", RULES)
def test_bad_gradients_are_named(info):
    sel = _make(info)
    sel.init(R, N, D, truth=TRUTH)
    arms = sel.ask()
    with pytest.raises(InvalidParameterError, match="'parts'"):
        sel.tell_parts(arms, np.zeros((R, 2, D + 1)), np.ones((R, 2)))
    bad = np.zeros((R, 2, D))
    bad[0, 0, 0] = np.nan
    with pytest.raises(InvalidParameterError, match="finite"):
        sel.tell_parts(arms, bad, np.ones((R, 2)))
    if not sel.uses_parts:
        with pytest.raises(InvalidParameterError, match="'gradients'"):
            sel.tell(arms, np.zeros((R, D + 1)))


@pytest.mark.parametrize("info", RULES)
def test_choices_depend_only_on_the_seed_and_the_observations(info):
    a = _run(_make(info), 5 * N, seed=3)
    b = _run(_make(info), 5 * N, seed=3)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("info", RULES)
def test_warm_up(info):
    sel = _make(info)
    picks = _run(sel, sel.min_rounds(N))
    if isinstance(sel, IndexSelector | MemoryRule):  # Algorithm 1: every arm twice, in order
        expected = np.tile(np.arange(N), 2)
        np.testing.assert_array_equal(picks, np.repeat(expected[:, None], R, axis=1))
    if not sel.needs_truth:
        sel.init(R, N, D)  # runs without the simulator's truth
        assert sel.ask().shape == (R,)


@pytest.mark.parametrize("info", RULES)
def test_configuration_builds_what_make_rule_builds(info):
    table = {"rule": info.name, **info.example}
    data = {"arms": {"sigma2": SIGMA2.tolist()}, "selector": table}
    if info.cls.uses_parts:  # the simulator produces no parts: a clear error, not a failed run
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
    test_ask_tell_protocol(toy_rule)
    test_choices_depend_only_on_the_seed_and_the_observations(toy_rule)
    test_warm_up(toy_rule)


@pytest.mark.parametrize("info", RULES)
def test_summaries_are_checked_at_the_public_boundary(info):
    sel = _make(info)
    sel.init(R, N, D, truth=TRUTH)
    assert sel.sizes == (R, N, D)
    assert sel.tell_needs() in ("summary", "gram", "full", "pairs")
    arms = sel.ask()
    with pytest.raises(InvalidParameterError, match="'sq_increment'"):
        sel.tell_summary(arms, -np.ones(R))
    with pytest.raises(InvalidParameterError, match="'pair_sums'"):
        sel.tell_pair_sums(arms, np.full(R, np.nan), np.ones((R, 2)))
    with pytest.raises(InvalidParameterError, match="'weights'"):
        sel.tell_pair_sums(arms, np.ones(R), np.zeros((R, 2)))
    if sel.uses_parts:
        sel.tell_pair_sums(arms, np.ones(R), np.ones((R, 2)))
    else:
        with pytest.raises(ProtocolError, match="parts"):
            sel.tell_pair_sums(arms, np.ones(R), np.ones((R, 2)))
    with pytest.raises(ProtocolError):
        _make(info).absorb(np.zeros((R, N), np.int64), 0)
