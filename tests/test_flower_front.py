"""choose_clients: the user's strategy, a total budget in their own unit, their client unchanged."""

import logging
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

import test_flower_total_budget as tb
from flwr.serverapp.strategy import FedAdam, FedAvg

from eegrad.flower import EEGradStrategy, choose_clients


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def test_a_budget_of_client_trainings_with_the_quickstart_client_unchanged():
    """unit="trainings": a round of n costs n (each reply 1); the run spends at most the
    budget, the clients report nothing of eegrad, and the user's FedAvg aggregates."""
    s = choose_clients(FedAvg(fraction_evaluate=0.0), budget=30)
    assert isinstance(s, EEGradStrategy)
    res = tb._run(s, tb._quickstart_app(), rounds=100)
    for r in s.records:
        assert r["budget_used"] == r["clients_replied"]
    assert sum(r["budget_used"] for r in s.records) == s.records[-1]["cost"] <= 30
    assert s.records[-1]["cost"] > 30 - tb.K  # spent down to less than one round of K
    assert np.all(np.isfinite(res.arrays["w"].numpy()))
    assert s.stopped is not None


def test_a_budget_of_samples_counts_each_replys_num_examples():
    s = choose_clients(FedAdam(eta=0.1, fraction_evaluate=0.0), budget=2000, unit="samples")
    seen = []
    app = tb._quickstart_app(seen=seen)
    tb._run(s, app, rounds=100)
    assert s.cost_metric == "num-examples"
    assert s.records[-1]["cost"] <= 2000
    for r in s.records:  # every reply's samples: a client i holds SIZES[i]
        assert r["budget_used"] >= r["clients_replied"] * tb.SIZES.min()


def test_a_metric_of_the_clients_own_names_the_unit():
    s = choose_clients(FedAvg(fraction_evaluate=0.0), budget=40.0, unit="c")
    tb._run(s, tb._quickstart_app(cost=lambda pid: {"c": 2.0}), rounds=100)
    assert all(r["budget_used"] == 2.0 * r["clients_replied"] for r in s.records)


