"""EEGradStrategy(checkpoint=PATH): a run stopped after any round — or killed inside one —
resumes and ends as the uninterrupted run does (same arms, records and model, bit for bit on the
in-process grid, which is deterministic)."""

import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord
from flwr.serverapp.strategy import FedAdam

from eegrad import FixedArm, MemoryThompson
from eegrad.checkpoint import CheckpointError, read_checkpoint
from eegrad.flower import LocalGrid
from eegrad.flower.strategy import default_rule_name

sys.path.insert(0, str(Path(__file__).parent))
from test_flower import D, K, _app, _start, _strategy, _told_rounds_left

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


CASES = [
    # the default with a departure (its clients report a loss): the rule's evidence resumes too
    pytest.param({"departure": 0.5}, 12, 5, id="default-every-round"),
    pytest.param({"selector": FixedArm(3)}, 8, 3, id="fixed-n"),
    # the paper's T-round steps, stopped inside an estimate (round 21 of the second one)
    pytest.param({"steps": "t-rounds", "T": 16, "selector": MemoryThompson()}, 40, 21,
                 id="t-rounds-mid-estimate"),
]


class _Stop(Exception):
    """The interruption of a run (a crash, a kill) after a round."""


def _start_until(strategy, grid, rounds, stop):
    """A run of ``rounds`` rounds stopped after round ``stop``, as a crash would stop it (the
    rule was told the rounds left of the whole run)."""

    def evaluate(server_round, arrays):
        if server_round == stop:
            raise _Stop

    with pytest.raises(_Stop):
        strategy.start(grid=grid, initial_arrays=ArrayRecord({"w": Array(np.zeros(D))}),
                       num_rounds=rounds, evaluate_fn=evaluate)  # fmt: skip


def _reporting_loss():
    return _app(reports_loss=True)


def _resumed_equals_uninterrupted(tmp_path, kw, rounds, stop, app=_reporting_loss):
    """Run ``rounds`` rounds whole, and stopped after ``stop`` then resumed: the same records,
    model, metrics and CSV. Returns the uninterrupted strategy."""
    full = _strategy(csv_path=tmp_path / "full.csv", **kw)
    res_full = _start(full, LocalGrid(app(), K, seed=2), rounds)
    ck = tmp_path / "run.npz"
    first = _strategy(checkpoint=ck, csv_path=tmp_path / "resumed.csv", **kw)
    _start_until(first, LocalGrid(app(), K, seed=2), rounds, stop)
    second = _strategy(checkpoint=ck, csv_path=tmp_path / "resumed.csv", **kw)
    res = _start(second, LocalGrid(app(), K, seed=2), rounds)
    assert second.records == full.records
    assert len({r["arm"] for r in full.records}) > 1 or "selector" in kw
    np.testing.assert_array_equal(res.arrays["w"].numpy(), res_full.arrays["w"].numpy())
    assert sorted(res.train_metrics_clientapp) == list(range(1, rounds + 1))
    assert (tmp_path / "resumed.csv").read_text() == (tmp_path / "full.csv").read_text()
    return full


@pytest.mark.parametrize(("kw", "rounds", "stop"), CASES)
def test_a_resumed_run_ends_as_the_uninterrupted_one(tmp_path, kw, rounds, stop):
    _resumed_equals_uninterrupted(tmp_path, kw, rounds, stop)


def test_a_resumed_run_keeps_the_curve_in_the_local_steps(tmp_path):
    # Mini-batch clients, whose local steps span more than twofold across the arms: the default
    # rule's curve is in their steps (ProgressThompson.arm_steps), and a run stopped after
    # round 6 of 14 resumes with that state and ends as the uninterrupted one.
    full = _resumed_equals_uninterrupted(tmp_path, {"departure": 0.5}, 14, 6,
                                         app=lambda: _app(batch_size=4, reports_loss=True))
    steps = full.state.rule.selector.model.arm_steps()[0]
    assert steps.max() >= 2.0 * steps.min(), steps


def test_a_resumed_run_tells_its_rule_the_rounds_left(tmp_path, monkeypatch):
    # Resumed after round 5 of 12, the rule is told 7, 6, ..., 1: the rounds left count from
    # the checkpoint's round to the num_rounds of the resumed start.
    told = _told_rounds_left(monkeypatch)
    ck = tmp_path / "run.npz"
    _start_until(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 12, 5)
    assert told == [12, 11, 10, 9, 8]
    told.clear()
    _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 12)
    assert told == [7, 6, 5, 4, 3, 2, 1]


