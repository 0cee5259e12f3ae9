"""One run of the benchmark and the store of finished runs.

A run is one (setting, method, seed, client learning rate): a Flower federation on an
in-process grid (:class:`~eegrad.flower.LocalGrid`) for the setting's R rounds (your FedAvg's:
the guessed n for R rounds spends the budget) within its total budget, evaluated on the
initial model and after every round (the last is the model the run delivers). A run is keyed
by what made it (:func:`describe`): its setting, method, seed, rate, the harness's version
:data:`HARNESS` and its method's code (:func:`method_code`, :mod:`eegrad.bench.fingerprint`).
Every finished run is saved under ``DIR/runs/`` with its description; a rerun takes a saved
run again only where its description is today's and its table reads back whole.
"""

from __future__ import annotations

import csv
import json
import math
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import NonFiniteGradientError, fail
from ..arms import feasible_arms, per_client_spend
from ..costs import LinearAggregation
from ..results import atomic_write_bytes, write_table
from .data import Dataset, load, partition
from .fingerprint import method_code as code_of
from .methods import (
    BudgetSchedule,
    FixedThenLast,
    guess_n,
    make_bara,
    make_isp,
    phase_counts,
)
from .models import BATCH, CNN1d, Model, local_train, make_model
from .settings import PER_SAMPLE, SETTINGS, BenchSetting

__all__ = ["COLUMNS", "HARNESS", "LR_GRID", "METHODS", "RULE_METHODS", "TUNING_SEEDS",
           "Federation", "check_method", "client_update", "describe", "federation",
           "fixed_counts", "method_code", "method_roots", "methods_of", "run_key", "run_one",
           "saved_run"]  # fmt: skip

#: Columns of ``bench.csv``: one row per evaluation (the initial model, then every round).
COLUMNS = ("setting", "dataset", "split", "method", "seed", "round", "cost", "wall_clock",
           "train_loss", "test_accuracy")  # fmt: skip
#: The methods besides ``fedavg-<n>``.
METHODS = ("default", "guess", "grow", "decay", "isp", "bara", "noise-scale")
#: The methods a change of eegrad's default reruns: the default and its ablation (every other
#: method's runs are baselines, kept in the repository's table, :mod:`eegrad.bench.store`).
RULE_METHODS = ("default", "noise-scale")
#: The clients' learning rates tried for each method (tuned on :data:`TUNING_SEEDS`).
LR_GRID = {"softmax": (0.1, 0.3, 1.0), "mlp": (0.03, 0.1, 0.3), "cnn1d": (0.03, 0.1, 0.3),
           "cnn2d": (0.1, 0.3, 1.0),
           "charcnn": (0.1, 0.3, 1.0)}
#: The seeds the learning rates are tuned on (never reported).
TUNING_SEEDS = (1000, 1001)
#: The most rows of the training and test data a PyTorch model is evaluated on.
EVAL_ROWS = 4096
#: The server's seconds a round (the wall clock).
SERVER_SECONDS = 1.0
#: ISP's trust set, as its public code makes it: the clients' validation splits pooled, this
#: share of each client's rows (at least one); its evaluations on the server are not charged,
#: as no method's server computation is (the default's fits included).
VALIDATION_SHARE = 0.1
#: The harness's version: bumped when what a run computes changes outside any method's code
#: (every run is then run again); ``tests/data/bench_harness.json`` holds the fingerprint of
#: the harness's code recorded for it (:mod:`eegrad.bench.fingerprint`).
HARNESS = 5
#: Your FedAvg is not stopped by the budget (the expected cost of its R rounds): it runs its R
#: rounds and spends what they cost, its total budget this many times the others'.
UNCAPPED = 10.0