@pytest.mark.parametrize(("args", "kw", "match"), [
    ((None, 10), {}, r"'strategy' parameter of choose_clients must be a Flower message-API"),
    ((FedAvg(), 0), {}, r"'budget' parameter of choose_clients"),
    ((FedAvg(), 10), {"unit": ""}, r"'unit' parameter of choose_clients .*'trainings'"),
    ((FedAvg(), 10), {"total_budget": 5}, r"'total_budget' parameter of choose_clients"),
])  # fmt: skip
def test_bad_input_names_the_parameter(args, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        choose_clients(*args, **kw)


def test_a_per_round_budget_needs_a_metric_of_the_spend():
    with pytest.raises(ValueError, match="'cost_metric' parameter of EEGradStrategy"):
        EEGradStrategy(budget=10.0, c_min=1.0, cost_metric=None)


GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "federated.md"

#: A server main shaped as Flower's PyTorch quickstart's (Message API), with a NumPy model.
QUICKSTART_SERVER = '''
from flwr.app import ArrayRecord, Array, ConfigRecord
from flwr.serverapp.strategy import FedAvg
import numpy as np


def main(grid, context):
    fraction_train = context["fraction-train"]
    num_rounds = context["num-server-rounds"]
    arrays = ArrayRecord({"w": Array(np.zeros(4))})
    strategy = FedAvg(fraction_train=fraction_train)
    result = strategy.start(grid=grid, initial_arrays=arrays,
                            train_config=ConfigRecord({"lr": 0.1}), num_rounds=num_rounds)
    return strategy, result
'''


def _guide_diff() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return re.findall(r"```diff\n(.*?)```", text, re.DOTALL)[0].splitlines()


def test_the_guides_quickstart_diff_changes_at_most_five_server_lines_and_runs():
    diff = _guide_diff()
    changed = [ln for ln in diff if ln[:1] in "+-"]
    assert 0 < len(changed) <= 5
    server = QUICKSTART_SERVER
    removed = [ln[1:].strip() for ln in diff if ln.startswith("-")]
    added = [ln[1:] for ln in diff if ln.startswith("+")]
    for old in removed:  # each removed line is in the quickstart's server, replaced in place
        assert old in server
        new = [a.strip() for a in added if not a.startswith("from ")]
        server = server.replace(old, "\n    ".join(new))
    imports = [a for a in added if a.startswith("from ")]
    namespace = {}
    exec(compile("\n".join(imports) + server, "quickstart server", "exec"), namespace)  # noqa: S102
    strategy, result = namespace["main"](
        tb.LocalGrid(tb._quickstart_app(), tb.K, seed=2),
        {"fraction-train": 0.5, "num-server-rounds": 10})  # fmt: skip
    assert isinstance(strategy, EEGradStrategy)
    # your rounds and your FedAvg's spend: 10 rounds of 5 of the 10 nodes
    assert [r["server_round"] for r in strategy.records] == list(range(1, 11))
    assert strategy.records[-1]["cost"] == pytest.approx(50.0)
    assert strategy.stopped is None
    assert np.all(np.isfinite(result.arrays["w"].numpy()))


def test_a_misspelled_keyword_is_named_as_choose_clients_own_with_the_closest_known():
    """`choose_clients(..., budjet=90)` names choose_clients (the call the user wrote, not a
    class it builds) and suggests `budget`."""
    with pytest.raises(TypeError, match=r"choose_clients\(\) got an unexpected keyword "
                                        r"argument 'budjet'; did you mean 'budget'\?"):  # fmt: skip
        choose_clients(FedAvg(fraction_evaluate=0.0), budjet=90)
    with pytest.raises(TypeError, match="did you mean 'departure'"):
        choose_clients(FedAvg(fraction_evaluate=0.0), departue=0.3)


def test_a_dp_wrapper_is_refused_for_what_it_is_before_the_budget_is_asked_for():
    """Flower's fixed-n DP wrapper around FedAvg, with no budget: the error says to wrap the
    inner strategy and pass privacy=CentralDP(...), not that the budget must be given."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping

    from eegrad.flower.inner import UnsupportedStrategyError

    dp = DifferentialPrivacyServerSideFixedClipping(FedAvg(fraction_train=0.5),
                                                    noise_multiplier=1.0, clipping_norm=1.0,
                                                    num_sampled_clients=5)  # fmt: skip
    with pytest.raises(UnsupportedStrategyError, match=r"privacy=CentralDP"):
        choose_clients(dp)


def test_the_quickstart_examples_budget_has_one_meaning():
    """The shipped quickstart app's config gives no budget (what FedAvg spends) unless the
    user sets one; a budget of 0 is refused wherever it is given."""
    import tomllib

    root = Path(__file__).resolve().parents[1] / "examples" / "flower_quickstart_app"
    with open(root / "pyproject.toml", "rb") as fh:
        config = tomllib.load(fh)["tool"]["flwr"]["app"]["config"]
    assert "budget" not in config
    assert 'run_config.get("budget")' in (root / "quickstart" / "server_app.py").read_text()
    with pytest.raises(ValueError, match="'budget' parameter of choose_clients must be a finite float > 0"):
        choose_clients(FedAvg(fraction_evaluate=0.0), budget=0)


def test_flowers_own_count_lines_are_the_rounds_real_ones(caplog):
    """Flower's lines under eegrad say what the round did: 3 of the 10 nodes connected asked
    (not 'out of 3', the view eegrad gives the wrapped strategy), 3 replies received (not the 1
    reply that stands for them in a linear strategy's aggregate)."""
    logging.getLogger("flwr").setLevel(logging.INFO)
    s = choose_clients(FedAvg(fraction_train=0.3, fraction_evaluate=0.0))
    tb._run(s, tb._quickstart_app(), rounds=2)
    text = caplog.text
    assert "configure_train: Sampled 3 nodes (out of 10)" in text
    assert "aggregate_train: Received 3 results and 0 failures" in text
    assert "(out of 3)" not in text
    assert "Received 1 results" not in text


def test_eegrads_own_lines_speak_the_users_words_internals_only_where_set(caplog):
    """At INFO a default run says its budget, its rule in words and each round's n and why; its
    internals (T, server lr, the damping, a server cost of none) only where the user set them,
    and its last round as the run's last, not 'split over the 1 rounds left'."""
    logging.getLogger("flwr").setLevel(logging.INFO)
    tb._run(choose_clients(FedAvg(fraction_train=0.3, fraction_evaluate=0.0)),
            tb._quickstart_app(), rounds=8)  # fmt: skip
    text = caplog.text
    assert "Steps:" not in text
    assert "LinearAggregation(b=0.0)" not in text
    assert "the rounds left" not in text.split("[ROUND 8/8]")[1].split("\n")[1]
    assert "1 rounds left" not in text
    assert "The rule: eegrad's default, your strategy's n each round" in text
    caplog.clear()
    tb._run(EEGradStrategy(total_budget=60.0, cost_metric="c", server_lr=0.5,
                           aggregation=lambda n: 1.0 + 0 * np.asarray(n)),
            tb._quickstart_app(cost=lambda pid: {"c": 2.0}), rounds=2)  # fmt: skip
    assert "server lr 0.5" in caplog.text
    assert "plus the server's D(n)" in caplog.text


def test_a_budget_below_one_round_is_named_as_given_with_its_parts():
    """`choose_clients(..., budget=0.5)` names `budget` of choose_clients (what you passed, not
    EEGradStrategy's total_budget), and the round it cannot afford in its parts."""
    with pytest.raises(ValueError, match=re.escape(
            "The 'budget' parameter of choose_clients must be at least one round of n = 1 (one "
            "training, cost_scale = 1, plus the server's D(1) = 0: 1 in all). Got 0.5 "
            "instead.")):  # fmt: skip
        choose_clients(FedAvg(fraction_evaluate=0.0), budget=0.5)
