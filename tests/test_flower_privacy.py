"""EEGradStrategy(privacy=CentralDP(...)): a release calibrated to every round's own n, its
accounting against dp-accounting, the limit on ε, and the refusal of Flower's fixed-n wrappers."""

import logging
import math
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("dp_accounting")

from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from eegrad import FixedArm, InvalidParameterError, NonFiniteGradientError
from eegrad.flower import CentralDP, EEGradStrategy, LocalGrid

sys.path.insert(0, str(Path(__file__).parent))
from test_flower import K, _app, _start, _strategy

DP = CentralDP(noise_multiplier=1.0, clipping_norm=1.0, delta=1e-5)


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _echo_app(update):
    """Clients that reply w − update(pid) with 10 samples each (and the spend a per-round
    client reports)."""
    app = ClientApp()

    @app.train()
    def train(msg, context):
        pid = int(context.node_config["partition-id"])
        w = msg.content["arrays"]["w"].numpy()
        rec = {"arrays": ArrayRecord({"w": Array(w - update(pid, w.size))}),
               "metrics": MetricRecord({"num-examples": 10, "cost": 1.0})}  # fmt: skip
        return Message(RecordDict(rec), reply_to=msg)

    return app


def test_epsilon_equals_dp_accounting_for_the_same_sequence_of_n():
    """One GaussianPrivacyEvent(zC/Δ, n_t, K) per round (Δ = 2rC, the release's replace-one
    sensitivity), sampled without replacement from the K nodes, replace-one neighbours: the
    recorded ε equals dp-accounting's own RDP for the sequence of n the rule chose."""
    from dp_accounting import dp_event, rdp
    from dp_accounting.privacy_accountant import NeighboringRelation

    strategy = _strategy(privacy=DP)
    _start(strategy, LocalGrid(_app(), K, seed=2), 15)
    arms = [r["arm"] for r in strategy.records]
    assert len(set(arms)) > 1
    acc = rdp.RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    for n, rec in zip(arms, strategy.records, strict=True):
        acc.compose(dp_event.SampledWithoutReplacementDpEvent(
            K, n, dp_event.GaussianDpEvent(DP.noise_multiplier * DP.clipping_norm
                                           / DP.sensitivity)))  # fmt: skip
        assert rec["epsilon"] == pytest.approx(acc.get_epsilon(DP.delta), rel=1e-12)
        assert rec["noise_std"] == pytest.approx(1.0 / n)


@pytest.mark.parametrize("n", [2, 5])
def test_the_released_noise_has_sd_zc_over_n(n):
    """Clients whose updates are 0: the released step is the noise alone. Over d = 40,000
    coordinates its sample SD estimates zC/n with SE σ/√(2d) = 0.35% of σ; 4 SE allowed."""
    d = 40_000
    dp = CentralDP(noise_multiplier=2.0, clipping_norm=3.0, delta=1e-5)
    strategy = EEGradStrategy(100.0, 1.0, selector=FixedArm(n), privacy=dp, rng=1)
    res = strategy.start(grid=LocalGrid(_echo_app(lambda pid, size: np.zeros(size)), K),
                         initial_arrays=ArrayRecord({"w": Array(np.zeros(d))}), num_rounds=1)  # fmt: skip
    step = res.arrays["w"].numpy()
    sigma = 2.0 * 3.0 / n
    assert abs(step.std() / sigma - 1.0) < 4 / np.sqrt(2 * d)
    assert abs(step.mean()) < 4 * sigma / np.sqrt(d)


def test_updates_are_clipped_and_averaged_with_equal_weights():
    """Updates of norm 100 along one axis, nearly noiseless (z = 1e-9): the step is the mean of
    the clipped updates, of norm rC (the update clip, r² + r⁴/4 = 1), whatever the clients'
    samples."""
    dp = CentralDP(noise_multiplier=1e-9, clipping_norm=2.0, delta=1e-5)

    def big(pid, size):
        u = np.zeros(size)
        u[0] = 100.0 * (1 + pid)
        return u

    strategy = EEGradStrategy(100.0, 1.0, selector=FixedArm(4), privacy=dp, rng=1)
    res = strategy.start(grid=LocalGrid(_echo_app(big), K),
                         initial_arrays=ArrayRecord({"w": Array(np.zeros(6))}), num_rounds=1)  # fmt: skip
    step = -res.arrays["w"].numpy()
    r = np.sqrt((np.sqrt(2.0) - 1.0) * 2.0)  # r² = (√(1 + 4a²) − 1)/(2a²), a = 1/2
    assert dp.update_clip == pytest.approx(r * 2.0)
    np.testing.assert_allclose(step, [dp.update_clip, 0, 0, 0, 0, 0], atol=1e-6)