@dataclass
class Federation:
    """One setting's federation for one seed: data, clients, model, devices and budget."""

    setting: BenchSetting
    seed: int
    data: Dataset
    clients: list[np.ndarray]
    model: Model | CNN1d
    speed: np.ndarray
    #: The run's total budget; with a per-round budget (``mode="round"``), B.
    budget: float
    aggregation: LinearAggregation
    #: R, the rounds of every method's run: those whose spend at the guessed n is the budget
    #: (your FedAvg's rounds; quick or not).
    rounds: int
    seconds: dict[int, list[float]] = field(default_factory=dict)

    @property
    def K(self) -> int:
        return self.setting.K

    def cost_options(self) -> dict[str, Any]:
        """How a client's cost is read: its seconds (the slowest's) or its samples; with a
        per-round budget, what it spent of its share (``cost``)."""
        if self.setting.mode == "round":
            return {"cost_metric": "cost"}
        if self.setting.wall_clock:
            return {"cost_metric": "seconds", "cost_scale": 1.0, "round_cost": "slowest"}
        return {"cost_metric": "num-examples", "cost_scale": PER_SAMPLE * self.setting.epochs,
                "round_cost": "sum"}  # fmt: skip

    def evaluate(self, w: np.ndarray) -> tuple[float, float]:
        """(training loss on the pooled training rows, test accuracy); for a PyTorch model,
        on a fixed sample of at most :data:`EVAL_ROWS` rows of each (the same for every run of
        the setting; a forward pass over every row, each evaluation, would cost more than the
        run)."""
        d = self.data
        X, y, Xt, yt = d.X, d.y, d.X_test, d.y_test
        if hasattr(self.model, "train_local"):
            rng = np.random.default_rng([17, self.setting.K, y.size])
            if y.size > EVAL_ROWS:
                keep = np.sort(rng.choice(y.size, EVAL_ROWS, replace=False))
                X, y = X[keep], y[keep]
            if yt.size > EVAL_ROWS:
                keep = np.sort(rng.choice(yt.size, EVAL_ROWS, replace=False))
                Xt, yt = Xt[keep], yt[keep]
        return self.model.loss(w, X, y), self.model.accuracy(w, Xt, yt)

    def wall_clock(self, server_round: int) -> float:
        """Simulated seconds until the end of ``server_round``: each round its slowest
        client's, plus the server's."""
        return float(sum(max(s) + SERVER_SECONDS for r, s in self.seconds.items()
                         if r <= server_round))  # fmt: skip


@lru_cache(maxsize=4)
def _clients(name: str, seed: int) -> tuple[np.ndarray, ...]:
    s = SETTINGS[name]
    return tuple(partition(load(s.dataset), s.K, s.partition, seed))