def test_a_checkpoint_of_another_run_is_refused_by_name(tmp_path):
    ck = tmp_path / "run.npz"
    _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 2)
    with pytest.raises(CheckpointError, match=r"another run: budget: 40.0 in the checkpoint, "
                                              r"50.0 here"):  # fmt: skip
        _start(_strategy(checkpoint=ck, budget=50.0), LocalGrid(_app(), K, seed=2), 4)
    default = re.escape(default_rule_name(False))  # the default's name, as the fingerprint has it
    assert default.startswith(r"default\ \(AnchoredProgress,")
    with pytest.raises(CheckpointError, match=rf"rule: '{default}' in the checkpoint, 'FixedArm'"):
        _start(_strategy(checkpoint=ck, selector=FixedArm(2)), LocalGrid(_app(), K, seed=2), 4)
    other = ArrayRecord({"w": Array(np.zeros(D + 1))})
    with pytest.raises(CheckpointError, match="model arrays"):
        _strategy(checkpoint=ck).start(grid=LocalGrid(_app(), K, seed=2), initial_arrays=other,
                                       num_rounds=4)  # fmt: skip
    (tmp_path / "not.npz").write_bytes(b"no zip at all")
    with pytest.raises(CheckpointError, match="cannot be read"):
        _start(_strategy(checkpoint=tmp_path / "not.npz"), LocalGrid(_app(), K), 2)


def test_a_checkpoint_of_another_default_rule_is_refused(tmp_path, monkeypatch):
    # The default rule's noise model is part of what a checkpoint must share: a run saved with
    # the first-order default (its state a 2 × 2 fit) does not continue under the second-order
    # one (3 × 3).
    import eegrad.flower.round_loop as strategy_module

    ck = tmp_path / "server.npz"
    monkeypatch.setattr(strategy_module, "DEFAULT_NOISE_ORDER", 1)
    first = re.escape(default_rule_name(False))
    _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 2)
    monkeypatch.setattr(strategy_module, "DEFAULT_NOISE_ORDER", 2)
    second = re.escape(default_rule_name(False))
    assert "noise_order=1" in first
    assert "noise_order=2" in second
    with pytest.raises(CheckpointError, match=rf"rule: '{first}' in the checkpoint, '{second}' "
                                              r"here"):  # fmt: skip
        _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 4)


def test_an_interrupted_checkpoint_write_leaves_the_previous_one(tmp_path, monkeypatch):
    ck = tmp_path / "run.npz"
    _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 2)
    before = ck.read_bytes()

    def broken_savez(fh, **members):
        fh.write(b"PK half a zip")
        raise KeyboardInterrupt  # the process stopped mid-write

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(KeyboardInterrupt):
        _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 3)
    assert ck.read_bytes() == before
    # no temporary file left behind (the run's lock, run.npz.lock, stays: keeping.py)
    assert [p for p in tmp_path.iterdir() if p.suffix != ".lock"] == [ck]
    tree, _ = read_checkpoint(ck)
    assert tree["state"]["__dict__"]["server_round"] == 2


SCRIPT = """
import logging, os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import numpy as np
from test_flower import K, _app, _start, _strategy
from flwr.serverapp.strategy import FedAdam
from eegrad.flower import LocalGrid
logging.getLogger("flwr").setLevel(logging.ERROR)
marker = Path({marker!r})

def bad(pid, arrays):  # the server's process is killed inside round 5, as a client replies
    if not marker.exists() and len(_strategy_ref[0].records) == 4:
        marker.write_text("killed")
        os.kill(os.getpid(), signal.SIGKILL)
    return None

_strategy_ref = [_strategy(checkpoint={ck!r}, **{kw})]
res = _start(_strategy_ref[0], LocalGrid(_app(bad=bad), K, seed=2), 9)
np.save({out!r}, res.arrays["w"].numpy())
print([r["arm"] for r in _strategy_ref[0].records])
"""


@pytest.mark.parametrize("inner", [None, "FedAdam"])
def test_a_server_killed_inside_a_round_resumes_where_it_was(tmp_path, inner):
    """A subprocess runs the strategy with a checkpoint and is killed (SIGKILL) inside round 5
    while the clients reply; run again, it resumes after round 4 and ends with the arms,
    records and model of a run never killed (with FedAdam inside: its moments resumed too)."""
    adam = "FedAdam(fraction_evaluate=0.0, eta=0.05, beta_1=0.9, beta_2=0.99)"
    kw = "{}" if inner is None else f'{{"strategy": {adam}}}'  # the killed server's, as code
    full = _strategy() if inner is None else _strategy(
        strategy=FedAdam(fraction_evaluate=0.0, eta=0.05, beta_1=0.9, beta_2=0.99))  # fmt: skip
    res_full = _start(full, LocalGrid(_app(), K, seed=2), 9)
    marker, ck, out = tmp_path / "killed", tmp_path / "run.npz", tmp_path / "w.npy"
    script = SCRIPT.format(tests=str(ROOT / "tests"), marker=str(marker), ck=str(ck),
                           out=str(out), kw=kw)  # fmt: skip
    path = tmp_path / "server.py"
    path.write_text(textwrap.dedent(script))
    runs = []
    for _ in range(3):  # killed at most once: the marker stops the second kill
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, check=False)  # fmt: skip
        runs.append(proc.returncode)
        if proc.returncode == 0:
            break
    assert marker.exists()
    assert runs == [-9, 0]  # killed by SIGKILL inside round 5, then resumed to the end
    arms = eval(proc.stdout.strip().splitlines()[-1])
    assert arms == [r["arm"] for r in full.records]
    np.testing.assert_array_equal(np.load(out), res_full.arrays["w"].numpy())