def test_a_round_past_max_epsilon_is_not_run_and_the_checkpoint_keeps_the_state(tmp_path):
    ck = tmp_path / "run.npz"
    dp = CentralDP(1.0, 1.0, 1e-5, max_epsilon=12.0)
    strategy = _strategy(privacy=dp, checkpoint=ck)
    res = _start(strategy, LocalGrid(_app(), K, seed=2), 30)
    done = len(strategy.records)
    assert 0 < done < 30
    assert strategy.records[-1]["epsilon"] <= 12.0
    assert f"run ends after round {done}" in strategy.stopped
    assert sorted(res.train_metrics_clientapp) == list(range(1, done + 1))
    # started again, it resumes from the checkpoint and stops at the same round, saying so
    again = _strategy(privacy=dp, checkpoint=ck)
    _start(again, LocalGrid(_app(), K, seed=2), 30)
    assert again.records == strategy.records
    assert again.stopped == strategy.stopped


def test_a_resumed_private_run_ends_as_the_uninterrupted_one(tmp_path):
    full = _strategy(privacy=DP)
    res_full = _start(full, LocalGrid(_app(), K, seed=2), 10)
    ck = tmp_path / "run.npz"
    _start(_strategy(privacy=DP, checkpoint=ck), LocalGrid(_app(), K, seed=2), 4)
    again = _strategy(privacy=DP, checkpoint=ck)
    res = _start(again, LocalGrid(_app(), K, seed=2), 10)
    assert again.records == full.records  # the accountant, the noise stream and the rule
    np.testing.assert_array_equal(res.arrays["w"].numpy(), res_full.arrays["w"].numpy())


def test_a_resumed_private_run_restores_its_accountant_once_a_distinct_event(tmp_path,
                                                                            monkeypatch):
    """A checkpoint after 12 rounds holds the rounds' events merged (one entry a distinct
    (multiplier, sample size), counts adding up to the rounds), and resuming composes each
    once: the restore's cost is bounded by the distinct events, not the rounds done."""
    from dp_accounting import rdp

    ck = tmp_path / "run.npz"
    first = _strategy(privacy=DP, checkpoint=ck)
    _start(first, LocalGrid(_app(), K, seed=2), 12)
    ledger = first.state.private.state_dict()["compositions"]
    distinct = {r["arm"] for r in first.records}
    assert len(ledger) == len(distinct) < 12
    assert sum(e["count"] for e in ledger) == 12
    composed = []
    original = rdp.RdpAccountant._maybe_compose

    def counting(self, event, count, do_compose):
        if do_compose:
            composed.append(count)
        return original(self, event, count, do_compose)

    monkeypatch.setattr(rdp.RdpAccountant, "_maybe_compose", counting)
    again = _strategy(privacy=DP, checkpoint=ck)
    _start(again, LocalGrid(_app(), K, seed=2), 12)  # resumed at its end: nothing to run
    assert len(composed) == len(distinct)
    assert again.state.private.epsilon() == pytest.approx(first.records[-1]["epsilon"], rel=1e-12)


def test_flowers_fixed_n_wrappers_are_refused():
    from flwr.serverapp.strategy import (
        DifferentialPrivacyClientSideFixedClipping,
        DifferentialPrivacyServerSideFixedClipping,
    )

    for wrapper in (DifferentialPrivacyServerSideFixedClipping,
                    DifferentialPrivacyClientSideFixedClipping):  # fmt: skip
        wrapped = wrapper(_strategy(), noise_multiplier=1.0, clipping_norm=1.0,
                          num_sampled_clients=4)  # fmt: skip
        with pytest.raises(InvalidParameterError,
                           match=r"fixed num_sampled_clients = 4.*privacy=CentralDP"):  # fmt: skip
            _start(wrapped, LocalGrid(_app(), K, seed=2), 2)


