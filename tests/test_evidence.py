"""The one record of a round (RoundEvidence through Selector.tell_round) and the outlook of an
ask: a rule reads what it declares, a record lacking it is refused by name, and the record gives
the rule what the separate channels gave."""

import numpy as np
import pytest

from eegrad import BudgetThompson, EEGrad, FixedArm, ProgressThompson, SpreadThompson
from eegrad.selectors.base import ProtocolError
from eegrad.selectors.evidence import READS, Outlook, RoundEvidence
from eegrad.spread import pair_sum

K, D = 8, 5


def _parts(rng, n):
    return rng.normal(size=(n, D)) + 1.0, rng.uniform(1, 3, size=n)


def test_every_rule_reads_only_known_names():
    for rule in (EEGrad(beta=4.0, P=1.0), FixedArm(2), SpreadThompson(population=K),
                 ProgressThompson(population=K), BudgetThompson(population=K)):  # fmt: skip
        assert rule.reads <= READS, rule
    assert BudgetThompson().reads >= {"costs", "budget_left"}
    assert "rounds_left" in BudgetThompson().reads  # it splits the budget over them
    assert "rounds_left" in ProgressThompson().reads
    assert not ProgressThompson().reads & {"costs", "budget_left"}
    assert SpreadThompson().uses_parts
    assert not EEGrad(beta=4.0, P=1.0).uses_parts


def test_a_record_that_lacks_what_the_rule_reads_is_refused_by_name():
    spread = SpreadThompson(population=K)
    spread.init(1, K, D)
    arms = spread.ask(1)
    with pytest.raises(ProtocolError, match=r"reads 'spread' of each round, which the record "
                                            r"told lacks \(it gives \['mean'\]\)"):  # fmt: skip
        spread.tell_round(RoundEvidence(arms, mean=np.ones((1, D))))
    progress = ProgressThompson(population=K)
    progress.init(1, K, D)
    arms = progress.ask(1)
    with pytest.raises(ProtocolError, match="reads 'signal'"):
        progress.tell_round(RoundEvidence(arms, pair_sums=np.array([1.0]),
                                          weights=np.ones((1, int(arms[0]) + 1))))  # fmt: skip
    fixed = FixedArm(2)
    fixed.init(1, K, D)
    with pytest.raises(ProtocolError, match="reads 'mean'"):
        fixed.tell_round(RoundEvidence(fixed.ask(1)))


def _state(rule):
    return {k: np.copy(v) for k, v in vars(rule).items() if isinstance(v, np.ndarray)}


def test_one_record_equals_the_separate_channels():
    # The local steps, the pair sums and the signal told in one record leave the rule as the
    # three separate calls did (same order: steps, spread, signal), round after round.
    rng = np.random.default_rng(0)
    one, three = (BudgetThompson(population=K) for _ in range(2))
    for rule in (one, three):
        rule.init(1, K, D)
    costs = np.arange(1.0, K + 1)
    last = None
    for t in range(1, 12):
        a1 = one.ask(t, outlook=Outlook(costs=costs, budget_left=100.0 - t))
        three.tell_costs(costs, budget_left=100.0 - t)
        a3 = three.ask(t)
        np.testing.assert_array_equal(a1, a3)
        n = int(a1[0]) + 1
        parts, w = _parts(rng, n)
        mean = np.average(parts, axis=0, weights=w)
        y = pair_sum(parts[None], w[None])
        steps = np.array([rng.uniform(1, 5)])
        persistence = None if last is None else np.array([float(mean @ last)])
        one.tell_round(RoundEvidence(a1, pair_sums=y, weights=w[None], local_steps=steps,
                                     mean_norm2=np.array([float(mean @ mean)]),
                                     persistence=persistence))  # fmt: skip
        three.tell_local_steps(a3, steps)
        three.tell_pair_sums(a3, y, w[None])
        three.tell_signal(a3, np.array([float(mean @ mean)]), persistence)
        last = mean
    s1, s3 = _state(one), _state(three)
    assert s1.keys() == s3.keys()
    for k in s1:
        np.testing.assert_array_equal(s1[k], s3[k], err_msg=k)


def test_an_outlook_the_rule_does_not_read_is_ignored_and_a_channel_for_it_refused():
    rule = SpreadThompson(population=K)
    rule.init(1, K, D)
    rule.ask(1, outlook=Outlook(rounds_left=4))
    assert not hasattr(rule, "_rounds_left")
    with pytest.raises(ProtocolError, match="'rounds_left' is not in its reads"):
        rule.tell_rounds_left(4)
    progress = ProgressThompson(population=K)
    progress.init(1, K, D)
    progress.ask(1, outlook=Outlook(costs=np.ones(K), budget_left=3.0, rounds_left=4))
    assert progress._rounds_left == 4
    assert not hasattr(progress, "_costs")
    with pytest.raises(ProtocolError, match="'costs' is not in its reads"):
        progress.tell_costs(np.ones(K))
    rate = BudgetThompson(population=K)
    rate.init(1, K, D)
    with pytest.raises(ValueError, match="'costs'"):
        rate.ask(1, outlook=Outlook(costs=-np.ones(K), budget_left=3.0))


def test_the_signal_channels_of_a_rule_that_reads_no_signal_are_refused():
    rule = SpreadThompson(population=K)
    rule.init(1, K, D)
    arms = rule.ask(1)
    with pytest.raises(ProtocolError, match="'local_steps' is not in its reads"):
        rule.tell_local_steps(arms, np.array([2.0]))
    with pytest.raises(ProtocolError, match="'signal' is not in its reads"):
        rule.tell_signal(arms, np.array([1.0]))
