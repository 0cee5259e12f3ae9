"""The scorecard of federations (eegrad example flower-scorecard): its quick path, its summary,
its resume and its errors; budgeted_train's mini-batch steps."""

import csv

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.clientapp import ClientApp

from eegrad import FixedArm, InvalidParameterError
from eegrad.examples import scorecard as sc
from eegrad.examples.scorecard_settings import SETTINGS, federation
from eegrad.flower import DeviceCost, LocalGrid, budgeted_train


def _read(path):
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_quick_card_writes_its_table_and_resumes(tmp_path):
    # Two NumPy settings, --quick: every file, the contract's columns, one summary per setting;
    # a rerun after one federation's saved rows are removed recomputes exactly those rows.
    out = tmp_path / "card"
    summaries = sc.main(out, quick=True, settings=["fedsgd", "overheads"], progress=False)
    rows = _read(out / "scorecard.csv")
    assert tuple(rows[0]) == sc.COLUMNS == ("setting", "method", "seed", "round", "cost",
                                            "train_loss", "test_accuracy")  # fmt: skip
    assert {r["setting"] for r in rows} == {"fedsgd", "overheads"}
    for name in ("arms.csv", "scorecard.md", "scorecard.png", "scorecard-arms.png",
                 "metadata.json"):
        assert (out / name).stat().st_size > 0
    table = (out / "scorecard.md").read_text()
    assert "eegrad example flower-scorecard --quick" in table
    assert "(a) fedsgd" in table
    assert "(c) overheads" in table
    s = summaries["default"]["fedsgd"]
    assert s["best"].startswith("fedavg-")
    assert s["over_best"] >= 1.0 or s["rank"] == 1
    # Equal total cost: every method of a setting ends at the same round and cost.
    last = {(r["setting"], r["method"], r["seed"]): float(r["cost"]) for r in rows}
    for name in ("fedsgd", "overheads"):
        assert len({c for (st, _, _), c in last.items() if st == name}) == 1
    # The default's n of every round is recorded.
    arms = _read(out / "arms.csv")
    assert len([a for a in arms if a["setting"] == "fedsgd" and a["seed"] == "0"]) == \
        SETTINGS["fedsgd"].quick_rounds  # fmt: skip
    # The saved runs read back are the card's rows; a run the store lacks is named.
    methods = sc.saved_methods(out / "runs-quick", "fedsgd")
    assert "default" in methods
    assert all(m == "default" or m.startswith("fedavg-") for m in methods)
    assert sc.load_runs(out / "runs-quick", "fedsgd", methods, [0, 1]) == \
        sorted((r for r in rows if r["setting"] == "fedsgd"),
               key=lambda r: (methods.index(r["method"]), int(r["seed"])))  # fmt: skip
    with pytest.raises(InvalidParameterError, match="'store'.*default-seed7.csv"):
        sc.load_runs(out / "runs-quick", "fedsgd", ["default"], [7])
    saved = out / "runs-quick" / "fedsgd" / "default-seed1.csv"
    before = saved.read_text()
    saved.unlink()
    sc.main(out, quick=True, settings=["fedsgd", "overheads"], progress=False)
    assert saved.read_text() == before
    assert _read(out / "scorecard.csv") == rows


def test_candidates_run_on_the_defaults_streams_and_are_paired_with_it(tmp_path):
    # A candidate of no arguments is the default on the default's streams (common random
    # numbers): the same rows and arms, a paired difference of exactly 0; one that changes
    # the rule (damped steps) differs, and its table has the paired column.
    out = tmp_path / "card"
    summaries = sc.main(out, quick=True, settings=["fedsgd"], progress=False,
                        candidates={"same": {}, "damped": {"damp_exploration": True}})  # fmt: skip
    rows = _read(out / "scorecard.csv")

    def of(method):
        return [{**r, "method": ""} for r in rows if r["method"] == method]

    assert of("same") == of("default")
    arms = _read(out / "arms.csv")
    assert [{**a, "method": ""} for a in arms if a["method"] == "same"] == \
        [{**a, "method": ""} for a in arms if a["method"] == "default"]  # fmt: skip
    assert summaries["same"]["fedsgd"]["versus_default"] == (0.0, 0.0)
    assert summaries["default"]["fedsgd"]["versus_default"] is None
    assert of("damped") != of("default")
    mean, se = summaries["damped"]["fedsgd"]["versus_default"]
    assert np.isfinite(mean)
    assert se > 0
    table = (out / "scorecard.md").read_text()
    assert "| − default |" in table
    assert f"{mean:+.3f} ± {se:.3f}" in table


