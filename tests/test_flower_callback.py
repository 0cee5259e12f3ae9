"""A run that explains itself: the per-round callback, the evaluations' table, and the log of a
run that stops before its end (Ctrl-C, a failed round) saying what it keeps."""

import csv
import logging

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

import test_flower_total_budget as tb
from flwr.app import MetricRecord
from flwr.serverapp.strategy import FedAvg

from eegrad.flower import RoundReport, choose_clients
from eegrad.flower.strategy import EVALUATION_COLUMNS


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def test_the_callback_gets_each_rounds_record_reason_and_estimates():
    reports: list[RoundReport] = []
    s = choose_clients(FedAvg(fraction_evaluate=0.0), budget=60, on_round=reports.append)
    tb._run(s, tb._quickstart_app(), rounds=100)
    assert [r.server_round for r in reports] == [r["server_round"] for r in s.records]
    assert [r.record for r in reports] == s.records
    assert all(r.metrics["arm"] == r.record["arm"] for r in reports)
    # the quickstart client's own train_loss reaches the callback with eegrad's metrics
    assert all("train_loss" in r.metrics for r in reports)
    # the reason is the log line's, computed with the log off too
    assert reports[0].explanation is not None
    assert any("the run's last round" in (r.explanation or "") for r in reports)
    fitted = [r for r in reports if r.estimates]
    assert fitted, "the default rule gives its estimates once a round with a spread is told"
    N = s.N
    for r in fitted:
        assert set(r.estimates) == {"variance", "signal", "objective"}
        assert all(np.shape(v) == (N,) for v in r.estimates.values())
        v = r.estimates["variance"]  # n = K samples every node: 0 up to rounding
        assert np.all(v >= -1e-12 * v.max())


def test_a_tensorboard_style_writer_in_a_few_lines_of_the_users_code():
    """The guide's example, with a stand-in for SummaryWriter (no hard dependency)."""
    scalars = []

    class Writer:  # the two calls of torch.utils.tensorboard.SummaryWriter the example makes
        def add_scalar(self, tag, value, step):
            scalars.append((tag, value, step))

    writer = Writer()

    def log_round(report):
        writer.add_scalar("eegrad/n", report.record["arm"], report.server_round)
        writer.add_scalar("eegrad/cost", report.record["cost"], report.server_round)

    s = choose_clients(FedAvg(fraction_evaluate=0.0), budget=20, on_round=log_round)
    tb._run(s, tb._quickstart_app(), rounds=100)
    assert len(scalars) == 2 * len(s.records)


def test_a_callback_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="'on_round' parameter of EEGradStrategy"):
        choose_clients(FedAvg(), budget=10, on_round="print")


def _evaluate(rnd, arrays):
    w = arrays["w"].numpy()
    return MetricRecord({"loss": float(np.sum((w - tb.MU.mean(axis=0)) ** 2)), "per-class": [1.0, 2.0]})


def test_evaluations_are_written_beside_the_records_at_the_cost_so_far(tmp_path):
    path = tmp_path / "run.csv"
    s = choose_clients(FedAvg(fraction_evaluate=0.0), budget=30, csv_path=path)
    s.start(grid=tb.LocalGrid(tb._quickstart_app(), tb.K, seed=2), initial_arrays=tb._model(),
            num_rounds=100, evaluate_fn=_evaluate)  # fmt: skip
    assert s.evaluation_path == tmp_path / "run-evaluation.csv"
    with open(s.evaluation_path) as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == EVALUATION_COLUMNS
    # the initial model (round 0, cost 0) and every round after it; scalars only
    assert [int(r["server_round"]) for r in rows] == list(range(len(s.records) + 1))
    assert {r["metric"] for r in rows} == {"loss"}
    assert {r["source"] for r in rows} == {"server"}
    cost = {rec["server_round"]: rec["cost"] for rec in s.records} | {0: 0.0}
    assert all(float(r["cost"]) == pytest.approx(cost[int(r["server_round"])]) for r in rows)


