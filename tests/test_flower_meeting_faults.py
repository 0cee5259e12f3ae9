"""The faults a campaign found where the strategy's new parts meet (a total budget priced
for nodes never seen, two runs on one set of files, an older checkpoint against a new initial
model, a resumed run's wait and ε, replies that claim another node, malformed inputs, the default
budget with late joiners, the replies' memory). Each test failed before its fix."""

import copy
import logging
import os

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

import test_flower as tf
from flwr.app import Array, ArrayRecord, ConfigRecord
from flwr.serverapp.strategy import FedAvg

from eegrad import FixedArm
from eegrad._validation import InvalidParameterError
from eegrad.checkpoint import CheckpointError
from eegrad.flower import EEGradStrategy, LocalGrid


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _model(value=0.0):
    return ArrayRecord({"w": Array(np.full(tf.D, value))})


# -- malformed inputs, refused where they are given --------------------------------------------
def test_an_empty_initial_model_is_refused_before_any_client_trains():
    strategy = tf._strategy(selector=FixedArm(2))
    grid = LocalGrid(tf._app(), tf.K, seed=2)
    with pytest.raises(InvalidParameterError, match=r"'initial_arrays'.*at least one array"):
        strategy.start(grid=grid, initial_arrays=ArrayRecord({}), num_rounds=2)
    assert strategy.records == []


@pytest.mark.parametrize("returned", [0.5, (0.5, {"accuracy": 0.9})])
def test_an_evaluate_fn_that_returns_no_metricrecord_is_named_with_its_round(returned):
    strategy = tf._strategy(selector=FixedArm(2))
    grid = LocalGrid(tf._app(), tf.K, seed=2)
    with pytest.raises(TypeError, match=rf"evaluate_fn returned {type(returned).__name__} "
                       r".*at round 0; it must return a flwr.app.MetricRecord"):
        strategy.start(grid=grid, initial_arrays=_model(), num_rounds=2,
                       evaluate_fn=lambda rnd, arrays: returned)  # fmt: skip


# -- one run a file ----------------------------------------------------------------------------
def test_a_second_run_on_the_same_files_is_refused_naming_the_first(tmp_path):
    """While run A is in its first round, run B is started on A's records and checkpoint (from
    A's callback: the same process, as two seeds of one script would): B is refused before it
    writes or removes anything; A finishes with one record a round and resumes cleanly."""
    csv, ck = tmp_path / "records.csv", tmp_path / "run.npz"
    refused = []

    def second_run(report):
        if report.server_round == 1:
            other = tf._strategy(selector=FixedArm(2), rng=4, csv_path=csv, checkpoint=ck)
            with pytest.raises(InvalidParameterError) as err:
                tf._start(other, LocalGrid(tf._app(), tf.K, seed=2), 3)
            refused.append(str(err.value))
            # A's temporary checkpoint, were it being written, is not touched by B
            assert list(tmp_path.glob(".run.npz.*.tmp")) == []

    first = tf._strategy(selector=FixedArm(2), csv_path=csv, checkpoint=ck, on_round=second_run)
    tf._start(first, LocalGrid(tf._app(), tf.K, seed=2), 3)
    assert len(refused) == 1
    assert "'csv_path' of EEGradStrategy" in refused[0]
    assert "in use by another run" in refused[0]
    assert f"process {os.getpid()}" in refused[0]
    rounds = [int(line.split(",")[0]) for line in csv.read_text().splitlines()[1:]]
    assert rounds == [1, 2, 3]
    # the run has ended: its files are free, and the same configuration resumes (nothing to run)
    again = tf._strategy(selector=FixedArm(2), csv_path=csv, checkpoint=ck)
    tf._start(again, LocalGrid(tf._app(), tf.K, seed=2), 3)
    assert len(again.records) == 3


def test_a_run_that_fails_lets_go_of_its_files(tmp_path):
    csv = tmp_path / "records.csv"
    failing = tf._strategy(selector=FixedArm(2), csv_path=csv)
    with pytest.raises(TypeError, match="evaluate_fn"):
        failing.start(grid=LocalGrid(tf._app(), tf.K, seed=2), initial_arrays=_model(),
                      num_rounds=2, evaluate_fn=lambda rnd, arrays: 1.0)  # fmt: skip
    tf._start(tf._strategy(selector=FixedArm(2), csv_path=csv), LocalGrid(tf._app(), tf.K,
                                                                          seed=2), 2)  # fmt: skip