def test_a_subclass_inside_a_fixed_n_wrapper_is_refused_too():
    # A subclass whose configure_train calls super()'s puts a frame of its own between the
    # wrapper and the guard: the guard walks the stack and still finds the wrapper.
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping

    from eegrad.flower import EEGradStrategy

    class Mine(EEGradStrategy):
        def configure_train(self, server_round, arrays, config, grid):
            return super().configure_train(server_round, arrays, config, grid)

    mine = Mine(budget=40.0, c_min=1.5, aggregation=lambda n: 0.5 * (n - 1.0), rng=3)
    wrapped = DifferentialPrivacyServerSideFixedClipping(mine, noise_multiplier=1.0,
                                                         clipping_norm=1.0, num_sampled_clients=4)  # fmt: skip
    with pytest.raises(InvalidParameterError, match=r"fixed num_sampled_clients = 4"):
        _start(wrapped, LocalGrid(_app(), K, seed=2), 2)
    _start(Mine(budget=40.0, c_min=1.5, rng=3), LocalGrid(_app(), K, seed=2), 2)  # unwrapped: runs


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"noise_multiplier": 0.0}, "noise_multiplier"), ({"clipping_norm": -1.0}, "clipping_norm"),
    ({"delta": 1.0}, "delta"), ({"delta": 0.0}, "delta"), ({"max_epsilon": 0.0}, "max_epsilon"),
    ({"noise_multiplier": "big"}, "noise_multiplier"),
    ({"noise_multiplier": "auto"}, "noise_multiplier"),  # without max_epsilon and rounds
    ({"noise_multiplier": "auto", "max_epsilon": 8.0}, "noise_multiplier"),  # without rounds
    ({"noise_multiplier": "auto", "max_epsilon": 8.0, "rounds": 0}, "rounds"),
    ({"rounds": 10}, "rounds"),  # rounds only with "auto"
])  # fmt: skip
def test_bad_privacy_settings_are_named(kwargs, name):
    args = {"noise_multiplier": 1.0, "clipping_norm": 1.0, "delta": 1e-5} | kwargs
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of CentralDP"):
        CentralDP(**args)
    with pytest.raises(TypeError, match="'privacy' parameter of EEGradStrategy"):
        _strategy(privacy={"noise_multiplier": 1.0})


def test_a_non_finite_update_under_dp_is_named():
    def bad(pid, size):
        u = np.zeros(size)
        u[0] = np.nan if pid == 3 else 0.0
        return u

    strategy = EEGradStrategy(100.0, 1.0, selector=FixedArm(K), privacy=DP, rng=1)
    with pytest.raises(NonFiniteGradientError, match=r"node \d+ at server round 1 .*NaN"):
        strategy.start(grid=LocalGrid(_echo_app(bad), K),
                       initial_arrays=ArrayRecord({"w": Array(np.zeros(3))}), num_rounds=1)  # fmt: skip


def test_auto_noise_spends_the_budget_over_the_planned_rounds_at_every_n():
    """noise_multiplier="auto": each n's z_n makes R rounds of n spend max_epsilon (to the
    bisection's relative 1e-3 on z: a z 0.1% smaller spends more than the target), checked with
    dp-accounting directly at the accountant's multiplier z_n C/Δ; z_n grows with n; the records' noise_std is z_n C/n and the rule is
    told d (z_n C/n)² for every arm."""
    from dp_accounting import dp_event, rdp
    from dp_accounting.privacy_accountant import NeighboringRelation

    R, eps = 30, 6.0
    dp = CentralDP("auto", 2.0, 1e-5, max_epsilon=eps, rounds=R)
    z = dp.multipliers(4, K)

    def epsilon(zn, n):
        acc = rdp.RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
        multiplier = zn * dp.clipping_norm / dp.sensitivity
        acc.compose(dp_event.SampledWithoutReplacementDpEvent(
            K, n, dp_event.GaussianDpEvent(multiplier)), R)  # fmt: skip
        return acc.get_epsilon(1e-5)

    for n in range(1, 5):
        assert epsilon(z[n - 1], n) <= eps
        assert epsilon(z[n - 1] * (1 - 1e-3), n) > eps
    assert np.all(np.diff(z) > 0)
    strategy = _strategy(privacy=dp)
    _start(strategy, LocalGrid(_app(), K, seed=2), 6)
    zN = dp.multipliers(strategy.N, K)
    for rec in strategy.records:
        assert rec["noise_std"] == pytest.approx(zN[rec["arm"] - 1] * 2.0 / rec["arm"], rel=1e-12)
    n = np.arange(1, strategy.N + 1)
    np.testing.assert_allclose(strategy.selector.release_noise, 4 * (zN * 2.0 / n) ** 2)
    assert strategy.records[-1]["epsilon"] <= eps


def test_a_rule_of_ones_own_that_takes_release_noise_is_told_it():
    """Under central DP a rule given to the strategy is rebuilt with the release's noise
    d (z_n C/n)² wherever its constructor takes ``release_noise`` — not only the spread rule
    (a rule of one's own here) — and a rule whose constructor does not take it runs as given."""

    class NoiseAwareFixed(FixedArm):
        def __init__(self, n, release_noise=None):
            super().__init__(n)
            self.release_noise = release_noise

        def get_params(self):
            return {**super().get_params(), "release_noise": self.release_noise}

    dp = CentralDP(1.0, 2.0, 1e-5)
    told = _strategy(privacy=dp, selector=NoiseAwareFixed(3))
    _start(told, LocalGrid(_app(), K, seed=2), 2)
    z = told.records[0]["noise_std"]  # z_3 C/3 at n = 3
    assert told.selector.release_noise is not None
    assert told.selector.release_noise[2] == pytest.approx(4 * z**2, rel=1e-12)  # d = 4
    plain = _strategy(privacy=dp, selector=FixedArm(3))
    _start(plain, LocalGrid(_app(), K, seed=2), 2)
    assert not hasattr(plain.selector, "release_noise")