def test_a_plan_without_fixed_n_holds_the_default_and_the_candidates_alone():
    # fixed=False (a candidate paired with the default, without the yardstick): the same
    # federations as the full plan's default and candidates, and no fedavg-<n>.
    full = sc.plan(["fedsgd"], [0, 1], quick=True, candidates={"same": {}})
    alone = sc.plan(["fedsgd"], [0, 1], quick=True, candidates={"same": {}}, fixed=False)
    assert [t[1] for t in alone] == ["default", "same", "default", "same"]
    assert alone == [t for t in full if not t[1].startswith("fedavg-")]
    assert len(full) > len(alone)
    # default=False (a study of the fixed n alone): the full plan less the default's runs.
    fixed = sc.plan(["fedsgd"], [0, 1], quick=True, default=False)
    assert fixed == [t for t in full if t[1].startswith("fedavg-")]


def test_adapt_changes_the_federation_before_its_run():
    # A study's change of the federation (here: every client's reply weighted 1) reaches the
    # run: the same federation without it gives other rows, and with it the rows are its own.
    seen = []

    def unweighted(fed):
        seen.append(fed.K)
        inner_app = fed.client_app

        def client_app():
            inner = inner_app()
            app = ClientApp()

            @app.train()
            def train(msg, context):
                reply = inner(msg, context)
                reply.content["metrics"]["num-examples"] = 1
                return reply

            return app

        fed.client_app = client_app
        return fed

    kw = {"rounds": 4, "eval_every": 2, "quick": True}
    plain, _ = sc.run_one("local-steps", "fedavg-6", 0, **kw)
    changed, _ = sc.run_one("local-steps", "fedavg-6", 0, adapt=unweighted, **kw)
    assert seen == [20]  # called once, with the federation of 20 clients
    assert [r["round"] for r in changed] == [r["round"] for r in plain]
    assert [r["train_loss"] for r in changed] != [r["train_loss"] for r in plain]


def test_warmup_reference_plays_the_defaults_warmup_then_the_best_fixed_n(tmp_path):
    # --warmup-reference: after the fixed n, one more method per setting, warmup-then-<best>,
    # whose rounds ask the default's warm-up arms in order (the anchored default has none: its
    # first rounds are your strategy's n), then the best fixed n of the card every round; its
    # table is paired with the default.
    from eegrad.cli import main

    out = tmp_path / "ref"
    assert main(["example", "flower-scorecard", "--quick", "--settings", "fedsgd",
                 "--warmup-reference", "--out", str(out)]) == 0  # fmt: skip
    rows = _read(out / "scorecard.csv")
    best = sc.summarise(rows)["best"]
    n = int(best.removeprefix("fedavg-"))
    method = f"warmup-then-{n}"
    arms = _read(out / "arms.csv")
    for seed in ("0", "1"):
        played = [int(a["n"]) for a in arms if a["method"] == method and a["seed"] == seed]
        assert played == [n] * SETTINGS["fedsgd"].quick_rounds
    # Rows for every evaluation of both seeds, at the default's costs.
    mine = [r for r in rows if r["method"] == method]
    default = [r for r in rows if r["method"] == "default"]
    assert [(r["seed"], r["round"], r["cost"]) for r in mine] == \
        [(r["seed"], r["round"], r["cost"]) for r in default]  # fmt: skip
    table = (out / "scorecard.md").read_text()
    assert f"## {sc.WARMUP_REFERENCE}" in table
    assert "| − default |" in table
    meta = (out / "metadata.json").read_text()
    assert sc.WARMUP_REFERENCE in meta