# -- an older run's checkpoint against a new initial model --------------------------------------
def test_a_checkpoint_of_a_run_from_another_initial_model_is_refused(tmp_path, caplog):
    """Same names, shapes and dtypes, other values: the checkpoint is another run's, refused
    naming the fix; the same initial model resumes (a finished run says so, once)."""
    ck = tmp_path / "run.npz"
    strategy = tf._strategy(selector=FixedArm(2), checkpoint=ck)
    strategy.start(grid=LocalGrid(tf._app(), tf.K, seed=2), initial_arrays=_model(0.0),
                   num_rounds=3)  # fmt: skip
    fresh = tf._strategy(selector=FixedArm(2), checkpoint=ck)
    with pytest.raises(CheckpointError, match=r"started from another initial model.*give the "
                       r"initial model that run started from"):
        fresh.start(grid=LocalGrid(tf._app(), tf.K, seed=2), initial_arrays=_model(1.0),
                    num_rounds=3)  # fmt: skip
    caplog.set_level(logging.INFO, logger="flwr")
    same = tf._strategy(selector=FixedArm(2), checkpoint=ck)
    result = same.start(grid=LocalGrid(tf._app(), tf.K, seed=2), initial_arrays=_model(0.0),
                        num_rounds=3)  # fmt: skip
    assert not np.array_equal(result.arrays["w"].numpy(), np.zeros(tf.D))  # the run's model
    said = [r.getMessage() for r in caplog.records if "EE-Grad" in r.getMessage()]
    assert not any("continuing at round 4 of 3" in line for line in said)
    assert any("has done 3 rounds, num_rounds = 3: its final model is returned" in line
               for line in said)  # fmt: skip


# -- replies checked against the node asked ------------------------------------------------------
class _Echoing(LocalGrid):
    """A LocalGrid that returns each train reply twice: the copy claims the next node and
    carries the reply's arrays + 100 (a replayed or forged reply)."""

    def pull_messages(self, message_ids):
        out = []
        for reply in super().pull_messages(message_ids):
            out.append(reply)
            if reply.metadata.message_type == "train" and not reply.has_error():
                forged = copy.deepcopy(reply)  # the same message id answered
                for record in forged.content.array_records.values():
                    for key in list(record):
                        record[key] = Array(record[key].numpy() + 100.0)
                src = int(reply.metadata.src_node_id)
                forged.metadata.__dict__["_src_node_id"] = self.node_ids[
                    (self.node_ids.index(src) + 1) % len(self.node_ids)]
                out.append(forged)
        return out


def test_a_reply_that_claims_another_node_or_answers_twice_is_not_folded(caplog):
    """Each of 3 asked nodes replies, and a forged copy of each (another node's id, +100 on its
    arrays) answers the same message: the model is the honest run's, 3 replies are counted,
    and each forged copy is said."""
    caplog.set_level(logging.WARNING, logger="flwr")
    honest = tf._strategy(selector=FixedArm(3))
    tf._start(honest, LocalGrid(tf._app(), tf.K, seed=2), 2)
    echoed = tf._strategy(selector=FixedArm(3))
    result = tf._start(echoed, _Echoing(tf._app(), tf.K, seed=2), 2)
    assert [r["clients_replied"] for r in echoed.records] == [3, 3]
    np.testing.assert_allclose(result.arrays["w"].numpy(),
                               tf._start(tf._strategy(selector=FixedArm(3)),
                                         LocalGrid(tf._app(), tf.K, seed=2), 2).arrays["w"].numpy())
    said = [r.getMessage() for r in caplog.records if "not folded" in r.getMessage()]
    assert len(said) == 6  # 3 a round
    assert "claims node" in said[0]


def test_a_reply_from_a_node_not_asked_is_said_and_recorded():
    """aggregate_train handed a reply from a node the round did not ask (a driver other than
    Flower's loop): not folded, said, and listed among the round's failed nodes."""
    strategy = tf._strategy(selector=FixedArm(2))
    grid = LocalGrid(tf._app(), tf.K, seed=2)
    strategy.begin_run(_model(), 1)
    messages = list(strategy.configure_train(1, _model(), ConfigRecord(), grid))
    replies = list(grid.send_and_receive(messages))
    asked = {int(m.metadata.dst_node_id) for m in messages}
    stranger = next(n for n in grid.node_ids if n not in asked)
    replies[1].metadata.__dict__["_src_node_id"] = stranger
    strategy.aggregate_train(1, replies)
    row = strategy.records[-1]
    assert row["clients_replied"] == 1
    assert str(stranger) in row["failed_nodes"].split()


