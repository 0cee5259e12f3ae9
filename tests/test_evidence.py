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
                                            r"told by tell_round\(\) lacks \(it gives "
                                            r"\['mean'\]\)"):  # fmt: skip
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


def test_one_record_equals_the_pair_sums_channel_with_its_fields():
    # The local steps, the pair sums and the signal told in one record leave the rule as
    # tell_pair_sums given the same fields does, round after round: one record either way.
    rng = np.random.default_rng(0)
    one, other = (BudgetThompson(population=K) for _ in range(2))
    for rule in (one, other):
        rule.init(1, K, D)
    costs = np.arange(1.0, K + 1)
    last = None
    for t in range(1, 12):
        a1 = one.ask(t, outlook=Outlook(costs=costs, budget_left=100.0 - t))
        a3 = other.ask(t, outlook=Outlook(costs=costs, budget_left=100.0 - t))
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
        other.tell_pair_sums(a3, y, w[None], local_steps=steps,
                             mean_norm2=np.array([float(mean @ mean)]), persistence=persistence)
        last = mean
    s1, s3 = _state(one), _state(other)
    assert s1.keys() == s3.keys()
    for k in s1:
        np.testing.assert_array_equal(s1[k], s3[k], err_msg=k)


def test_an_outlook_the_rule_does_not_read_is_ignored_and_no_channel_goes_around_the_ask():
    rule = SpreadThompson(population=K)
    rule.init(1, K, D)
    rule.ask(1, outlook=Outlook(rounds_left=4))
    assert not hasattr(rule, "_rounds_left")
    progress = ProgressThompson(population=K)
    progress.init(1, K, D)
    progress.ask(1, outlook=Outlook(costs=np.ones(K), budget_left=3.0, rounds_left=4))
    assert progress._rounds_left == 4
    assert not hasattr(progress, "_costs")
    for channel in ("tell_costs", "tell_rounds_left", "tell_signal", "tell_local_steps"):
        assert not hasattr(progress, channel), channel  # the ask's outlook, the round's record
    rate = BudgetThompson(population=K)
    rate.init(1, K, D)
    with pytest.raises(ValueError, match="'costs'"):
        rate.ask(1, outlook=Outlook(costs=-np.ones(K), budget_left=3.0))


def test_every_channel_tells_one_record_refused_where_it_lacks_what_the_rule_reads():
    """B7: tell_pair_sums and tell_parts are records as tell_round's, so a rule that reads the
    signal is refused a round told without it (they skipped the check); a record with it is
    taken. B8: no channel adds to a round after it is told (the signal's and the local steps'
    side channels are gone: a round's fields come in its one record)."""
    rng = np.random.default_rng(1)
    for call in ("tell_pair_sums", "tell_parts"):
        rule = ProgressThompson(population=K)
        rule.init(1, K, D)
        arms = rule.ask(1)
        n = int(arms[0]) + 1
        parts, w = _parts(rng, n)
        args = ((pair_sum(parts[None], w[None]), w[None]) if call == "tell_pair_sums" else
                (parts[None], w[None]))  # fmt: skip
        with pytest.raises(ProtocolError, match=f"reads 'signal'.*told by {call}"):
            getattr(rule, call)(arms, *args)
        mean = np.average(parts, axis=0, weights=w)
        getattr(rule, call)(arms, *args, mean_norm2=np.array([float(mean @ mean)]))
        assert rule.rounds == 1
        with pytest.raises(ProtocolError, match="without a pending ask"):
            getattr(rule, call)(arms, *args, mean_norm2=np.array([float(mean @ mean)]))
