"""Faults a deployment meets, in process: nodes that leave or die, stragglers, a checkpoint of
another seed, a damaged checkpoint, a lost last round; and the bugs where the strategy's modes
meet (SecAgg+'s late node, a total budget's first round, central DP with nodes leaving, the
inner strategy's state, the clients' metrics at a budget stop). Each test failed before its fix.
"""

import json
import logging
import re
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

import test_flower as tf
import test_flower_total_budget as tb
from flwr.app import Array, ArrayRecord, ConfigRecord, Error, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.serverapp.strategy import FedAvg

from eegrad import FixedArm, NonFiniteGradientError
from eegrad.checkpoint import CheckpointError
from eegrad.flower import CentralDP, EEGradStrategy, LocalGrid
from eegrad.flower.privacy import epsilon_spent
from eegrad.flower.secagg import _NodesOf


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


class _Leaving(LocalGrid):
    """A LocalGrid whose last ``gone`` nodes are no longer connected after ``after`` rounds of
    train messages (as nodes that died: they neither are listed nor answer)."""

    def __init__(self, *args, gone=1, after=1, **kw):
        super().__init__(*args, **kw)
        self.gone, self.after, self.rounds = gone, after, 0
        self._all = list(self.node_ids)

    def get_node_ids(self):
        return self._all[: len(self._all) - self.gone] if self.rounds >= self.after else self._all

    def push_messages(self, messages, *, timeout=None):
        messages = list(messages)
        if messages and messages[0].metadata.message_type == "train":
            self.rounds += 1
        return super().push_messages(messages, timeout=timeout)