@pytest.mark.parametrize("start", [0.01, 0.7, 3.0, 40.0])
@pytest.mark.parametrize("root", [0.05, 1.3, 17.0])
def test_least_passing_scale_brackets_the_root_of_a_closed_form(root, start):
    """On excess(z) = ln((root/z)^a) (a = 2, and a curved ln(1 + (root/z)^3) − ln 2), whose root
    is known: the z returned passes, the root lies within rtol·z below it, and it takes fewer
    calls than bisection's ⌈log2(1/rtol)⌉ after the bracket."""
    from eegrad.flower.privacy import least_passing_scale

    rtol = 1e-3
    for excess in (lambda z: 2.0 * math.log(root / z),
                   lambda z: math.log1p((root / z) ** 3) - math.log(2.0)):  # fmt: skip
        calls = []

        def counted(z, excess=excess, calls=calls):
            calls.append(z)
            return excess(z)

        z = least_passing_scale(counted, start=start, rtol=rtol)
        assert excess(z) <= 0
        assert root >= z * (1 - rtol)
        bracket = 1 + abs(math.ceil(math.log2(root / start)))
        assert len(calls) < bracket + math.ceil(math.log2(1 / rtol)), (len(calls), bracket)


def test_least_passing_scale_stops_at_its_floor():
    from eegrad.flower.privacy import least_passing_scale

    # every z passes: the halving stops below the floor and returns the least z tried
    z = least_passing_scale(lambda z: -1.0, start=1.0, floor=1e-3)
    assert 5e-4 <= z < 1e-3


def test_a_total_budget_in_a_metric_of_the_clients_is_refused_under_central_dp():
    """A client's reported cost (its samples, its seconds) would choose n and end the run
    unnoised: a total budget under CentralDP counts client trainings, or is refused naming
    cost_metric and the fix."""
    from flwr.serverapp.strategy import FedAvg

    from eegrad.flower import choose_clients

    with pytest.raises(InvalidParameterError, match=r"'cost_metric'.*unit='trainings'"):
        choose_clients(FedAvg(fraction_evaluate=0.0), budget=500, unit="samples", privacy=DP)
    with pytest.raises(InvalidParameterError, match=r"'cost_metric'"):
        EEGradStrategy(total_budget=50.0, cost_metric="cost", privacy=DP)
    ok = choose_clients(FedAvg(fraction_evaluate=0.0), budget=20, privacy=DP)
    assert ok.cost_metric is None


@pytest.mark.parametrize("total", [False, True])
def test_under_central_dp_no_reported_cost_reaches_the_records_or_the_choice_of_n(total):
    """Two federations whose clients report different costs (and samples) but send the same
    updates: under CentralDP their records, choices of n and models are the same — the
    records' budget_used is the shares sent (B a round) or the trainings counted (a total
    budget), never what a client reported."""
    def app(cost):
        inner = ClientApp()

        @inner.train()
        def train(msg, context):
            pid = int(context.node_config["partition-id"])
            w = msg.content["arrays"]["w"].numpy()
            rec = {"arrays": ArrayRecord({"w": Array(w - 0.1 * (pid + 1))}),
                   "metrics": MetricRecord({"num-examples": int(cost * 100),
                                            "cost": cost})}  # fmt: skip
            return Message(RecordDict(rec), reply_to=msg)

        return inner

    runs = []
    for cost in (0.5, 30.0):
        kw = ({"total_budget": 12.0, "cost_metric": None} if total else
              {"budget": 40.0, "c_min": 1.5})
        strategy = EEGradStrategy(**kw, privacy=DP, rng=4)
        res = strategy.start(grid=LocalGrid(app(cost), K, seed=2),
                             initial_arrays=ArrayRecord({"w": Array(np.zeros(4))}),
                             num_rounds=8)  # fmt: skip
        runs.append((strategy.records, res.arrays["w"].numpy()))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    if not total:  # B a round: what the clients were sent, D(n') + n'(B − D(n))/n
        rec = runs[0][0][0]
        n, replied = rec["arm"], rec["clients_replied"]
        D = 0.0  # no aggregation cost
        assert rec["budget_used"] == pytest.approx(D + replied * (40.0 - D) / n)