def test_a_run_stopped_by_ctrl_c_says_what_it_keeps_and_resumes(tmp_path, caplog):
    """A KeyboardInterrupt in round 3 (here from the callback, which comes before the round
    is kept): the log says why and what is kept; the records and checkpoint hold rounds 1-2;
    the same call resumes (round 3 again, reported again) to the end as an uninterrupted run
    would."""

    def interrupt(report):
        if report.server_round == 3:
            raise KeyboardInterrupt

    kw = {"csv_path": tmp_path / "run.csv", "checkpoint": tmp_path / "run.npz"}
    s = choose_clients(FedAvg(fraction_evaluate=0.0), budget=60, on_round=interrupt, **kw)
    with caplog.at_level(logging.ERROR, logger="flwr"), pytest.raises(KeyboardInterrupt):
        tb._run(s, tb._quickstart_app(), rounds=100)
    said = caplog.text
    assert "stopped after server round 2: interrupted (KeyboardInterrupt)" in said
    assert "run.csv" in said
    assert "run.npz" in said
    assert "to resume" in said
    with open(tmp_path / "run.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 2
    resumed = choose_clients(FedAvg(fraction_evaluate=0.0), budget=60, **kw)
    tb._run(resumed, tb._quickstart_app(), rounds=100)
    whole = choose_clients(FedAvg(fraction_evaluate=0.0), budget=60)
    tb._run(whole, tb._quickstart_app(), rounds=100)
    assert [r["arm"] for r in resumed.records] == [r["arm"] for r in whole.records]


def test_a_failed_round_says_nothing_was_kept_without_csv_or_checkpoint(caplog):
    app = tb._quickstart_app(cost=lambda pid: {"c": float("nan")})
    s = choose_clients(FedAvg(fraction_evaluate=0.0), budget=60, unit="c")
    with caplog.at_level(logging.ERROR, logger="flwr"), pytest.raises(ValueError, match="cost"):
        tb._run(s, app, rounds=100)
    assert "stopped after server round 0: ClientUpdateError" in caplog.text
    assert "nothing was kept (give csv_path= and checkpoint=" in caplog.text


def test_eegrad_plot_of_a_runs_records_draws_n_and_the_evaluations(tmp_path, capsys):
    pytest.importorskip("matplotlib")  # the 'cli' extra
    from eegrad.cli import main

    path = tmp_path / "run.csv"
    s = choose_clients(FedAvg(fraction_evaluate=0.0), budget=30, csv_path=path)
    s.start(grid=tb.LocalGrid(tb._quickstart_app(), tb.K, seed=2), initial_arrays=tb._model(),
            num_rounds=100, evaluate_fn=_evaluate)  # fmt: skip
    assert main(["plot", str(path)]) == 0
    assert (tmp_path / "run.png").stat().st_size > 10_000
    assert (tmp_path / "run.pdf").exists()
    assert "wrote" in capsys.readouterr().out
    # without evaluations: the cost over the rounds instead
    (tmp_path / "run-evaluation.csv").unlink()
    assert main(["plot", str(path), "--out", str(tmp_path / "bare.png")]) == 0
    assert (tmp_path / "bare.png").exists()


def test_eegrad_plot_of_a_table_that_is_no_runs_records_names_the_column(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from eegrad.cli import main

    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    assert main(["plot", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "no column 'server_round'" in err
    assert "give --x and --y" in err
    assert main(["plot", str(tmp_path / "x.csv"), "--x", "a"]) == 2
    assert "--x and --y are given together" in capsys.readouterr().err


def test_the_guides_tensorboard_example_runs(monkeypatch):
    """The guide's ``py`` block, with a stand-in for torch.utils.tensorboard (not installed
    here: no dependency), run as written, then the strategy it makes run."""
    import re
    import sys
    import types
    from pathlib import Path

    guide = Path(__file__).resolve().parents[1] / "docs" / "guide" / "federated.md"
    code = re.search(r"```py\n(.*?)```", guide.read_text(encoding="utf-8"), re.DOTALL).group(1)
    scalars = []

    class SummaryWriter:
        def __init__(self, logdir):
            self.logdir = logdir

        def add_scalar(self, tag, value, step):
            scalars.append((tag, value, step))

    module = types.ModuleType("torch.utils.tensorboard")
    module.SummaryWriter = SummaryWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", module)
    space = {"choose_clients": choose_clients, "FedAvg": lambda: FedAvg(fraction_evaluate=0.0)}
    exec(compile(code, "federated.md py block", "exec"), space)  # noqa: S102 - our own docs
    s = space["strategy"]
    tb._run(s, tb._quickstart_app(), rounds=100)
    assert {t for t, _, _ in scalars} == {"eegrad/n", "eegrad/cost", "train/loss"}
    assert len(scalars) == 3 * len(s.records)


def test_the_metric_record_names_eegrads_numbers_as_the_records_do():
    """One set of names: each round's MetricRecord holds the record's numeric fields under the
    record's names (and the clients' own metrics), in every mode."""
    from flwr.serverapp.strategy import FedAdam

    for strategy in (choose_clients(FedAvg(fraction_evaluate=0.0), budget=30),
                     choose_clients(FedAdam(eta=0.1, fraction_evaluate=0.0), budget=30)):
        res = tb._run(strategy, tb._quickstart_app(), rounds=100)
        for rec in strategy.records:
            m = res.train_metrics_clientapp[rec["server_round"]]
            for key in ("arm", "clients_asked", "clients_replied", "budget_used", "cost",
                        "budget_left", "nodes_connected"):  # fmt: skip
                assert m[key] == pytest.approx(rec[key]), key
            assert m["step"] == rec["step"]
            assert "train_loss" in m
            assert m["clients_failed"] == 0
            assert "clients-replied" not in m
