"""The drivers' one protocol (eegrad.recorder.RoundRecorder): the user's loop and the federated
run's rule driver check asks, records and withdrawals alike, and tell a rule the same record."""

import numpy as np
import pytest

from eegrad import EEGrad, FixedArm, GradientEstimator, InvalidParameterError, ProtocolError
from eegrad.recorder import RoundRecorder

pytest.importorskip("flwr")  # the rule driver lives in eegrad.flower

from eegrad.flower.driver import RuleDriver


def _drivers(rule_factory, T=2, N=3, dim=4):
    return (GradientEstimator(rule_factory(), N, T, dim, rng=0),
            RuleDriver(rule_factory(), N, T, dim, rng=0))  # fmt: skip


def _tell(driver, g):
    if isinstance(driver, GradientEstimator):
        driver.tell(g)
    else:
        driver.tell([g], {})


def test_both_drivers_are_one_protocol():
    for driver in _drivers(lambda: FixedArm(2)):
        assert isinstance(driver, RoundRecorder)


@pytest.mark.parametrize("index", [0, 1])
def test_asks_records_and_withdrawals_are_checked_alike(index):
    """One ask pending at a time; no ask past the T-th round (the rule driver asked on
    before); a withdraw only of a pending ask; at_most named where it is outside 1..N."""
    driver = _drivers(lambda: FixedArm(2))[index]
    with pytest.raises(ProtocolError, match="withdraw\\(\\) without a pending ask"):
        driver.withdraw()
    with pytest.raises(InvalidParameterError, match="at_most"):
        driver.ask(1, 4)
    assert driver.ask() == 2
    with pytest.raises(ProtocolError, match="ask\\(\\) called twice"):
        driver.ask()
    driver.withdraw()
    for _ in range(2):
        driver.ask()
        _tell(driver, np.ones(4))
    assert driver.done
    with pytest.raises(ProtocolError, match="all T = 2 rounds are told"):
        driver.ask()
    driver.next_iterate()
    assert driver.t == 0
    assert driver.ask() == 2


def test_the_same_rule_and_seed_asks_the_same_arms_through_either_driver():
    """The paper's rule told the same gradients through the user's loop and the rule driver
    (each told what the rule reads: the mean) asks the same n, round by round."""
    T, N, dim = 12, 3, 4
    loop, federated = _drivers(lambda: EEGrad(beta=1.0, P=1.0), T=T, N=N, dim=dim)
    rng = np.random.default_rng(5)
    for _ in range(T):
        n = loop.ask()
        assert federated.ask() == n
        g = rng.standard_normal(dim) / np.sqrt(n)
        loop.tell(g)
        federated.tell([g], {})
    # the federated driver gives the estimate in the model's arrays (here one, flat)
    np.testing.assert_allclose(loop.result(), np.concatenate(federated.result()))