def test_warmup_then_fixed_refuses_an_arm_outside_the_range_and_a_rule_without_warmup():
    from eegrad import FixedArm, ProgressThompson

    rule = sc.WarmupThenFixed(ProgressThompson(population=20), 21)
    with pytest.raises(InvalidParameterError, match=r"'n'.*1\.\.N = 1\.\.20.*21"):
        rule.init(1, 20, 3)
    with pytest.raises(TypeError, match="'rule'.*SpreadThompson"):
        sc.WarmupThenFixed(FixedArm(2), 2)
    with pytest.raises(InvalidParameterError, match="'n'"):
        sc.WarmupThenFixed(ProgressThompson(population=20), 0)


def test_fixed_schedule_plays_its_rounds_in_order_then_keeps_the_last():
    # Rounds 1..5 of the schedule (2, 2, 5) are arms 1, 1, 4, 4, 4 (0-based), across iterates
    # (a federation's round is an iterate), in every realization.
    rule = sc.FixedSchedule([2, 2, 5])
    rule.init(3, 6, 2)
    played = []
    for _ in range(5):
        arms = rule.ask()
        played.append(arms.tolist())
        rule.tell(arms, np.zeros((3, 2)))
        rule.next_iterate()
    assert played == [[1] * 3, [1] * 3, [4] * 3, [4] * 3, [4] * 3]
    assert rule.get_params() == {"schedule": [2, 2, 5]}


def test_fixed_schedule_refuses_a_bad_schedule_by_name():
    with pytest.raises(InvalidParameterError, match=r"'schedule'.*1\.\.N = 1\.\.4.*\[2, 5\]"):
        sc.FixedSchedule([2, 5]).init(1, 4, 2)
    with pytest.raises(InvalidParameterError, match="'schedule'.*at least one round"):
        sc.FixedSchedule([])
    with pytest.raises(InvalidParameterError, match="'schedule'"):
        sc.FixedSchedule([3, 0])
    with pytest.raises(TypeError, match="'schedule'.*sequence of numbers of clients"):
        sc.FixedSchedule("6x20,15")


def test_summary_ranks_against_the_fixed_n_with_paired_errors():
    # Three fixed n and the default on two seeds: the best, the median of the fixed n's means,
    # the ratios, the rank and the paired difference in SEs, by hand.
    rows = []
    finals = {"fedavg-1": [3.0, 3.2], "fedavg-2": [1.0, 1.4], "fedavg-3": [2.0, 2.0],
              "default": [1.5, 1.7]}  # fmt: skip
    for m, values in finals.items():
        for seed, v in enumerate(values):
            rows += [{"method": m, "seed": seed, "round": r, "train_loss": v} for r in (1, 2)]
    s = sc.summarise(rows)
    assert s["best"] == "fedavg-2"
    assert s["median_loss"] == pytest.approx(2.0)
    assert s["over_best"] == pytest.approx(1.6 / 1.2)
    assert s["over_median"] == pytest.approx(1.6 / 2.0)
    assert s["rank"] == 2
    assert s["below_median"]
    diff = np.array([0.5, 0.3])
    assert s["ses_from_best"] == pytest.approx(diff.mean() / (diff.std(ddof=1) / np.sqrt(2)))
    # The median fixed n by mean is fedavg-3; the default less it, seed by seed, in units of
    # the best's mean loss 1.2.
    blind = np.array([1.5 - 2.0, 1.7 - 2.0]) / 1.2
    assert s["versus_median"] == pytest.approx((blind.mean(), blind.std(ddof=1) / np.sqrt(2)))
    assert s["versus_default"] is None
    # Four fixed n: the median is the mean of the two middle ones, seed by seed, as the
    # median of the means is.
    rows += [{"method": "fedavg-4", "seed": seed, "round": r, "train_loss": v}
             for seed, v in enumerate([2.4, 2.8]) for r in (1, 2)]  # fmt: skip
    s = sc.summarise(rows)
    assert s["median_loss"] == pytest.approx((2.0 + 2.6) / 2)
    blind = np.array([1.5 - (2.0 + 2.4) / 2, 1.7 - (2.0 + 2.8) / 2]) / 1.2
    assert s["versus_median"] == pytest.approx((blind.mean(), blind.std(ddof=1) / np.sqrt(2)))
    assert "| −" in sc.table({"fedsgd": s})  # the column of the paired difference, in %
    assert np.isnan(sc.mean_and_se([1.0])[1])  # one seed: no SE
    assert np.all(np.isnan(sc.mean_and_se([])))  # no seed in common: no difference
    fedavg = sc.summarise(rows, "fedavg-2")["versus_default"]
    paired = np.array([1.0 - 1.5, 1.4 - 1.7]) / 1.2
    assert fedavg == pytest.approx((paired.mean(), paired.std(ddof=1) / np.sqrt(2)))