def federation(name: str, seed: int, quick: bool = False) -> Federation:
    """The federation of setting ``name`` for ``seed``."""
    s = SETTINGS[name]
    data = load(s.dataset)
    clients = list(_clients(name, seed))
    rng = np.random.default_rng([seed, 17, s.K])
    speed = 40.0 * rng.lognormal(0.0, 0.3, s.K)
    speed[rng.choice(s.K, s.K // 5, replace=False)] /= 6.0  # stragglers
    aggregation = LinearAggregation(b=0.05, fixed=s.D0)
    sizes = np.array([c.size for c in clients], dtype=np.float64)
    g = s.guess
    rounds = s.quick_rounds_at_guess if quick else s.rounds_at_guess
    server = float(aggregation(g))
    if s.wall_clock:  # the expected slowest of g clients' seconds
        secs = sizes * s.epochs / speed
        draws = np.random.default_rng([seed, 19]).random((256, s.K)).argsort(axis=1)[:, :g]
        budget = rounds * (float(np.mean(secs[draws].max(axis=1))) + server)
    else:
        budget = rounds * (g * float(sizes.mean()) * s.epochs * PER_SAMPLE + server)
    if s.mode == "round":  # B a round: that of the guess at the mean cost, for R rounds
        budget = g * float(sizes.mean()) * s.epochs * PER_SAMPLE + server
    model = make_model(s.model, data.X.shape[1], data.classes)
    return Federation(s, seed, data, clients, model, speed, budget, aggregation, rounds)


def fixed_counts(K: int, quick: bool = False, per_round: bool = False,
                 g: int | None = None) -> list[int]:  # fmt: skip
    """The fixed n run besides your FedAvg's (the guess, ``guess``): those of a geometric grid
    over 1..K (7 points, 4 with ``quick``) below the guess, the n whose R rounds spend a total
    budget (a larger n cannot last R rounds); with B a round (``per_round``), where every n
    spends B a round, the whole grid but the guess (``g``, default :func:`guess_n`)."""
    g = guess_n(K) if g is None else g
    grid = {round(x) for x in np.geomspace(1, K, 4 if quick else 7)}
    if per_round:
        return sorted(grid - {g})
    return sorted(n for n in grid if n < g)


def methods_of(setting: str, quick: bool = False) -> list[str]:
    """The methods a setting runs: each fixed n and, under a total budget, each with the
    default's last round, then :data:`METHODS` (ISP, which learns n from a total budget's
    probes, not under B a round)."""
    s = SETTINGS[setting]
    others = [m for m in METHODS if not (m in ("isp", "bara") and s.mode == "round")]
    counts = fixed_counts(s.K, quick, per_round=s.mode == "round", g=s.guess)
    last = [] if s.mode == "round" else [f"fedavg-{n}-last" for n in counts]
    return [*(f"fedavg-{n}" for n in counts), *last, *others]


def check_method(method: str, setting: str, quick: bool = False) -> str:
    """``method`` if the setting runs it (:func:`methods_of`), else an error listing those
    it runs."""
    known = methods_of(setting, quick)
    if method not in known:
        raise fail("method", "eegrad bench", f"one of {', '.join(known)}", method)
    return method


def client_update(fed: Federation, pid: int, w: np.ndarray, lr: float,
                  rng: np.random.Generator,
                  share: float | None = None) -> tuple[np.ndarray, float, np.ndarray]:  # fmt: skip
    """One bench client's training from the model ``w``: E epochs of mini-batches at rate
    ``lr`` on its own rows, or with B a round (``share``) on the samples its share buys, drawn
    with ``rng``. Returns its model, its training loss and the rows it used."""
    idx = fed.clients[pid]
    if share is not None:  # a per-round budget: the samples its share buys
        per_sample = PER_SAMPLE * fed.setting.epochs
        take = int(min(idx.size, max(1, share // per_sample)))
        idx = np.sort(rng.choice(idx, size=take, replace=False))
    w, loss = local_train(fed.model, w, fed.data.X[idx], fed.data.y[idx],
                          epochs=fed.setting.epochs, lr=lr, rng=rng)  # fmt: skip
    return w, loss, idx


def _client_app(fed: Federation, report_steps: str | None = None) -> Any:
    """The bench's ClientApp: each client trains E epochs of mini-batches (of
    :data:`~eegrad.bench.models.BATCH`) on its own rows, or with B a round on the samples b its
    share buys, and replies its loss, samples, seconds and cost. The bench's own clients report
    no local steps; a study's may (``local-steps``): with ``report_steps="steps"`` those taken,
    E⌈b/32⌉, as :func:`~eegrad.flower.budgeted_train` reports them; with ``"samples"`` b, as if
    its steps were in proportion to its samples."""
    if report_steps not in (None, "steps", "samples"):
        raise fail("report_steps", "_client_app", "None, 'steps' or 'samples'", report_steps)
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    app = ClientApp()

    @app.train()
    def train(msg: Any, context: Any) -> Any:  # a client that trains its own way
        pid = int(context.node_config["partition-id"])
        config = msg.content["config"]
        rnd = int(config["server-round"])
        w = msg.content["arrays"]["w"].numpy()
        rng = np.random.default_rng([fed.seed, pid, rnd])
        share = float(config["budget-share"]) if "budget-share" in config else None
        w, loss, idx = client_update(fed, pid, w, float(config["lr"]), rng, share)
        per_sample = PER_SAMPLE * fed.setting.epochs
        seconds = float(idx.size * fed.setting.epochs / fed.speed[pid])
        fed.seconds.setdefault(rnd, []).append(seconds)
        metrics = {"train_loss": loss, "num-examples": int(idx.size), "seconds": seconds,
                   "cost": idx.size * per_sample}  # fmt: skip
        if report_steps == "steps":
            metrics["local-steps"] = fed.setting.epochs * -(-int(idx.size) // BATCH)
        elif report_steps == "samples":
            metrics["local-steps"] = int(idx.size)
        return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w)}),
                                   "metrics": MetricRecord(metrics)}), reply_to=msg)  # fmt: skip

    return app


