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
from flwr.app import Array, ArrayRecord, MetricRecord
from flwr.serverapp.strategy import FedAvg

from eegrad import FixedArm
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


# -- what a run keeps ----------------------------------------------------------------------------
def test_the_records_and_the_checkpoint_cannot_be_one_file(tmp_path):
    """csv_path == checkpoint (or the evaluations' file beside the records): refused, naming
    the checkpoint (a resume wrote the records over it)."""
    from eegrad import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="'checkpoint'.*another file than csv_path"):
        tf._strategy(csv_path=tmp_path / "run.npz", checkpoint=tmp_path / "run.npz")
    with pytest.raises(InvalidParameterError, match="the evaluations beside it"):
        tf._strategy(csv_path=tmp_path / "run.csv", checkpoint=tmp_path / "run-evaluation.csv")


def test_every_round_is_reported_at_least_once_across_a_kill(tmp_path, monkeypatch):
    """A kill between a round's checkpoint and its report lost the report for ever: the report
    now comes before the checkpoint, and the resumed run reports every round."""
    from eegrad.flower import keeping

    seen = []
    ck = tmp_path / "run.npz"
    original = keeping.save_run

    def killed_after_round_3(path, fingerprint, state, model):
        original(path, fingerprint, state, model)
        if state.server_round == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(keeping, "save_run", killed_after_round_3)
    with pytest.raises(KeyboardInterrupt):
        tf._start(tf._strategy(checkpoint=ck, on_round=lambda r: seen.append(r.server_round)),
                  LocalGrid(tf._app(), tf.K, seed=2), 6)  # fmt: skip
    monkeypatch.setattr(keeping, "save_run", original)
    tf._start(tf._strategy(checkpoint=ck, on_round=lambda r: seen.append(r.server_round)),
              LocalGrid(tf._app(), tf.K, seed=2), 6)  # fmt: skip
    assert sorted(set(seen)) == [1, 2, 3, 4, 5, 6]


def test_a_resume_adds_no_second_evaluation_of_the_checkpoints_round(tmp_path):
    """The checkpoint's round was evaluated by the run that saved it: a resume (twice) keeps
    one line a round, metric and source (it added one each time)."""
    from eegrad.results import read_table

    ck, csv = tmp_path / "run.npz", tmp_path / "run.csv"
    evaluated = []

    def evaluate(rnd, arrays):
        evaluated.append(rnd)
        return MetricRecord({"norm": float(np.linalg.norm(arrays["w"].numpy()))})

    def run(rounds):
        s = tf._strategy(checkpoint=ck, csv_path=csv)
        s.start(grid=LocalGrid(tf._app(), tf.K, seed=2),
                initial_arrays=ArrayRecord({"w": Array(np.zeros(tf.D))}),
                num_rounds=rounds, evaluate_fn=evaluate)  # fmt: skip
        return s

    run(3)
    run(5)
    s = run(7)
    rows = read_table(s.evaluation_path)
    keys = [(r["server_round"], r["source"], r["metric"]) for r in rows]
    assert len(keys) == len(set(keys)) == 8  # rounds 0..7, one metric
    assert evaluated == list(range(8))


def test_a_checkpoints_leftover_temporary_file_is_removed_at_the_start(tmp_path):
    """A kill during a checkpoint's write leaves its temporary file: the next start removes
    it (19 such files, 89 MB, piled up in a kill loop)."""
    ck = tmp_path / "run.npz"
    stale = tmp_path / ".run.npz.abc123.tmp"
    stale.write_bytes(b"x" * 1000)
    other = tmp_path / ".other.npz.abc123.tmp"
    other.write_bytes(b"y")
    tf._start(tf._strategy(checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2), 2)
    assert not stale.exists()
    assert other.exists()  # another file's is not this run's to remove
    assert not list(tmp_path.glob(".run.npz.*.tmp"))