# -- a resumed private run's ε is the uninterrupted one's, to the last digit ---------------------
@pytest.mark.parametrize("stop_after", [6, 7])
def test_a_resumed_private_runs_epsilon_is_the_uninterrupted_ones_exactly(tmp_path, stop_after):
    """The default rule's arms over 8 rounds (several distinct events): the uninterrupted run
    composed them round by round, the resumed one restores each distinct event as one
    composition; ε is a function of the ledger alone, so the records are equal, bit for bit
    (they differed in the last digit: 250.49494647742142 against 250.49494647742145)."""
    from eegrad.flower import CentralDP

    dp = CentralDP(noise_multiplier=0.3, clipping_norm=1.0, delta=1e-5)
    full = tf._strategy(privacy=dp)
    tf._start(full, LocalGrid(tf._app(), tf.K, seed=2), 8)
    assert len({r["arm"] for r in full.records}) > 1  # several distinct events
    ck = tmp_path / "run.npz"
    tf._start(tf._strategy(privacy=dp, checkpoint=ck), LocalGrid(tf._app(), tf.K, seed=2),
              stop_after)  # fmt: skip
    resumed = tf._strategy(privacy=dp, checkpoint=ck)
    tf._start(resumed, LocalGrid(tf._app(), tf.K, seed=2), 8)
    assert [r["epsilon"] for r in resumed.records] == [r["epsilon"] for r in full.records]
    assert resumed.records == full.records


# -- a resumed run goes on where the uninterrupted one would -------------------------------------
def test_an_uninterrupted_run_with_fewer_nodes_than_min_available_goes_on():
    """min_available_nodes = 2 (as FedAvg's): the uninterrupted run, down to one node after
    round 2, goes on with it (the resumed run below must do as it does)."""
    import test_flower_faults as ff

    def one_left(after):
        return ff._Leaving(tf._app(), tf.K, seed=2, gone=tf.K - 1, after=after)

    uninterrupted = tf._strategy(selector=FixedArm(2), min_available_nodes=2)
    ff._in_thread(lambda: tf._start(uninterrupted, one_left(2), 4), seconds=60)
    assert [r["nodes_connected"] for r in uninterrupted.records] == [8, 8, 1, 1]


def test_a_resumed_run_does_not_wait_for_nodes_the_uninterrupted_run_went_on_without(tmp_path):
    """Resumed after round 2 with one node connected, the run goes on with it as the
    uninterrupted one did (it waited for ever for min_available_nodes = 2)."""
    import test_flower_faults as ff

    ck = tmp_path / "run.npz"
    tf._start(tf._strategy(selector=FixedArm(2), min_available_nodes=2, checkpoint=ck),
              LocalGrid(tf._app(), tf.K, seed=2), 2)  # fmt: skip
    resumed = tf._strategy(selector=FixedArm(2), min_available_nodes=2, checkpoint=ck)
    grid = ff._Leaving(tf._app(), tf.K, seed=2, gone=tf.K - 1, after=0)
    ff._in_thread(lambda: tf._start(resumed, grid, 4), seconds=20)
    assert [r["nodes_connected"] for r in resumed.records] == [8, 8, 1, 1]
    assert [r["clients_replied"] for r in resumed.records][2:] == [1, 1]


# -- the default budget follows the nodes your FedAvg would sample -------------------------------
class _Joining(LocalGrid):
    """A LocalGrid whose nodes connect late: ``first`` of them for the first ``after`` rounds,
    all from then on."""

    def __init__(self, *args, first=3, after=1, **kw):
        super().__init__(*args, **kw)
        self.first, self.after, self.rounds, self._all = first, after, 0, list(self.node_ids)

    def get_node_ids(self):
        return self._all if self.rounds >= self.after else self._all[: self.first]

    def push_messages(self, messages, *, timeout=None):
        messages = list(messages)
        if messages and messages[0].metadata.message_type == "train":
            self.rounds += 1
        return super().push_messages(messages, timeout=timeout)


def test_the_default_budget_says_it_is_kept_when_nodes_join_later(caplog):
    """3 of 10 nodes at round 1, all 10 from round 2, 8 rounds, FedAvg(fraction_train=0.5):
    the budget is what it spends among the 3 (2 a round, 16), kept for the run because the rule
    plans for the K of its first round; the start says so and how to count the others, the
    round where more connect says the budget stays (it said neither), and the run lasts its 8
    rounds (its rule anchored on FedAvg's 5 a round among the 10 and spent the 16 by round 6)."""
    import test_flower_total_budget as tb

    from eegrad.flower import choose_clients

    caplog.set_level(logging.INFO, logger="flwr")
    strategy = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0))
    strategy.start(grid=_Joining(tb._quickstart_app(), tb.K, seed=2), initial_arrays=tb._model(),
                   num_rounds=8)  # fmt: skip
    assert [r["nodes_connected"] for r in strategy.records] == [3] + [10] * 7
    assert strategy.records[-1]["cost"] <= 16
    said = [r.getMessage() for r in caplog.records]
    start = next(line for line in said if "EE-Grad: budget: 16 client trainings" in line)
    assert "kept for the run if more join (wait for them with min_available_nodes=" in start
    joined = [line for line in said if "10 nodes connected, more than the K = 3" in line]
    assert len(joined) == 1
    assert "as was a budget of your FedAvg's spend, which stays" in joined[0]