def _strategy(fed: Federation, method: str, seed: int, rule_class: Any = None) -> Any:
    """The method's strategy; ``rule_class`` (for ``default`` or ``noise-scale``) a subclass
    of the default's rule of the setting's mode, built from the default's parameters."""
    from flwr.serverapp.strategy import FedAvg

    from ..flower import EEGradStrategy
    from ..flower.round_loop import DEFAULT_NOISE_ORDER
    from ..flower.strategy import default_rule
    from ..selectors import FixedArm

    opts = fed.cost_options()
    if method in ("isp", "bara"):
        rng = np.random.default_rng([seed, 23])
        val = np.concatenate([rng.choice(c, max(1, round(VALIDATION_SHARE * c.size)),
                                         replace=False) for c in fed.clients])  # fmt: skip
        Xv, yv = fed.data.X[val], fed.data.y[val]

        def validate(arrays: Any) -> float:
            w = arrays["w"]
            return fed.model.loss(w.numpy() if hasattr(w, "numpy") else w, Xv, yv)

        if method == "bara":
            return make_bara(K=fed.K, total_budget=fed.budget, aggregation=fed.aggregation,
                             validate=validate, m0=fed.setting.guess, **opts)  # fmt: skip
        return make_isp(K=fed.K, total_budget=fed.budget, aggregation=fed.aggregation,
                        validate=validate, validation_cost=0.0, m0=fed.setting.guess,
                        seed=seed, **opts)  # fmt: skip
    selector: Any = None
    per_round = fed.setting.mode == "round"
    if per_round:  # N of B a round (the least a client costs: one sample), at most K
        budget = {"budget": fed.budget, "c_min": PER_SAMPLE * fed.setting.epochs}
        N = min(fed.K, feasible_arms(budget["c_min"], fed.aggregation, fed.budget)[0])
    else:  # your FedAvg runs its R rounds whatever they cost (the budget is their expectation)
        budget, N = {"total_budget": fed.budget * (UNCAPPED if method == "guess" else 1.0)}, fed.K
    if method.endswith("-last"):
        selector = FixedThenLast(min(N, int(method.removeprefix("fedavg-").removesuffix("-last"))))
    elif method.startswith("fedavg-") or method == "guess":
        selector = FixedArm(min(N, int(method.removeprefix("fedavg-")) if method != "guess"
                                else fed.setting.guess))  # fmt: skip
    elif method in ("grow", "decay"):
        selector = BudgetSchedule(phase_counts(fed.K, N, method, fed.setting.guess))
    elif method == "noise-scale" and rule_class is None:  # the default's fits, its objective
        from .ablations import NoiseScaleRoundRule, NoiseScaleRule

        rule_class = NoiseScaleRoundRule if per_round else NoiseScaleRule
    if rule_class is not None:
        spend = (per_client_spend(fed.budget, fed.aggregation, np.arange(1, N + 1))
                 if per_round else np.ones(N))  # fmt: skip
        if method == "noise-scale" and rule_class.__module__ == "eegrad.bench.ablations":
            # the default's fits as the rules of progress hold them, another objective
            selector = rule_class(population=fed.K, spend=spend,
                                  noise_order=DEFAULT_NOISE_ORDER)  # fmt: skip
        else:
            rule = default_rule(fed.K, spend, per_cost=not per_round)
            selector = rule_class(**rule.get_params())
    g = fed.setting.guess  # your FedAvg, the strategy wrapped: g clients a round
    return EEGradStrategy(aggregation=fed.aggregation, selector=selector,
                          strategy=FedAvg(fraction_train=g / fed.K, min_train_nodes=g,
                                          fraction_evaluate=0.0),
                          rng=np.random.SeedSequence([seed, 31]), min_available_nodes=fed.K,
                          **budget, **opts)  # fmt: skip