def test_a_checkpoint_of_another_evaluation_fraction_is_refused(tmp_path):
    # fraction_evaluate is part of the run (its own stream, checkpointed): a run saved with
    # one is not continued with another.
    ck = tmp_path / "run.npz"
    _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 2)
    with pytest.raises(CheckpointError, match=r"fraction_evaluate: 0.0 in the checkpoint, 0.5 here"):
        _start(_strategy(checkpoint=ck, fraction_evaluate=0.5), LocalGrid(_app(), K, seed=2), 4)


def test_a_private_run_with_the_users_spread_rule_resumes_and_leaves_the_rule_as_given(tmp_path):
    # With privacy the strategy tells the rule the release's noise on a copy: the user's rule
    # is not written into, so the saved fingerprint equals a fresh strategy's and the run
    # resumes as the uninterrupted one.
    from eegrad import SpreadThompson
    from eegrad.flower import CentralDP

    rule = SpreadThompson(population=K, noise_order=2)

    def strategy(**kw):
        return _strategy(privacy=CentralDP(2.0, 1.0, 1e-5), selector=rule, **kw)

    full = strategy()
    res_full = _start(full, LocalGrid(_app(), K, seed=2), 8)
    ck = tmp_path / "run.npz"
    _start(strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 3)
    second = strategy(checkpoint=ck)
    res = _start(second, LocalGrid(_app(), K, seed=2), 8)
    assert rule.release_noise is None
    assert full.selector.release_noise is not None
    assert second.records == full.records
    np.testing.assert_array_equal(res.arrays["w"].numpy(), res_full.arrays["w"].numpy())


def test_a_checkpoint_of_the_earlier_layout_is_refused_with_what_to_do(tmp_path):
    # The earlier layout held the rule in a GradientEstimator under "estimator"; the rule's
    # driver is "rule" now. Such a checkpoint is refused naming both, and how to go on.
    from eegrad.checkpoint import write_checkpoint

    ck = tmp_path / "run.npz"
    _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 2)
    tree, arrays = read_checkpoint(ck)
    fields = tree["state"]["__dict__"]
    fields["estimator"] = fields.pop("rule")
    write_checkpoint(ck, tree, arrays)
    with pytest.raises(CheckpointError, match=r"another version of eegrad.flower: its state has "
                                              r"no 'rule' and has 'estimator' instead\. Resume "
                                              r"it with the version that wrote it, or remove "
                                              r"it"):  # fmt: skip
        _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 4)


def _object_trees(tree, kind):
    """Every object of class ``kind`` in a checkpoint's tree (its fields dicts)."""
    if isinstance(tree, dict):
        if tree.get("__object__", "").endswith(f".{kind}"):
            yield tree["fields"]
        for value in tree.values():
            yield from _object_trees(value, kind)
    elif isinstance(tree, list):
        for value in tree:
            yield from _object_trees(value, kind)


def test_a_rule_saved_without_its_model_is_refused_not_resumed_afresh(tmp_path):
    # An earlier layout held the rule's fits as the rule's own fields, where a rule holds them
    # in its model now. Restored into this run's rule, that state would leave the run on a
    # model started afresh, its evidence lost: it is refused, naming the part it lacks.
    from eegrad.checkpoint import write_checkpoint

    ck = tmp_path / "run.npz"
    _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 4)
    tree, arrays = read_checkpoint(ck)
    (rule,) = _object_trees(tree, "AnchoredProgress")
    rule["_noise"] = rule.pop("model")  # the fits under another name, as an earlier layout
    write_checkpoint(ck, tree, arrays)
    with pytest.raises(CheckpointError, match=r"holds a AnchoredProgress at .* without 'model', "
                                              r"which this run's has: it was written by another "
                                              r"version of eegrad"):  # fmt: skip
        _start(_strategy(checkpoint=ck), LocalGrid(_app(), K, seed=2), 6)
