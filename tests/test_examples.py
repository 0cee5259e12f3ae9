"""The worked examples run end to end on a small budget."""

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="the examples need the 'examples' extra")

from eegrad.cli import main as cli
from eegrad.examples.federated import COLUMNS, load_setup, run_federated, summarise
from eegrad.results import read_table


def test_setup_arms_follow_the_cost_model():
    setup = load_setup()
    n = setup.arms.n
    spend = (30.0 - 0.25 * (n - 1)) / n  # (B − D(n))/n
    np.testing.assert_allclose(setup.arms.spend, spend)
    np.testing.assert_array_equal(setup.batch, np.floor((spend - 2.0) / 0.5 + 1e-9))
    assert setup.arms.N == 10
    assert np.all(setup.batch >= 1)
    assert sum(len(y) for _, y in setup.clients) == len(setup.objective.y)
    # Split by label: most clients hold a single class.
    assert sum(len(np.unique(y)) == 1 for _, y in setup.clients) >= 8


def test_federated_end_to_end(tmp_path):
    assert cli(["example", "federated", "--out", str(tmp_path), "--seeds", "2", "--steps", "12",
                "--rounds", "20"]) == 0  # fmt: skip
    rows = read_table(tmp_path / "federated.csv")
    assert tuple(rows[0].keys()) == COLUMNS
    assert {r["method"] for r in rows} == {
        "eegrad",
        "thompson",
        "default",
        *(f"fixed-{n}" for n in range(1, 11)),
    }
    assert (tmp_path / "federated.png").exists()
    costs = sorted({float(r["cost"]) for r in rows})
    assert costs[1] == 20 * 30.0  # one step: T rounds of budget B


def test_eegrad_no_worse_than_the_worst_fixed_n():
    """A check that can fail: the rules' mean final objective over 3 seeds is at most the worst
    fixed n's."""
    rows = run_federated(load_setup(), seeds=3, K=25, T=20)
    s = summarise(rows)
    worst = s["final_gap"][s["worst_fixed"]]
    assert s["final_gap"]["eegrad"] <= worst
    assert s["final_gap"]["default"] <= worst
    assert s["final_gap"]["thompson"] <= worst


def test_torch_example_runs():
    pytest.importorskip("torch")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "federated_torch.py"
    spec = importlib.util.spec_from_file_location("federated_torch", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    gap, acc = mod.train(steps=4, T=20)
    assert 0 <= gap < 0.49 / 4  # from w = 0, where the gap is ln 2 − F* ≈ 0.49
    assert 0.5 < acc <= 1.0