def test_the_stop_log_names_the_last_checkpoint_written_not_the_one_that_failed(tmp_path,
                                                                              monkeypatch,
                                                                              caplog):
    """The checkpoint's write fails at round 4 (a full disk): the log says the checkpoint
    holds rounds 1 to 3, as it does (it claimed round 4)."""
    from eegrad.flower import keeping

    original = keeping.save_run

    def full_disk_at_round_4(path, fingerprint, state, model):
        if state.server_round == 4:
            raise OSError(28, "No space left on device")
        original(path, fingerprint, state, model)

    monkeypatch.setattr(keeping, "save_run", full_disk_at_round_4)
    ck, csv = tmp_path / "run.npz", tmp_path / "run.csv"
    with caplog.at_level(logging.ERROR, logger="flwr"), pytest.raises(OSError, match="space"):
        tf._start(tf._strategy(checkpoint=ck, csv_path=csv),
                  LocalGrid(tf._app(), tf.K, seed=2), 6)  # fmt: skip
    assert f"checkpoint {ck} (rounds 1 to 3)" in caplog.text
    assert f"records {csv} (rounds 1 to 4)" in caplog.text


# -- bad input, named before training ------------------------------------------------------------
def test_a_folder_or_an_unwritable_place_is_refused_before_any_round_trains(tmp_path):
    from eegrad import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="'csv_path'.*not a folder"):
        tf._strategy(csv_path=tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    trained = []
    app = tf._app(bad=lambda pid, arrays: trained.append(pid))
    for kw in ({"checkpoint": blocker / "run.npz"}, {"csv_path": blocker / "run.csv"}):
        name = next(iter(kw))
        with pytest.raises(InvalidParameterError, match=f"'{name}'.*cannot be written"):
            tf._start(tf._strategy(**kw), LocalGrid(app, tf.K, seed=2), 2)
    assert trained == []


@pytest.mark.parametrize(("kw", "match"), [
    ({"timeout": "30"}, "'timeout'"),
    ({"timeout": 0}, "'timeout'.*> 0"),
    ({"num_rounds": 2.5}, "'num_rounds'"),
    ({"num_rounds": 0}, "'num_rounds'"),
])
def test_starts_arguments_are_checked(kw, match):
    args = {"grid": LocalGrid(tf._app(), tf.K, seed=2),
            "initial_arrays": ArrayRecord({"w": Array(np.zeros(tf.D))}), "num_rounds": 2}
    with pytest.raises((TypeError, ValueError), match=match):
        tf._strategy().start(**{**args, **kw})


def _replying(metrics_of=None, arrays_of=None):
    """Clients that reply w − 0.1 with the metrics ``metrics_of(pid)`` (default num-examples
    10 and cost 1) and the arrays ``arrays_of(pid, w)`` (default the model's)."""
    from flwr.app import Message, RecordDict
    from flwr.clientapp import ClientApp

    app = ClientApp()

    @app.train()
    def train(msg, context):
        pid = int(context.node_config["partition-id"])
        w = msg.content["arrays"]["w"].numpy() - 0.1
        metrics = {"num-examples": 10, "cost": 1.0} if metrics_of is None else metrics_of(pid)
        arrays = ArrayRecord({"w": Array(w) if arrays_of is None else arrays_of(pid, w)})
        return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord(metrics)}),
                       reply_to=msg)  # fmt: skip

    return app