def test_unknown_settings_are_refused_listing_the_known_ones(tmp_path):
    with pytest.raises(InvalidParameterError, match="fedsgd, local-steps, overheads"):
        sc.main(tmp_path, quick=True, settings=["fedsgd", "nonsuch"], progress=False)
    with pytest.raises(InvalidParameterError, match="seeds"):
        sc.main(tmp_path, quick=True, seeds=1, settings=["fedsgd"], progress=False)


def test_every_setting_builds_a_federation_with_an_inner_best_range():
    # Each setting's federation affords at least 5 arms on seed 0; the heavy-overhead one
    # fewer than its 50 clients (its best n lies inside the range).
    for name, setting in SETTINGS.items():
        if setting.kind == "torch":
            pytest.importorskip("torch")
        fed = federation(name, 0, setting.quick_rounds)
        assert fed.N >= 5, name
        # every client's data, by partition id: K clients that hold the training set between
        # them (digits less the fifth held out; a client the split leaves empty is given 5)
        assert len(fed.data_sizes) == fed.K, name
        assert min(fed.data_sizes) >= 1, name
        assert 1797 - 1797 // 5 <= sum(fed.data_sizes) <= 1797 - 1797 // 5 + 5 * fed.K, name
    assert federation("overheads", 0, 20).N < 50