def run_one(setting: str, method: str, seed: int, lr: float, quick: bool = False,
            report_steps: str | None = None,
            rule_class: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """One run: its evaluation rows (:data:`COLUMNS`: the initial model, then the model of
    every round, the last the model the run delivers) and the n of every round; with
    ``report_steps`` its clients report their local steps (:func:`_client_app`), and with
    ``rule_class`` the ``default`` (or ``noise-scale``) runs that subclass of the default's
    rule, built from the default's parameters (both for studies, never in the bench's own
    runs, which :func:`job` stores)."""
    import logging

    from flwr.app import Array, ArrayRecord, ConfigRecord

    from ..flower import LocalGrid

    logging.getLogger("flwr").setLevel(logging.ERROR)
    fed = federation(setting, seed, quick)
    check_method(method, setting, quick)
    random.seed(seed * 1_000_003 + 1)  # ISP's FedAvg samples nodes with Python's random
    if rule_class is not None and method not in ("default", "noise-scale"):
        raise fail("rule_class", "run_one", "None unless method is 'default' or 'noise-scale'",
                   rule_class)  # fmt: skip
    strategy = _strategy(fed, method, seed, rule_class)
    s = fed.setting
    rows: list[dict[str, Any]] = []

    def evaluate(server_round: int, arrays: Any) -> None:  # the initial model, then each round
        loss, acc = fed.evaluate(arrays["w"].numpy())
        rows.append({"setting": setting, "dataset": s.dataset, "split": s.split,
                     "method": method, "seed": seed, "round": server_round,
                     "cost": strategy.state.cost, "wall_clock": fed.wall_clock(server_round),
                     "train_loss": loss, "test_accuracy": acc})  # fmt: skip

    w0 = ArrayRecord({"w": Array(fed.model.initial(seed))})
    strategy.start(grid=LocalGrid(_client_app(fed, report_steps), fed.K), initial_arrays=w0,
                   num_rounds=fed.rounds, train_config=ConfigRecord({"lr": float(lr)}),
                   evaluate_fn=evaluate)  # fmt: skip
    arms = [{"setting": setting, "method": method, "seed": seed, "round": r["server_round"],
             "n": r["arm"]} for r in strategy.records]  # fmt: skip
    return rows, arms


# -- what made a run, and the store of finished runs ---------------------------------------------
def method_roots(method: str, mode: str = "total") -> tuple[tuple[str, ...], str]:
    """The modules whose code makes ``method``'s runs in a setting of ``mode`` (the selector's
    or the strategy's module), and the source of what sets its parameters inside the harness
    (the default rule's factory, for the default and its ablation), for :func:`method_code`."""
    from ..selectors import FixedArm

    if method == "guess" or (method.startswith("fedavg-") and not method.endswith("-last")):
        return (FixedArm.__module__,), ""
    if method in ("default", "noise-scale"):
        import inspect

        from ..flower import round_loop
        from ..selectors import AnchoredPlan, AnchoredProgress

        factory = inspect.getsource(round_loop.default_rule) + repr(round_loop.DEFAULT_NOISE_ORDER)
        rule = AnchoredPlan if mode == "total" else AnchoredProgress
        if method == "default":
            return (rule.__module__,), factory
        return ("eegrad.bench.ablations",), repr(round_loop.DEFAULT_NOISE_ORDER)
    return (BudgetSchedule.__module__,), ""  # the schedules, the ending, ISP and BARA-style


@lru_cache(maxsize=64)
def method_code(method: str, mode: str = "total") -> str:
    """The fingerprint of ``method``'s code in a setting of ``mode``
    (:func:`~eegrad.bench.fingerprint.method_code` of :func:`method_roots`): a fixed n's is
    :class:`~eegrad.FixedArm`'s, every ``fedavg-<n>`` alike."""
    roots, extra = method_roots(_family(method), mode)
    return code_of(roots, extra)


def _family(method: str) -> str:
    """The method with its n left out (``fedavg-<n>`` and ``fedavg-<n>-last`` share code)."""
    if method.startswith("fedavg-"):
        return "fedavg-n-last" if method.endswith("-last") else "fedavg-n"
    return method


def _setting(setting: str | BenchSetting) -> BenchSetting:
    return setting if isinstance(setting, BenchSetting) else SETTINGS[setting]


def describe(setting: str | BenchSetting, method: str, seed: int, lr: float,
             quick: bool) -> dict[str, Any]:  # fmt: skip
    """What makes a run: its setting (every field), method, seed, learning rate, quick or not,
    the harness's version :data:`HARNESS` and the method's code (:func:`method_code`)."""
    s = _setting(setting)
    fields = {k: getattr(s, k) for k in s.__dataclass_fields__}
    if fields["fraction"] == 0.1:  # the fraction the bench had before it was a field
        del fields["fraction"]
    return {"setting": fields, "method": method,
            "seed": int(seed), "lr": float(lr), "quick": bool(quick), "harness": HARNESS,
            "code": method_code(method, s.mode)}  # fmt: skip


def run_key(setting: str | BenchSetting, method: str, seed: int, lr: float,
            quick: bool) -> str:  # fmt: skip
    """The key of a run: a digest of :func:`describe` (20 hex digits)."""
    import hashlib

    text = json.dumps(describe(setting, method, seed, lr, quick), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def run_path(store: Path, setting: str, method: str, seed: int, lr: float) -> Path:
    return Path(store) / setting / f"{method}-lr{lr:g}-seed{seed}.csv"


def saved_run(store: Path, setting: str, method: str, seed: int, lr: float,
              quick: bool) -> tuple[list[dict], list[dict]] | None:  # fmt: skip
    """A saved run's rows and arms, where its description is today's and both tables read
    back whole (every column, at least one row); None otherwise."""
    path = run_path(store, setting, method, seed, lr)
    meta = path.with_suffix(".run")
    arms_path = path.with_suffix(".arms.csv")
    try:
        if json.loads(meta.read_text()) != json.loads(json.dumps(
                describe(setting, method, seed, lr, quick))):  # fmt: skip
            return None
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        with arms_path.open(newline="") as fh:
            arms = list(csv.DictReader(fh))
    except (OSError, ValueError):
        return None
    if not rows or tuple(rows[0]) != COLUMNS or any(None in r.values() for r in rows):
        return None
    try:
        for r in rows:
            for k in ("round", "seed"):
                r[k] = int(r[k])
            for k in ("cost", "wall_clock", "train_loss", "test_accuracy"):
                r[k] = float(r[k])
                if math.isnan(r[k]) or (k != "train_loss" and not math.isfinite(r[k])):
                    return None  # a diverged run's loss alone is infinite (diverged_row)
        for a in arms:
            a["round"], a["n"], a["seed"] = int(a["round"]), int(a["n"]), int(a["seed"])
    except (KeyError, ValueError, TypeError):
        return None
    return rows, arms


def save_run(store: Path, setting: str, method: str, seed: int, lr: float, quick: bool,
             rows: list[dict], arms: list[dict]) -> None:  # fmt: skip
    """Save a finished run: its table, its arms, then its description (written last: a run
    without one is not taken)."""
    path = run_path(store, setting, method, seed, lr)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(path, rows, COLUMNS)
    write_table(path.with_suffix(".arms.csv"), arms, ("setting", "method", "seed", "round", "n"))
    atomic_write_bytes(path.with_suffix(".run"), json.dumps(
        describe(setting, method, seed, lr, quick), indent=1).encode())  # fmt: skip


def diverged_row(setting: str, method: str, seed: int) -> dict[str, Any]:
    """The one row of a run whose learning rate diverged (a client's update not finite):
    infinite training loss and no accuracy, at no cost, so that tuning never picks its rate
    and a report shows it."""
    s = SETTINGS[setting]
    return {"setting": setting, "dataset": s.dataset, "split": s.split, "method": method,
            "seed": seed, "round": 0, "cost": 0.0, "wall_clock": 0.0,
            "train_loss": math.inf, "test_accuracy": 0.0}  # fmt: skip


def job(store: str | None, setting: str | BenchSetting, method: str, seed: int, lr: float,
        quick: bool, report_steps: str | None = None) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """A run, from the store where saved, else run and saved; a rate that diverges is a run of
    infinite loss (:func:`diverged_row`). ``setting`` a name or a setting itself (made known
    to this process, as a worker of ``--jobs`` needs a registered one). ``report_steps`` (a
    study's clients, :func:`_client_app`) only without a store: the store's runs are the
    bench's own."""
    if isinstance(setting, BenchSetting):
        from .settings import register

        setting = register(setting).name
    if store is not None and report_steps is not None:
        raise fail("report_steps", "job", "None where runs are stored (the bench's own clients)",
                   report_steps)  # fmt: skip
    if store is not None:
        saved = saved_run(Path(store), setting, method, seed, lr, quick)
        if saved is not None:
            return saved
    try:
        rows, arms = run_one(setting, method, seed, lr, quick, report_steps)
    except NonFiniteGradientError:  # the rate diverged: a run of infinite loss, no accuracy
        rows, arms = [diverged_row(setting, method, seed)], []
    if store is not None:
        save_run(Path(store), setting, method, seed, lr, quick, rows, arms)
    return rows, arms