def _in_thread(run, seconds):
    """Run ``run()`` in a daemon thread; its result, or a failure if it has not returned after
    ``seconds`` (a stalled run is left behind, not waited for)."""
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("result", run()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the run had not returned after {seconds} s"
    return out["result"]


# -- 1. a node that dies never stalls the run --------------------------------------------------
def test_a_node_that_dies_does_not_stall_the_run():
    """min_available_nodes = K: the first round waits for all; after one node dies (7 of 8
    listed from round 2 on) the rounds go on among the nodes connected, and say so."""
    strategy = tf._strategy(min_available_nodes=tf.K, selector=FixedArm(tf.K))
    grid = _Leaving(tf._app(), tf.K, seed=2, gone=1, after=1)
    _in_thread(lambda: tf._start(strategy, grid, 4), seconds=60)
    assert [r["server_round"] for r in strategy.records] == [1, 2, 3, 4]
    assert [r["nodes_connected"] for r in strategy.records] == [8, 7, 7, 7]
    assert [r["clients_asked"] for r in strategy.records] == [8, 7, 7, 7]
    assert all(r["failed_nodes"] == "" for r in strategy.records)


# -- 2. a checkpoint of another seed ----------------------------------------------------------
def test_a_checkpoint_of_another_seed_is_refused(tmp_path):
    ck = tmp_path / "run.npz"
    tf._start(tf._strategy(rng=3, checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2), 3)
    with pytest.raises(CheckpointError, match=r"rng: 'seed 3, .*' in the checkpoint, 'seed 4"):
        tf._start(tf._strategy(rng=4, checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2), 3)
    # the same seed resumes: nothing to run
    same = tf._strategy(rng=3, checkpoint=ck)
    tf._start(same, LocalGrid(tf._app(), tf.K, seed=2), 3)
    assert len(same.records) == 3


# -- 3. a straggler's wait ---------------------------------------------------------------------
def _sleepy_app(slow_pid, sleep, seconds=0.01):
    """The quickstart client of test_flower_total_budget, reporting ``seconds``; partition
    ``slow_pid`` sleeps ``sleep`` s first."""
    inner = tb._quickstart_app(cost=lambda pid: {"seconds": seconds})
    app = ClientApp()

    @app.train()
    def train(msg, context):
        if int(context.node_config["partition-id"]) == slow_pid:
            time.sleep(sleep)
        return inner(msg, context)

    return app


def test_local_grid_drops_the_reply_of_a_node_slower_than_the_timeout():
    # a normal client's call takes about a millisecond: 0.3 s is a margin of hundreds
    grid = LocalGrid(_sleepy_app(slow_pid=1, sleep=0.6), 3, seed=2)
    model = RecordDict({"arrays": ArrayRecord({"w": Array(np.zeros(tb.D))}),
                        "config": ConfigRecord({"server-round": 1})})  # fmt: skip
    msgs = [Message(content=model, dst_node_id=n, message_type="train") for n in grid.node_ids]
    replies = list(grid.send_and_receive(msgs, timeout=0.3))
    assert sorted(r.metadata.src_node_id for r in replies) == sorted(
        n for i, n in enumerate(grid.node_ids) if i != 1)
    msgs = [Message(content=model, dst_node_id=n, message_type="train") for n in grid.node_ids]
    assert len(list(grid.send_and_receive(msgs, timeout=None))) == 3  # no limit: all reply


def test_a_stragglers_wait_is_charged_with_the_slowest_round_cost():
    """A client that always misses the 0.2-s timeout: every round of FixedArm(K) waited the
    timeout, and is charged it (cost_scale × 0.2 s; the others report 0.01 s) plus D(n)."""
    s = EEGradStrategy(total_budget=3.0, round_cost="slowest", cost_metric="seconds",
                       aggregation=lambda n: 0.05 + 0 * np.asarray(n), selector=FixedArm(tb.K))  # fmt: skip
    slow = LocalGrid(_sleepy_app(slow_pid=2, sleep=0.4), tb.K, seed=2)
    s.start(grid=slow, initial_arrays=tb._model(), num_rounds=50, timeout=0.2)
    slow_node = slow.node_ids[2]
    waited = [r for r in s.records if str(slow_node) in r["failed_nodes"].split()]
    assert waited, "the straggler was never asked"
    for r in waited:
        assert r["budget_used"] == pytest.approx(0.05 + 0.2)
    assert s.records[-1]["cost"] <= 3.0  # the budget holds with the waits charged
    assert s.state.client_costs[slow_node] == pytest.approx(0.2)  # and expected again


# -- 4. a damaged checkpoint -------------------------------------------------------------------
def _saved(tmp_path, rounds=3):
    ck = tmp_path / "run.npz"
    tf._start(tf._strategy(checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2), rounds)
    return ck


def _members(ck):
    with np.load(ck, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _edited(ck, edit_doc=None, edit_arrays=None):
    """Rewrite the checkpoint with its JSON document and arrays edited."""
    members = _members(ck)
    doc = json.loads(str(members.pop("state.json")))
    if edit_doc is not None:
        edit_doc(doc["state"])
    if edit_arrays is not None:
        edit_arrays(members)
    np.savez(ck, **{"state.json": np.array(json.dumps(doc)), **members})


def _fields(tree):
    return tree["state"]["__dict__"]


def _truncate(size):
    def damage(ck):
        data = ck.read_bytes()
        ck.write_bytes(data[: size if size is not None else len(data) // 2])
    return damage


def _flip(where):
    def damage(ck):
        data = bytearray(ck.read_bytes())
        i = where if where >= 0 else len(data) // 2
        data[i] ^= 0xFF
        ck.write_bytes(bytes(data))
    return damage


DAMAGES = {
    "half": (_truncate(None), "cannot be read"),
    "100 bytes": (_truncate(100), "cannot be read"),
    "0 bytes": (_truncate(0), "cannot be read"),
    "a flipped byte": (_flip(-1), "cannot be read|damaged|another run"),
    "a flipped header byte": (_flip(1), "cannot be read"),
    "a key removed": (lambda ck: _edited(ck, lambda t: _fields(t).pop("steps_taken")),
                      "steps_taken"),
    "the fingerprint removed": (lambda ck: _edited(ck, lambda t: t.pop("fingerprint")),
                                "'fingerprint' is missing"),
    "server_round edited": (lambda ck: _edited(ck, lambda t: _fields(t).update(server_round=1)),
                            "server rounds done, 1"),
    "records not a list": (lambda ck: _edited(ck, lambda t: _fields(t).update(records="oops")),
                           "'oops'"),
    "cost not finite": (lambda ck: _edited(ck, lambda t: _fields(t).update(cost=float("nan"))),
                        "cost is nan"),
    "the model as float32": (lambda ck: _edited(ck, edit_arrays=lambda m: m.update(
        model0=m["model0"].astype(np.float32))), "where its fingerprint says"),
    "the model of another shape": (lambda ck: _edited(ck, edit_arrays=lambda m: m.update(
        model0=np.zeros(tf.D + 1))), "where its fingerprint says"),
    "a state array missing": (lambda ck: _edited(ck, edit_arrays=lambda m: m.pop("a0")),
                              "cannot be restored|damaged"),
    "a state array of another dtype": (lambda ck: _edited(ck, edit_arrays=lambda m: m.update(
        a0=m["a0"].astype(np.float32 if m["a0"].dtype != np.float32 else np.float64))),
        "cannot be restored.*as float"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_checkpoint_is_refused_naming_the_file_and_left_as_it_was(tmp_path, damage):
    ck = _saved(tmp_path)
    DAMAGES[damage][0](ck)
    before = ck.read_bytes()
    strategy = tf._strategy(checkpoint=ck)
    with pytest.raises(CheckpointError) as err:
        tf._start(strategy, LocalGrid(tf._app(), tf.K, seed=2), 6)
    text = str(err.value)
    assert str(ck) in text
    assert re.search(DAMAGES[damage][1], text), text
    assert "allow_pickle" not in text  # no advice to load a damaged file unsafely
    assert ck.read_bytes() == before  # never overwritten
    assert strategy.records == []  # and no fresh start


def test_a_checkpoint_of_the_earlier_layout_is_refused_saying_so(tmp_path):
    ck = _saved(tmp_path)
    _edited(ck, lambda t: t["fingerprint"].pop("rng"))
    with pytest.raises(CheckpointError, match="earlier version of eegrad.flower.*'rng'"):
        tf._start(tf._strategy(checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2), 6)


# -- 5. a dead node is named once, by its own id -----------------------------------------------
class _Unavailable(LocalGrid):
    """A LocalGrid in which partition 0 is unavailable: the SuperLink answers for it with an
    error reply from its own node id, as Flower's does."""

    def _answer(self, mid, msg, timeout=None):
        if self._partition[msg.metadata.dst_node_id] != 0:
            return super()._answer(mid, msg, timeout)
        reply = Message(Error(code=3, reason="Node Unavailable"), reply_to=msg)
        reply.metadata.__dict__["_src_node_id"] = SUPERLINK_NODE_ID
        self._replies[mid] = reply


def test_a_dead_node_is_recorded_once_by_its_own_id():
    grid = _Unavailable(tf._app(), tf.K, seed=2)
    strategy = tf._strategy(selector=FixedArm(tf.K))
    res = tf._start(strategy, grid, 2)
    dead = grid.node_ids[0]
    for r in strategy.records:
        assert r["failed_nodes"] == str(dead)
        assert r["clients_replied"] == tf.K - 1
    assert all(m["clients_failed"] == 1 for m in res.train_metrics_clientapp.values())


# -- 6. a resumed run whose last round is lost -------------------------------------------------
def test_a_resumed_run_whose_last_round_is_lost_returns_the_saved_model(tmp_path):
    ck = tmp_path / "run.npz"
    first = tf._strategy(checkpoint=ck)
    done = tf._start(first, LocalGrid(tf._app(), tf.K, seed=2), 5)
    again = tf._strategy(checkpoint=ck)
    res = tf._start(again, LocalGrid(tf._app(), tf.K, seed=2, fail=lambda pid, msg: True), 6)
    np.testing.assert_array_equal(res.arrays["w"].numpy(), done.arrays["w"].numpy())
    assert again.records[-1]["clients_replied"] == 0


# -- rough edges -------------------------------------------------------------------------------
def test_a_finite_update_whose_norm_overflows_is_not_called_nan():
    app = ClientApp()

    @app.train()
    def train(msg, context):
        w = msg.content["arrays"]["w"].numpy()
        return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w - 1e200)}),
                                   "metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)  # fmt: skip

    s = EEGradStrategy(budget=10.0, c_min=1.0, selector=FixedArm(2))
    with pytest.raises(NonFiniteGradientError, match="finite but too large") as err:
        s.start(LocalGrid(app, 3), ArrayRecord({"w": Array(np.zeros(3))}), num_rounds=1)
    assert "NaN" not in str(err.value)


def test_a_resume_with_another_number_of_nodes_says_so(tmp_path, caplog):
    ck = tmp_path / "run.npz"
    tf._start(tf._strategy(checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2), 2)
    logging.getLogger("flwr").setLevel(logging.WARNING)
    again = tf._strategy(checkpoint=ck)
    tf._start(again, LocalGrid(tf._app(), tf.K - 2, seed=2), 3)
    assert "6 nodes are connected where the resumed run had K = 8" in caplog.text
    assert again.records[-1]["nodes_connected"] == tf.K - 2


# -- the bugs where modes meet (A–E) -----------------------------------------------------------
class _Manager:
    """A legacy client manager whose registered clients grow while a round waits."""

    def __init__(self, ids):
        self.ids = list(ids)

    def all(self):
        return {str(i): type("Proxy", (), {"node_id": i})() for i in self.ids}


def test_a_secaggplus_round_sees_a_node_that_registers_late():
    manager = _Manager([11])
    view = _NodesOf(manager)
    assert view.get_node_ids() == [11]
    manager.ids.append(12)  # Flower registers the second node while the round waits
    assert view.get_node_ids() == [11, 12]
    assert view.proxy(12).node_id == 12


@pytest.mark.parametrize(("selector", "cost", "budget"), [(None, 10.0, 20.0),
                                                          (FixedArm(8), 5.0, 20.0)])  # fmt: skip
def test_a_total_budget_is_not_overspent_before_any_cost_is_known(selector, cost, budget):
    """Clients costing 10 (or 5 with FixedArm(8)), D(n) = 3: no round may take the run past
    its total, the first one included (before, the first round spent 23, or 43)."""
    s = EEGradStrategy(total_budget=budget, aggregation=lambda n: 3.0 + 0 * np.asarray(n),
                       selector=selector, cost_metric="c")  # fmt: skip
    tb._run(s, tb._quickstart_app(cost=lambda pid: {"c": cost}), rounds=20)
    assert s.records[0]["arm"] == 1
    assert s.records[-1]["cost"] <= budget
    assert s.stopped is not None


def test_central_dp_is_accounted_over_the_nodes_present():
    """K = 8 dropping to 4 after round 1, n = 4, z = 1: in each of rounds 2..10 all 4 present
    nodes take part, which alone spends ε(9 rounds of 4 of 4); the recorded ε is at least that
    (before, 16.36 against 17.80)."""
    dp = CentralDP(noise_multiplier=1.0, clipping_norm=1.0, delta=1e-5)
    strategy = tf._strategy(privacy=dp, selector=FixedArm(4))
    grid = _Leaving(tf._app(), tf.K, seed=2, gone=4, after=1)
    tf._start(strategy, grid, 10)
    floor = epsilon_spent(1.0, 4, 9, 1e-5, 4)
    assert strategy.records[-1]["epsilon"] >= floor
    # the same run with every node present spends less: the correction is where nodes left
    whole = tf._strategy(privacy=dp, selector=FixedArm(4))
    tf._start(whole, LocalGrid(tf._app(), tf.K, seed=2), 10)
    assert whole.records[-1]["epsilon"] < floor


class _CountingFedAvg(FedAvg):
    """A user's FedAvg holding a path, a generator and run state kept as numbers."""

    def __init__(self, log_dir, **kw):
        super().__init__(**kw)
        self.log_dir = Path(log_dir)
        self.rng = np.random.default_rng(5)
        self.rounds_seen = 0
        self.lr = 1.0

    def aggregate_train(self, server_round, replies):
        self.rounds_seen += 1
        self.lr *= 0.5
        self.rng.random()
        return super().aggregate_train(server_round, replies)


def test_an_inner_strategys_state_is_declared_not_guessed_from_types(tmp_path):
    # accepted without a checkpoint: a Path and a Generator are no reason to refuse
    inner = _CountingFedAvg(tmp_path)
    strategy = tf._strategy(strategy=inner)
    tf._start(strategy, LocalGrid(tf._app(), tf.K, seed=2), 3)
    assert (inner.rounds_seen, inner.lr) == (3, 0.125)
    first_draw = inner.rng.random()
    # a second start is a fresh run: the counters and the generator as given
    tf._start(strategy, LocalGrid(tf._app(), tf.K, seed=2), 2)
    assert (inner.rounds_seen, inner.lr) == (2, 0.25)
    # with a checkpoint, the numbers, the path and the generator are saved and resumed
    ck = tmp_path / "run.npz"
    full = _CountingFedAvg(tmp_path)
    tf._start(tf._strategy(strategy=full), LocalGrid(tf._app(), tf.K, seed=2), 3)
    part = _CountingFedAvg(tmp_path)
    tf._start(tf._strategy(strategy=part, checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2), 2)
    resumed = _CountingFedAvg(tmp_path)
    tf._start(tf._strategy(strategy=resumed, checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2),
              3)  # fmt: skip
    assert (resumed.rounds_seen, resumed.lr) == (3, 0.125)
    assert resumed.rng.random() == first_draw == full.rng.random()
    assert resumed.log_dir == Path(tmp_path)


def test_a_wrapper_holding_the_users_strategy_is_checkpointed_through_it(tmp_path):
    class Wrapper(FedAvg):  # a user's wrapper holding .strategy, as Flower's DP wrappers do
        def __init__(self, strategy):
            super().__init__()
            self.strategy = strategy

        def aggregate_train(self, server_round, replies):
            return self.strategy.aggregate_train(server_round, replies)

    ck = tmp_path / "run.npz"
    tf._start(tf._strategy(strategy=Wrapper(_CountingFedAvg(tmp_path)), checkpoint=ck),
              LocalGrid(tf._app(), tf.K, seed=2), 2)  # fmt: skip
    inner = _CountingFedAvg(tmp_path)
    tf._start(tf._strategy(strategy=Wrapper(inner), checkpoint=ck),
              LocalGrid(tf._app(), tf.K, seed=2), 3)  # fmt: skip
    assert inner.rounds_seen == 3


def test_an_attribute_a_checkpoint_cannot_hold_is_refused_when_one_is_asked(tmp_path):
    inner = FedAvg()
    inner.lock = threading.Lock()
    tf._strategy(strategy=inner)  # no checkpoint: nothing to refuse
    with pytest.raises(ValueError, match=r"FedAvg\.lock is a lock"):
        tf._strategy(strategy=inner, checkpoint=tmp_path / "run.npz")


def test_the_clients_metrics_survive_a_budget_stop():
    s = EEGradStrategy(total_budget=40.0, aggregation=lambda n: 3.0 + 0 * np.asarray(n),
                       selector=FixedArm(3), cost_metric="c")  # fmt: skip
    res = tb._run(s, tb._quickstart_app(cost=lambda pid: {"c": 2.0}), rounds=50)
    assert s.stopped is not None
    assert sorted(res.train_metrics_clientapp) == list(range(1, len(s.records) + 1))
    for m in res.train_metrics_clientapp.values():
        assert "train_loss" in m
        assert 1 <= m["arm"] <= 3


def test_the_clients_metrics_are_forwarded_with_the_built_in_step():
    res = tb._run(EEGradStrategy(budget=30.0, c_min=1.0, selector=FixedArm(3)),
                  tb._quickstart_app(cost=lambda pid: {"cost": 1.0}), rounds=2)
    for m in res.train_metrics_clientapp.values():
        assert m["train_loss"] > 0


def test_the_damaged_zip_error_is_a_checkpoint_error(tmp_path):
    """The library's own errors of a damaged archive never escape bare."""
    ck = _saved(tmp_path, rounds=2)
    with zipfile.ZipFile(ck) as z:
        names = z.namelist()
    assert "state.json.npy" in names
    ck.write_bytes(ck.read_bytes()[:-30])  # the central directory cut
    from eegrad.checkpoint import read_checkpoint

    with pytest.raises(CheckpointError, match="cannot be read"):
        read_checkpoint(ck)


def test_a_round_whose_replies_raise_part_way_leaves_nothing_pending():
    """A reply that cannot be used ends the run with an error naming it; the round is not left
    half-told (no pending round, the rule's pull withdrawn), so the strategy starts again."""

    def bad(pid, arrays):
        return [arrays[0] * np.nan] if pid == 3 else None

    strategy = tf._strategy(selector=FixedArm(tf.K))
    with pytest.raises(NonFiniteGradientError, match="server round 1"):
        tf._start(strategy, LocalGrid(tf._app(bad=bad), tf.K, seed=2), 2)
    assert strategy.pending_round is None
    assert strategy.driver.ask() == tf.K  # no "ask() called twice": nothing is pending


# -- the silent traps of a practitioner's first run ---------------------------------------------
def test_a_per_round_budget_whose_clients_report_no_spend_is_an_error_naming_the_fix():
    """Flower's quickstart client, unchanged, under budget=: it trains its own way and reports
    no spend; before, budget_used was 0.0 every round while the cost rose by B."""
    s = EEGradStrategy(budget=30.0, c_min=1.0)
    with pytest.raises(ValueError, match="budgeted_train.*total_budget=") as err:
        tb._run(s, tb._quickstart_app(), rounds=3)
    assert "server round 1" in str(err.value)
    assert s.pending_round is None


def test_a_missing_cost_metric_lists_what_the_replies_carry_and_suggests_one():
    s = EEGradStrategy(total_budget=100.0)
    with pytest.raises(ValueError, match=r"\['num-examples', 'train_loss'\].*"
                                         r"cost_metric='num-examples'"):  # fmt: skip
        tb._run(s, tb._quickstart_app(), rounds=3)


def test_an_inner_strategy_that_overrides_start_is_refused_with_the_reason():
    class Tracked(FedAvg):  # the pattern of Flower's W&B tutorial
        def start(self, *args, **kwargs):
            return super().start(*args, **kwargs)

    with pytest.raises(ValueError, match="overrides start.*never its start"):
        tf._strategy(strategy=Tracked())


def test_fewer_nodes_than_the_budget_affords_is_said_once(caplog):
    logging.getLogger("flwr").setLevel(logging.WARNING)
    s = EEGradStrategy(budget=100.0, c_min=1.0, selector=FixedArm(2))
    tf._start(s, LocalGrid(tf._app(), 2, seed=2), 3)
    said = [r for r in caplog.records if "2 nodes are connected" in r.getMessage()]
    assert len(said) == 1
    assert "N = 99" in said[0].getMessage()


def test_a_run_ended_by_its_budget_logs_why_and_flowers_final_results(caplog):
    logging.getLogger("flwr").setLevel(logging.INFO)
    s = EEGradStrategy(total_budget=40.0, aggregation=lambda n: 3.0 + 0 * np.asarray(n),
                       selector=FixedArm(3), cost_metric="c")  # fmt: skip
    tb._run(s, tb._quickstart_app(cost=lambda pid: {"c": 2.0}), rounds=50)
    text = caplog.text
    done = len(s.records)
    # a normal end, said once, and no header of a round that never runs
    assert text.count("the budget is spent: Server round") == 1
    assert f"[ROUND {done + 1}/50]" not in text
    assert f"[ROUND {done}/50]" in text
    assert "Final results:" in text.split("the budget is spent")[1]
    assert "train_loss" in text.split("Final results:")[-1]  # the clients' metrics in it


def test_each_round_logs_n_why_and_the_budget(caplog):
    """A line a round: n among the nodes connected, the budget (a share of B, or the budget
    left), and the rule's reason: your strategy's n while the rounds show the model (here no
    strategy of yours: the arms' middle; a departure, its clients reporting their loss), its
    fitted leaders, or the run's last round."""
    logging.getLogger("flwr").setLevel(logging.INFO)
    tf._start(tf._strategy(departure=0.5), LocalGrid(tf._app(reports_loss=True), tf.K, seed=2),
              8)  # fmt: skip
    lines = [r.getMessage() for r in caplog.records if "EE-Grad: server round" in r.getMessage()]
    assert len(lines) == 8
    assert "asks n = " in lines[0]
    assert "of 8 nodes connected (a share of" in lines[0]
    assert "your strategy's n (4) while the rounds show the model" in lines[0]
    assert re.search(r"by the fit: n = \d+ \(", lines[-1])
    caplog.clear()
    s = EEGradStrategy(total_budget=60.0, aggregation=lambda n: 3.0 + 0 * np.asarray(n),
                       cost_metric="c")  # fmt: skip
    tb._run(s, tb._quickstart_app(cost=lambda pid: {"c": 2.0}), rounds=50)
    lines = [r.getMessage() for r in caplog.records if "EE-Grad: server round" in r.getMessage()]
    assert "budget left 60 of 60" in lines[0]
    assert "the run's last round: the most clients the budget left affords" in lines[-1]


def test_explain_draws_nothing_and_a_plain_rule_has_no_reason():
    import copy

    from eegrad import ProgressThompson
    from eegrad.checkpoint import capture_state

    assert FixedArm(3).explain() is None
    # a rule mid-run: its state, and its random streams, the same after explain() as before
    strategy = tf._strategy(departure=0.5)
    tf._start(strategy, LocalGrid(tf._app(reports_loss=True), tf.K, seed=2), 8)
    rule = strategy.selector
    assert isinstance(rule, ProgressThompson)
    before = copy.deepcopy(rule)
    assert "by the fit" in rule.explain()
    tree, arrays = capture_state(rule)
    tree0, arrays0 = capture_state(before)
    assert tree == tree0
    assert all(np.array_equal(arrays[k], arrays0[k], equal_nan=True) for k in arrays)