@pytest.mark.parametrize(("metrics_of", "match"), [
    (lambda pid: {"num-examples": 10, "cost": 1.0, **({"acc": 0.5} if pid % 2 else {})},
     "'acc'.*same metrics"),
    (lambda pid: {"num-examples": 10, "cost": 1.0, "acc": [0.5, 0.1] if pid % 2 else 0.5},
     "'acc' as (a list of 2|a number).*same metrics"),
    (lambda pid: {"num-examples": [10, 3], "cost": 1.0},
     "num-examples = \\[10, 3\\], a list; it must be one number"),
])
def test_replies_whose_metrics_cannot_be_aggregated_are_named(metrics_of, match):
    """A metric only some clients report (its mean was diluted by the others' weights), one
    reported as a list by some and a number by others, or the samples as a list (a bare
    TypeError): each an error naming the node and the round."""
    from eegrad.flower import ClientUpdateError

    with pytest.raises(ClientUpdateError, match=f"node \\d+ at server round 1.*{match}"):
        tf._start(tf._strategy(selector=FixedArm(tf.K)),
                  LocalGrid(_replying(metrics_of), tf.K, seed=2), 1)  # fmt: skip


def test_an_array_whose_bytes_disagree_with_its_metadata_is_named():
    """int64 bytes declared float64 were folded as other numbers (the model ended at 2.312
    instead of 3.0); too few bytes raised a bare error."""
    from eegrad.flower import ClientUpdateError

    def int_bytes(pid, w):
        a = Array(np.round(w).astype(np.int64))
        return Array(dtype="float64", shape=a.shape, stype=a.stype, data=a.data)

    def short(pid, w):
        a = Array(w)
        return Array(dtype=a.dtype, shape=a.shape, stype=a.stype, data=a.data[:-8])

    for arrays_of, match in ((int_bytes, "bytes hold int64"), (short, "cannot be read")):
        with pytest.raises(ClientUpdateError, match=f"node \\d+ at server round 1.*{match}"):
            tf._start(tf._strategy(selector=FixedArm(2)),
                      LocalGrid(_replying(arrays_of=arrays_of), tf.K, seed=2), 1)  # fmt: skip


# -- where the parts meet ------------------------------------------------------------------------
def test_t_below_the_rules_minimum_is_refused_before_any_round_trains():
    """steps="t-rounds" with T below 2N for the paper's rule (B3: it ran its first pulls
    alone, round-robin 1, 2, 3, 4, …): refused at the run's set-up, naming T and the least."""
    from eegrad import EEGrad

    trained = []
    app = tf._app(bad=lambda pid, arrays: trained.append(pid))
    for kw in ({"steps": "t-rounds", "T": 5}, {}):
        strategy = tf._strategy(selector=EEGrad(beta=10.0, P=1.0), **kw)
        with pytest.raises(ValueError, match=r"'T' parameter of EEGradStrategy must be >= \d+"):
            tf._start(strategy, LocalGrid(app, tf.K, seed=2), 2)
    assert trained == []


def test_trainings_with_the_slowest_round_cost_are_refused():
    """unit="trainings" with round_cost="slowest" (B4: a straggler's 60-s wait was charged as
    60 trainings): refused, naming round_cost and why."""
    with pytest.raises(ValueError, match="'round_cost'.*'sum' when every reply costs"):
        choose_clients(FedAvg(fraction_evaluate=0.0), budget=50, round_cost="slowest")


def test_the_users_rule_is_left_as_it_was_given():
    """B9: a run works on its own copy; the rule given keeps no state of it."""
    from eegrad import SpreadThompson

    given = SpreadThompson(population=tf.K)
    params = given.get_params()
    strategy = tf._strategy(selector=given)
    tf._start(strategy, LocalGrid(tf._app(), tf.K, seed=2), 4)
    assert strategy.selector is not given
    assert strategy.selector.rounds == 4
    assert given.get_params() == params
    assert not hasattr(given, "rounds")
    assert given._shape is None


def test_a_spent_budget_is_a_stop_not_a_value_error():
    """BudgetSpent and PrivacyBudgetExhausted are RunStopped, not ValueError: a user's
    `except ValueError` for bad input does not take "the budget is spent" for one."""
    from eegrad.flower import BudgetSpent, PrivacyBudgetExhausted, RunStopped

    for stop in (BudgetSpent, PrivacyBudgetExhausted):
        assert issubclass(stop, RunStopped)
        assert not issubclass(stop, ValueError)
