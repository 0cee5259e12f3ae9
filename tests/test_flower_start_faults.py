"""Deployments as they start and records that keep what they claim: nodes that connect late or
one at a time, a straggler under a wall-clock budget, the files a run writes, and bad input
named before training. Each test failed before its fix."""

import logging
import threading

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

import test_flower as tf
import test_flower_total_budget as tb
from flwr.serverapp.strategy import FedAvg

from eegrad.flower import EEGradStrategy, LocalGrid, choose_clients


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


class _Joining(LocalGrid):
    """A LocalGrid whose nodes connect over time: ``connected(polls, rounds)`` of them are
    listed (and answer) after ``polls`` calls of get_node_ids and ``rounds`` train rounds."""

    def __init__(self, *args, connected, **kw):
        super().__init__(*args, **kw)
        self._all = list(self.node_ids)
        self.connected, self.polls, self.rounds = connected, 0, 0

    def get_node_ids(self):
        self.polls += 1
        return self._all[: self.connected(self.polls, self.rounds)]

    def push_messages(self, messages, *, timeout=None):
        messages = list(messages)
        if messages and messages[0].metadata.message_type == "train":
            self.rounds += 1
        return super().push_messages(messages, timeout=timeout)


def _run_in_thread(run, seconds=60):
    out = {}

    def target():
        try:
            out["result"] = run()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the run did not end within {seconds} s"
    if "error" in out:
        raise out["error"]
    return out["result"]


def test_one_node_at_the_first_round_waits_for_a_second_instead_of_crashing(caplog):
    """The default rule learns from the spread of two clients or more: with one node connected
    at the start (min_available_nodes=1) the first round waits for a second, saying so, and the
    run then goes on (it crashed: 'population ... must be an integer >= 2. Got 1')."""
    grid = _Joining(tf._app(), 4, seed=2, connected=lambda polls, rounds: 1 if polls < 3 else 4)
    strategy = tf._strategy(min_available_nodes=1)
    with caplog.at_level(logging.INFO, logger="flwr"):
        _run_in_thread(lambda: tf._start(strategy, grid, 3))
    assert len(strategy.records) == 3
    assert "Waiting for nodes: 1 of 2 connected" in caplog.text


def test_a_given_rule_that_needs_one_node_runs_with_one():
    """FixedArm(1) needs no spread: one node is enough for it."""
    from eegrad import FixedArm

    strategy = tf._strategy(min_available_nodes=1, selector=FixedArm(1))
    tf._start(strategy, LocalGrid(tf._app(), 1, seed=2), 2)
    assert [r["arm"] for r in strategy.records] == [1, 1]


def test_the_first_round_waits_for_the_wrapped_strategys_min_available_nodes():
    """choose_clients(FedAvg(min_available_nodes=4)): eegrad waits for the 4 nodes FedAvg
    would have waited for (it waited for 1), and the rule is set up for them."""
    grid = _Joining(tb._quickstart_app(), 6, seed=2,
                    connected=lambda polls, rounds: 2 if polls < 3 else 4)  # fmt: skip
    strategy = choose_clients(FedAvg(fraction_evaluate=0.0, min_available_nodes=4), budget=30)
    assert strategy.min_available_nodes == 4
    _run_in_thread(lambda: tf._start(strategy, grid, 3))
    assert strategy.state.num_nodes == 4
    assert strategy.records[0]["nodes_connected"] == 4


def test_nodes_that_connect_later_are_asked_and_the_cap_is_said(caplog):
    """K = 3 at the start, 8 from round 2 on: the later nodes are asked (the rounds sample
    among all connected), a round asks at most the rule's K, and the log says so once."""
    grid = _Joining(tf._app(), 8, seed=2,
                    connected=lambda polls, rounds: 3 if rounds < 1 else 8)  # fmt: skip
    asked = set()
    original = grid.push_messages

    def push(messages, *, timeout=None):
        messages = list(messages)
        asked.update(m.metadata.dst_node_id for m in messages)
        return original(messages, timeout=timeout)

    grid.push_messages = push
    strategy = tf._strategy(min_available_nodes=3)
    with caplog.at_level(logging.WARNING, logger="flwr"):
        tf._start(strategy, grid, 25)
    assert strategy.state.num_nodes == 3
    assert max(r["arm"] for r in strategy.records) <= 3
    assert asked - set(grid._all[:3])  # nodes that joined later were asked
    assert caplog.text.count("more than the K = 3 the rule was set up for") == 1


def test_a_round_never_asks_more_clients_than_are_connected():
    """Nodes that leave: the rule is asked for at most the nodes connected, so the record's
    arm is the clients actually asked."""
    grid = _Joining(tf._app(), 8, seed=2,
                    connected=lambda polls, rounds: 8 if rounds < 2 else 2)  # fmt: skip
    strategy = tf._strategy(min_available_nodes=8)
    tf._start(strategy, grid, 12)
    for rec in strategy.records:
        assert rec["arm"] <= rec["nodes_connected"]
        assert rec["arm"] == rec["clients_asked"]
    np.testing.assert_array_less(0, [r["clients_replied"] for r in strategy.records])


def test_min_available_nodes_is_validated():
    with pytest.raises(ValueError, match="'min_available_nodes' parameter of EEGradStrategy"):
        EEGradStrategy(40.0, 1.5, min_available_nodes=0)


def test_a_late_stragglers_wait_never_takes_a_wall_clock_budget_past_its_total():
    """A budget of 1.0 s (round_cost="slowest"), Flower's timeout 0.5 s, every node asked;
    a client that turns slow at round 10 (0.6 s), when 0.46 s are left: the round waits only
    what the budget left affords after D(n), 0.41 s, and is charged that, so the budget left
    ends at 0, not below (it ended at −0.09: the wait was not capped)."""
    from flwr.app import Message
    from flwr.clientapp import ClientApp

    from eegrad import FixedArm

    inner = tb._quickstart_app(cost=lambda pid: {"seconds": 0.01})
    app = ClientApp()

    @app.train()
    def train(msg, context):
        late = int(msg.content["config"]["server-round"]) >= 10
        if late and int(context.node_config["partition-id"]) == 3:
            import time

            time.sleep(0.6)
        out = inner(msg, context)
        assert isinstance(out, Message)
        return out

    s = EEGradStrategy(total_budget=1.0, round_cost="slowest", cost_metric="seconds",
                       aggregation=lambda n: 0.05 + 0 * np.asarray(n),
                       selector=FixedArm(tb.K))  # fmt: skip
    s.start(grid=LocalGrid(app, tb.K, seed=2), initial_arrays=tb._model(), num_rounds=50,
            timeout=0.5)  # fmt: skip
    slow = [r for r in s.records if r["failed_nodes"]]
    assert len(slow) == 1
    assert slow[0]["server_round"] == 10
    assert slow[0]["budget_used"] == pytest.approx(1.0 - 9 * 0.06, abs=1e-9)
    assert min(r["budget_left"] for r in s.records) >= -1e-12
    assert s.records[-1]["cost"] <= 1.0 + 1e-12