def test_cli_runs_the_card_and_refuses_unknown_settings(tmp_path, capsys):
    from eegrad.cli import main

    out = tmp_path / "cli"
    assert main(["example", "flower-scorecard", "--quick", "--settings", "fedsgd", "--out",
                 str(out)]) == 0  # fmt: skip
    assert "eegrad example flower-scorecard --quick --settings fedsgd" in \
        (out / "scorecard.md").read_text()  # fmt: skip
    assert {r["setting"] for r in _read(out / "scorecard.csv")} == {"fedsgd"}
    capsys.readouterr()
    assert main(["example", "flower-scorecard", "--quick", "--settings", "nonsuch", "--out",
                 str(tmp_path / "bad")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "'settings'" in err
    assert "known settings: fedsgd, local-steps" in err
    assert "'nonsuch'" in err
    with pytest.raises(SystemExit):
        main(["example", "flower-scorecard", "--settings"])  # --settings needs names


# -- budgeted_train's mini-batches -------------------------------------------------------------------
def test_budgeted_train_spends_a_share_in_mini_batch_steps():
    # A share that buys b samples makes ⌈b/size⌉ steps (the last one smaller), each a fresh
    # call of the user's gradient; the weight is b and the cost that of b samples.
    calls = []

    def gradient(arrays, batch_size, context, config):
        calls.append(batch_size)
        return [np.ones_like(arrays[0])]

    device = DeviceCost(overhead=1.0, speed=2.0)
    train = budgeted_train(gradient, device, lr=0.1, batch_size=8)
    cfg = ConfigRecord({"budget-share": 12.0, "server-round": 1})
    LocalGrid(ClientApp(), 1)  # sets the process's task identity, which a Message needs
    msg = Message(RecordDict({"arrays": ArrayRecord({"w": Array(np.zeros(3))}), "config": cfg}),
                  1, MessageType.TRAIN)  # fmt: skip
    ctx = Context(run_id=1, node_id=1, node_config={"partition-id": 0}, state=RecordDict(),
                  run_config={})  # fmt: skip
    reply = train(msg, ctx)
    b = device.samples(12.0)  # ⌊(12 − 1)·2⌋ = 22
    assert calls == [8, 8, 6]
    np.testing.assert_allclose(reply.content["arrays"]["w"].numpy(), -0.1 * 3 * np.ones(3))
    assert reply.content["metrics"]["num-examples"] == b
    assert reply.content["metrics"]["cost"] == pytest.approx(device.cost(b))
    assert reply.content["metrics"]["local-steps"] == 3  # the steps, reported for the rule
    with pytest.raises(InvalidParameterError, match="'local_steps'"):
        budgeted_train(gradient, device, local_steps=2, batch_size=8)
    with pytest.raises(InvalidParameterError, match="'batch_size'"):
        budgeted_train(gradient, device, batch_size=0)


def test_a_total_budget_setting_spends_the_same_budget_in_every_method(tmp_path):
    """(j) --quick: the default and FedAvg at each fixed n run until the total budget is spent
    (each stops with less left than a round could cost), each evaluation's cost is the run's
    cumulative cost, and the final loss averages the evaluations after 80 % of it (the final
    model's: the last evaluation alone)."""
    out = tmp_path / "card"
    summaries = sc.main(out, quick=True, settings=["fixed-cost"], progress=False)
    with open(out / "scorecard.csv") as fh:
        rows = list(csv.DictReader(fh))
    budget = SETTINGS["fixed-cost"].quick_total_budget
    ends = {}
    for r in rows:
        key = (r["method"], r["seed"])
        ends[key] = max(ends.get(key, 0.0), float(r["cost"]))
    # the costliest round a run could take: D(20) plus every client as costly as the largest
    fed = federation("fixed-cost", 0, 10, quick=True)
    worst = float(fed.aggregation(np.array([20.0]))[0]) + 20 * 0.01 * 400
    assert all(budget - worst <= end <= budget for end in ends.values()), ends
    assert {m for m, _ in ends} >= {"default", "fedavg-1", "fedavg-20"}
    s = summaries["default"]["fixed-cost"]
    losses = sc.final_losses(rows)
    for m, per_seed in losses.items():
        assert s["final_loss"][m][0] == pytest.approx(np.mean(list(per_seed.values())))
    seed0 = sorted((float(r["cost"]), float(r["train_loss"])) for r in rows
                   if r["method"] == "fedavg-1" and r["seed"] == "0")  # fmt: skip
    tail = [v for c, v in seed0 if c >= 0.8 * seed0[-1][0]]
    assert losses["fedavg-1"][0] == pytest.approx(np.mean(tail))
    # the final model: each run's last evaluation alone, summarised as the window is
    model = sc.final_losses(rows, "model")
    assert model["fedavg-1"][0] == pytest.approx(seed0[-1][1])
    s_model = sc.summarise(rows, final="model")
    for m, per_seed in model.items():
        assert s_model["final_loss"][m][0] == pytest.approx(np.mean(list(per_seed.values())))
    assert "## default, the final model" in (out / "scorecard.md").read_text()
    with pytest.raises(ValueError, match="'final' parameter.*'window' or 'model'"):
        sc.final_losses(rows, "last")


def test_pytorch_rows_do_not_depend_on_the_threads_of_the_process():
    # Every PyTorch setting (per-round or total budget) trains on one thread: a float32
    # reduction split across threads adds in another order, so the rows would depend on the
    # machine's cores (run in-process here: joblib's workers are set to one thread anyway).
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    rows = []
    try:
        for threads in (1, 4):
            torch.set_num_threads(threads)
            got, _ = sc.run_one("quickstart", "fedavg-1", 0, rounds=5000, eval_every=1)
            rows.append([float(r["train_loss"]) for r in got])
    finally:
        torch.set_num_threads(before)
    assert rows[0] == rows[1]


def test_a_saved_default_run_is_reused_only_under_the_same_default_rule(tmp_path, monkeypatch):
    """A stored default run names the rule that made it (``.rule``); a rerun takes it again
    while that is today's default and recomputes it where the name differs or is missing,
    while a fixed n's stored run is taken whatever the rule."""
    calls = []
    real = sc.run_one

    def counting(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(sc, "run_one", counting)
    store = tmp_path / "runs"
    todo = [("fedsgd", m, 0, 6, 3, None, True) for m in ("default", "fedavg-2")]
    first, _ = sc._execute(todo, jobs=1, store=store, progress=False)
    assert calls == ["default", "fedavg-2"]
    rule_file = store / "fedsgd" / "default-seed0.rule"
    assert rule_file.read_text().strip() == sc.default_rule_of("fedsgd")
    again, _ = sc._execute(todo, jobs=1, store=store, progress=False)
    assert calls == ["default", "fedavg-2"]  # both taken from the store
    assert [float(r["train_loss"]) for r in again] == [r["train_loss"] for r in first]
    rule_file.write_text("default (an earlier rule)\n")
    sc._execute(todo, jobs=1, store=store, progress=False)
    assert calls == ["default", "fedavg-2", "default"]
    rule_file.unlink()
    sc._execute(todo, jobs=1, store=store, progress=False)
    assert calls == ["default", "fedavg-2", "default", "default"]
    assert rule_file.read_text().strip() == sc.default_rule_of("fedsgd")


def test_run_takes_its_store_as_a_string_too(tmp_path):
    """``store`` as ``load_runs`` takes it, a str or a Path: each run is saved under it, and a
    second run with the other spelling reads the saved run back (before: a TypeError in the
    worker, joining str paths)."""
    store = tmp_path / "runs"
    rows, _ = sc.run(["fedsgd"], [0], quick=True, store=str(store), fixed=False)
    assert (store / "fedsgd" / "default-seed0.csv").exists()
    again, _ = sc.run(["fedsgd"], [0], quick=True, store=store, fixed=False)
    assert [float(r["train_loss"]) for r in again] == [float(r["train_loss"]) for r in rows]


def test_a_saved_run_is_reused_only_where_what_made_it_is_todays(tmp_path, monkeypatch):
    """A saved fixed n's or candidate's run is taken again by what made it (its ``.run``
    file), not by its name: another candidate of the same name, another number of rounds, a
    run without the file (an earlier harness) are recomputed."""
    calls = []
    real = sc.run_one

    def counting(*args, **kwargs):
        calls.append((args[1], kwargs.get("rounds")))
        return real(*args, **kwargs)

    monkeypatch.setattr(sc, "run_one", counting)
    store = tmp_path / "runs"
    cand = {"selector": FixedArm(2)}
    todo = [("fedsgd", "fedavg-2", 0, 6, 3, None, True), ("fedsgd", "fixed", 0, 6, 3, cand, True)]
    sc._execute(todo, jobs=1, store=store, progress=False)
    sc._execute(todo, jobs=1, store=store, progress=False)
    assert len(calls) == 2  # the second pass took both from the store
    other = [("fedsgd", "fixed", 0, 6, 3, {"selector": FixedArm(3)}, True)]
    sc._execute(other, jobs=1, store=store, progress=False)
    assert len(calls) == 3  # the same name, another candidate: recomputed
    (store / "fedsgd" / "fedavg-2-seed0.run").unlink()
    sc._execute(todo[:1], jobs=1, store=store, progress=False)
    assert calls[-1] == ("fedavg-2", 6)  # no record of what made it: recomputed
    longer = [("fedsgd", "fedavg-2", 0, 9, 3, None, True)]
    sc._execute(longer, jobs=1, store=store, progress=False)
    assert calls[-1] == ("fedavg-2", 9)
