"""Your rounds, your spend: choose_clients with no budget takes what the wrapped FedAvg spends
in num_rounds, and the rule splits it over those rounds."""

import logging

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg

from eegrad import FixedArm, InvalidParameterError
from eegrad.flower import EEGradStrategy, LocalGrid, choose_clients
from eegrad.flower.budgets import FedAvgSpend

K, D = 20, 5
MU = np.random.default_rng(7).standard_normal((K, D)) * 2.0


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _app():
    """Quickstart clients of a quadratic: each takes two local steps of 0.3 towards its own
    optimum μ_i (with noise of SD 0.3), 32 samples each, and reports its loss ½‖w − μ_i‖²
    after them (``train_loss``, as Flower's quickstarts do); nothing of eegrad."""
    app = ClientApp()

    @app.train()
    def train(msg, context):
        pid = int(context.node_config["partition-id"])
        rnd = int(msg.content["config"]["server-round"])
        seed = int(msg.content["config"].get("seed", 0))
        rng = np.random.default_rng([seed, pid, rnd])
        w = msg.content["arrays"]["w"].numpy()
        for _ in range(2):
            w = w - 0.3 * (w - MU[pid] + 0.3 * rng.standard_normal(D))
        metrics = MetricRecord({"num-examples": 32,
                                "train_loss": float(0.5 * np.sum((w - MU[pid]) ** 2))})
        return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w)}), "metrics": metrics}),
                       reply_to=msg)  # fmt: skip

    return app


def _run(strategy, rounds, seed=0):
    from flwr.app import ConfigRecord

    res = strategy.start(grid=LocalGrid(_app(), K, seed=2),
                         initial_arrays=ArrayRecord({"w": Array(np.zeros(D))}),
                         num_rounds=rounds, train_config=ConfigRecord({"seed": seed}))  # fmt: skip
    return res.arrays["w"].numpy()


def test_no_budget_takes_your_fedavgs_spend_in_your_rounds_and_says_so(caplog):
    """choose_clients(FedAvg(fraction_train=0.5)), 20 nodes, num_rounds = 10: a budget of
    100 trainings (10 a round), said in one line; the run takes its 10 rounds and spends it
    all (it asked 1 or 2 a round and spent 27 of 200)."""
    strategy = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0))
    with caplog.at_level(logging.INFO, logger="flwr"):
        _run(strategy, 10)
    assert ("budget: 100 client trainings, what FedAvg(fraction_train=0.5, min_train_nodes=2) "
            "spends in 10 rounds of 20 nodes (10 a round)") in caplog.text
    assert strategy.total_budget == 100.0
    assert len(strategy.records) == 10
    assert strategy.records[-1]["cost"] == pytest.approx(100.0)


def test_the_split_beats_your_fedavg_at_the_same_rounds_and_spend():
    """The quadratic above, 20 rounds of FedAvg(fraction_train=0.5): with ``departure=0.5``
    (the clients' loss judging it), eegrad's split of the
    same 200 trainings over the same 20 rounds ends nearer the optimum (the mean of the μ_i)
    than FedAvg's 10 a round, on the mean over 12 seeds of the paired difference of
    ‖w − w*‖²; the difference must be below 0 by more than twice its standard error over the
    seeds (its mean over its SE, a t statistic; 2 is about the 95 % one-sided point at 11
    degrees of freedom, 1.80)."""
    optimum = MU.mean(axis=0)
    diffs = []
    for seed in range(12):
        ours = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0), rng=seed,
                              departure=0.5)  # fmt: skip
        w_ours = _run(ours, 20, seed)
        assert ours.records[-1]["cost"] <= 200.0
        theirs = EEGradStrategy(total_budget=200.0, cost_metric=None, selector=FixedArm(10),
                                rng=seed)  # fmt: skip
        w_theirs = _run(theirs, 20, seed)
        diffs.append(np.sum((w_ours - optimum) ** 2) - np.sum((w_theirs - optimum) ** 2))
    diffs = np.array(diffs)
    se = diffs.std(ddof=1) / np.sqrt(diffs.size)
    assert diffs.mean() < -2.0 * se


def test_a_budget_the_rounds_cannot_spend_is_said_at_the_start(caplog):
    strategy = choose_clients(FedAvg(fraction_evaluate=0.0), budget=500)
    with caplog.at_level(logging.WARNING, logger="flwr"):
        _run(strategy, 5)
    assert caplog.text.count("cannot be spent in 5 rounds") == 1
    assert "400 will be left" in caplog.text
    assert [r["arm"] for r in strategy.records] == [K] * 5


@pytest.mark.parametrize(("call", "match"), [
    (lambda: choose_clients(FedAvg(fraction_train=0.0)), "'strategy'.*gives none a round"),
    (lambda: choose_clients(FedAvg(), unit="samples"), "'budget'.*given with unit='samples'"),
    (lambda: choose_clients(FedAvg(), budget=0.5), "budget' .*at least one round of n = 1"),
    (lambda: EEGradStrategy(total_budget=FedAvgSpend("FedAvg", 0.5, 2), cost_metric="cost"),
     "'cost_metric'"),
])
def test_what_cannot_start_is_refused_at_the_start(call, match):
    with pytest.raises(InvalidParameterError, match=match):
        call()


def test_a_strategy_without_a_fraction_needs_a_budget():
    class NoFraction(FedAvg):
        def __init__(self):
            super().__init__()
            del self.fraction_train

    with pytest.raises(InvalidParameterError, match="'budget'.*has no fraction_train"):
        choose_clients(NoFraction())


def test_a_resumed_run_keeps_its_budget(tmp_path):
    """Your FedAvg's spend is settled at the first round and kept by a resume (same rounds,
    same K): the resumed run ends as the uninterrupted one."""
    ck = tmp_path / "run.npz"
    whole = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0))
    _run(whole, 8)
    first = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0), checkpoint=ck)
    _run(first, 3)
    again = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0), checkpoint=ck)
    _run(again, 8)
    assert again.total_budget == whole.total_budget == 80.0
    assert [r["arm"] for r in again.records] == [r["arm"] for r in whole.records]


def test_a_unit_the_replies_lack_names_their_metrics_and_the_fix_choose_clients_takes():
    """unit="seconds" where the clients report num-examples only: the error lists the metrics
    they carry and suggests unit='samples', which choose_clients then takes and runs."""
    with pytest.raises(InvalidParameterError, match=r"no 'seconds' metric.*\['num-examples', 'train_loss'\]"
                                                    r".*unit='samples'"):  # fmt: skip
        _run(choose_clients(FedAvg(fraction_evaluate=0.0), budget=3200, unit="seconds"), 5)
    fixed = choose_clients(FedAvg(fraction_evaluate=0.0), budget=3200, unit="samples")
    _run(fixed, 5)
    assert fixed.records[-1]["cost"] > 0


def test_the_banner_says_the_wrapped_fraction_is_replaced(caplog):
    strategy = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0))
    with caplog.at_level(logging.INFO, logger="flwr"):
        _run(strategy, 1)
    assert "fraction_train = 0.5, min_train_nodes = 2: replaced by eegrad's n" in caplog.text