# -- a folded reply is let go at once, not at the cyclic collector's pass ------------------------
def test_a_folded_replys_arrays_are_freed_as_it_is_folded_without_the_cyclic_collector(
        monkeypatch):
    """Flower's RecordDict refers to itself through its typed views (a reference cycle), so a
    reply's arrays waited for the cyclic collector: with it off, every round's n replies
    stayed (about 80 model sizes at K = 2,000). Now none of a round's replies' arrays outlives
    the round, with the collector off."""
    import gc
    import weakref

    from eegrad.flower import round_loop

    refs = []
    new_fold = round_loop.RoundLoop.new_fold

    def spying(self):
        fold = new_fold(self)
        add = fold.add

        def add_and_watch(m):
            refs.append(weakref.ref(m.content["arrays"]))
            return add(m)

        fold.add = add_and_watch
        return fold

    monkeypatch.setattr(round_loop.RoundLoop, "new_fold", spying)
    alive = []
    strategy = tf._strategy(selector=FixedArm(tf.K),
                            on_round=lambda r: alive.append(sum(w() is not None for w in refs)))
    gc.disable()
    try:
        tf._start(strategy, LocalGrid(tf._app(), tf.K, seed=2), 3)
    finally:
        gc.enable()
    assert len(refs) == 3 * tf.K
    assert alive == [0, 0, 0]


# -- a total budget is a promise: nodes never seen are not many in one round ---------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_budget_of_samples_is_not_overspent_by_clients_that_join_costlier(seed, caplog):
    """budget = 2,000 samples; 6 clients of 50 samples for 3 rounds, then 4 of 2,000 samples
    join: the run ends within one client's cost of its budget (round 4 asked 6 of the 10, the
    round's cap pricing a node never seen at the costliest seen, 50), and says why a round asks
    few of the nodes that joined."""
    import test_flower_total_budget as tb

    from eegrad.flower import choose_clients

    caplog.set_level(logging.INFO, logger="flwr")
    strategy = choose_clients(FedAvg(fraction_train=1.0, fraction_evaluate=0.0), budget=2000,
                              unit="samples", rng=seed)  # fmt: skip
    app = tb._quickstart_app(cost=lambda pid: {"num-examples": 50 if pid < 6 else 2000})
    strategy.start(grid=_Joining(app, tb.K, seed=2, first=6, after=3),
                   initial_arrays=tb._model(), num_rounds=30)  # fmt: skip
    assert strategy.records[-1]["cost"] <= 2000 + 2000
    joined = [r for r in strategy.records if r["nodes_connected"] == tb.K]
    assert joined  # the late nodes were reached
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "never reported a cost" in said


# -- the checkpoint's fingerprint is every keyword but where the output goes ----------------------
def test_the_fingerprint_holds_every_keyword_but_where_a_runs_output_goes():
    """EEGradStrategy's keywords are its configuration and make the checkpoint's fingerprint
    (docs/architecture.md), but csv_path, checkpoint and on_round, which a resumed run may
    change; min_available_nodes and the record keys were left out."""
    import inspect

    strategy = tf._strategy()
    keywords = set(inspect.signature(EEGradStrategy.__init__).parameters) - {"self"}
    named = set(strategy.fingerprint) | {"aggregation", "selector", "departure", "strategy"}
    # aggregation is D(1..N+1); selector and departure make 'rule'; strategy its class and
    # hyperparameters
    assert keywords - named == {"csv_path", "checkpoint", "on_round"}
    for key in ("min_available_nodes", "arrayrecord_key", "configrecord_key"):
        assert key in strategy.fingerprint


def test_a_first_round_past_the_budget_says_why(caplog):
    """Every node connected from the start, 5 clients of 50 samples and 5 of 2,000, budget 2,000
    samples: the first round asks your FedAvg's n before any cost is known and may spend past
    the budget (not mended: it would change the bench's baselines); the run says so, and why
    (it said nothing)."""
    import test_flower_total_budget as tb

    from eegrad.flower import choose_clients

    caplog.set_level(logging.WARNING, logger="flwr")
    strategy = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0), budget=2000,
                              unit="samples", rng=0)  # fmt: skip
    app = tb._quickstart_app(cost=lambda pid: {"num-examples": 50 if pid < 5 else 2000})
    strategy.start(grid=LocalGrid(app, tb.K, seed=2), initial_arrays=tb._model(), num_rounds=30)
    spent = strategy.records[-1]["cost"]
    assert spent > 2000  # seed 0 asks expensive clients first
    said = [r.getMessage() for r in caplog.records if "more than the 2000 left" in r.getMessage()]
    assert len(said) == 1
    assert f"server round 1 cost {spent:g}" in said[0]
    assert "no client had reported a cost before it" in said[0]
