r"""The scorecard of federations: the default strategy against FedAvg at every fixed n.

A Flower user who adopts :class:`eegrad.flower.EEGradStrategy` stops guessing how many clients a
round needs. Their yardstick is Flower's own ``FedAvg`` at the client count they would otherwise
have guessed, at the same total cost. The scorecard runs, in each setting of
:mod:`eegrad.examples.scorecard_settings`, the default strategy and ``FedAvg`` at every fixed n
that every seed's budget affords, for the same number of rounds (each round costs the budget B,
so equal rounds are equal total cost; under central DP every method ends at the same ε), and
compares them by the final training loss: the mean over the last 20% of each run's evaluations,
then the mean and standard error over seeds.

For each setting the report gives the best fixed n in hindsight, the median fixed n (a blind
guess), the default's ratio to both, its paired difference to the median fixed n (mean ± SE of
the per-seed differences: every method of a seed runs on the same data and devices), its rank
among the fixed n, and how many standard errors separate it from the best fixed n (the same
paired difference, over its SE). :func:`load_runs` reads a card's saved runs back.

Outputs (``main``): ``scorecard.csv`` — one row per evaluation, columns
``setting,method,seed,round,cost,train_loss,test_accuracy``; ``arms.csv`` — the default's n in
every round (``setting,method,seed,round,n``); ``scorecard.md`` — the table and the command;
``scorecard.png`` — each setting's loss over cost; ``scorecard-arms.png`` — the default's n
over each run; ``metadata.json``. Each finished federation is
saved under ``runs/`` as it ends, so an interrupted card rerun with the same command runs only
what is missing; a saved run is taken again only where what made it — its setting, method, seed,
rounds, candidate and the harness's revision, in its ``.run`` file (:func:`run_description`) —
is today's, and a saved ``default`` run only where the default rule that made it (named in its
``.rule`` file, as a checkpoint's fingerprint names it) is today's too, so a card rerun after the
default changed recomputes the default's runs and keeps FedAvg's.

``warmup_reference`` runs one more method beside them, ``warmup-then-<n>``: the default's
warm-up arms, then the best fixed n in hindsight every round (:class:`WarmupThenFixed`), on the
default's streams. It costs what the default's warm-up alone costs against that n, which no
rule that explores the same way can beat, and so separates, in the default's gap to the best
fixed n, the warm-up's share from that of its later choices.
"""

from __future__ import annotations

import csv
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_client_counts, check_integer, fail
from ..results import atomic_write_bytes, environment, write_json, write_table
from ..selectors.base import Selector
from .scorecard_settings import (
    BUDGET,
    SETTINGS,
    Federation,
    check_settings,
    federation,
    method_id,
)

__all__ = ["ARM_COLUMNS", "COLUMNS", "FixedSchedule", "WarmupThenFixed", "final_losses",
           "load_runs", "main", "mean_and_se", "run", "run_one", "saved_methods", "summarise",
           "table", "warmup_then"]

#: Columns of ``scorecard.csv``.
COLUMNS = ("setting", "method", "seed", "round", "cost", "train_loss", "test_accuracy")
#: Columns of ``arms.csv``.
ARM_COLUMNS = ("setting", "method", "seed", "round", "n")
#: Fraction of each run's evaluations averaged into its final loss.
LAST = 0.2
QUICK_FIXED = 5  # --quick: about this many fixed n, spread over 1..N
#: The label of the warm-up reference in the summaries and the table (``warmup_reference``).
WARMUP_REFERENCE = "warmup-best"


class FixedSchedule(Selector):
    """The clients of each round by a fixed schedule, the last n kept to the end.

    FedAvg's rounds at a scheduled n: beside the default and the fixed n it measures what a
    run gains by switching n (``studies/fixed_schedules.py``, the studies).

    Parameters
    ----------
    schedule : sequence of int
        The n of rounds 1, 2, ... (each 1 <= n <= N); the last is asked in every later round.
    """

    uses_statistics = False
    keeps_memory = True  # the rounds asked span iterates (a federation's round is an iterate)

    def __init__(self, schedule: Any) -> None:
        super().__init__()
        owner = type(self).__name__
        self.schedule = list(check_client_counts(schedule, "schedule", owner))
        if not self.schedule:
            raise fail("schedule", owner, "at least one round", [])

    def get_params(self) -> dict[str, Any]:
        """``{'schedule': schedule}``."""
        return {"schedule": list(self.schedule)}

    def _arms(self, R: int, N: int, d: int) -> list[int]:
        """The 0-based arm of every scheduled round, for N arms."""
        check_client_counts(self.schedule, "schedule", type(self).__name__, most=N)
        return [n - 1 for n in self.schedule]

    def init(self, R: int, N: int, d: int, truth: Any = None, streams: Any = None) -> None:
        """As :meth:`Selector.init`; every scheduled n must be an arm (n <= N)."""
        self.arms = self._arms(R, N, d)
        self.asked = 0  # rounds asked (the estimator restarts t at every iterate)
        super().init(R, N, d, truth, streams)

    def next_iterate(self, truth: Any = None, streams: Any = None) -> None:
        """A new SGD iterate: the rounds asked are kept."""
        asked = self.asked
        super().next_iterate(truth, streams)
        self.asked = asked

    def _select(self, t: int) -> np.ndarray:
        arm = self.arms[min(self.asked, len(self.arms) - 1)]
        self.asked += 1
        return np.full(self._shape[0], arm, dtype=np.int64)


class WarmupThenFixed(FixedSchedule):
    """The arms of a rule's warm-up, in its order, then one fixed n every round.

    Beside the default with the best fixed n in hindsight, it measures what the default's
    warm-up alone costs (the module's notes): the rounds after it are FedAvg's at that n.

    Parameters
    ----------
    rule : ModelRule
        The rule whose warm-up is played (its ``warmup_arms`` after ``init``: a
        :class:`~eegrad.SpreadThompson`, :class:`~eegrad.ProgressThompson` or
        :class:`~eegrad.BudgetThompson`); it is only initialised, never told.
    n : int
        The fixed n after the warm-up, 1 <= n <= N.
    """

    def __init__(self, rule: Any, n: int) -> None:
        from ..selectors.model_rule import ModelRule

        if not isinstance(rule, ModelRule):
            raise TypeError("The 'rule' parameter of WarmupThenFixed must be a rule with a "
                            f"warm-up (a ModelRule, such as SpreadThompson). Got {rule!r} "
                            "instead.")  # fmt: skip
        self.n = check_integer(n, "n", "WarmupThenFixed", ge=1)
        super().__init__([self.n])  # after the rule's warm-up, which init() puts before it
        self.rule = rule

    def get_params(self) -> dict[str, Any]:
        """``{'n': n}``."""
        return {"n": self.n}

    def _arms(self, R: int, N: int, d: int) -> list[int]:
        """The rule's warm-up arms, then n's; n must be an arm (n <= N)."""
        if self.n > N:
            raise fail("n", "WarmupThenFixed", f"a number of clients in 1..N = 1..{N}", self.n)
        self.rule.init(R, N, d)
        return [*self.rule.warmup_arms, self.n - 1]


def warmup_then(fed: Federation, n: int) -> WarmupThenFixed:
    """The warm-up of the default rule for ``fed`` (per-round or total budget), then n."""
    from ..flower.strategy import default_rule

    spend = np.array([fed.share(m) for m in range(1, fed.N + 1)])
    return WarmupThenFixed(default_rule(fed.K, spend, per_cost=fed.total_budget is not None), n)


def _fixed_ns(N: int, quick: bool) -> list[int]:
    if not quick:
        return list(range(1, N + 1))
    return sorted({round(x) for x in np.geomspace(1, N, QUICK_FIXED)})


def run_one(setting: str, method: str, seed: int, *, rounds: int, eval_every: int,
            candidate: dict[str, Any] | None = None, quick: bool = False,
            adapt: Callable[[Federation], Federation] | None = None,
            ) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """One federation of ``rounds`` rounds on an in-process grid: its evaluation rows and, for
    an EE-Grad strategy, the n of every round. ``method`` is ``"default"``, ``"fedavg-<n>"`` or
    the name of a ``candidate`` (keyword arguments of :class:`~eegrad.flower.EEGradStrategy`;
    a callable ``selector`` is called with the :class:`Federation` to build the run's rule),
    which runs on the default's random streams (a candidate of no arguments is the default).
    ``adapt``: a study's change of the federation (e.g. of its ClientApp), applied to it before
    the run (a picklable callable where the card runs in processes)."""
    import random

    from flwr.app import ConfigRecord, MetricRecord

    from ..flower import LocalGrid

    if SETTINGS[setting].kind.startswith("torch"):  # per-round and total-budget PyTorch
        import torch

        torch.set_num_threads(1)  # one thread: the same rows whatever the machine's cores
    fed = federation(setting, seed, rounds, quick)
    if adapt is not None:
        fed = adapt(fed)
    # A candidate draws the default's streams (clients sampled, batches, the rule's draws):
    # common random numbers, so that its paired difference to the default is the rule's.
    mid = method_id(setting, "default" if candidate is not None else method)
    config: dict[str, Any] = {"method-id": mid}
    rows: list[dict[str, Any]] = []
    if method.startswith("fedavg-"):
        n = int(method.removeprefix("fedavg-"))
        random.seed(seed * 1_000_003 + n)  # FedAvg samples with Python's random module
        np.random.seed([seed, n])  # noqa: NPY002 - Flower's DP noise draws from NumPy's global stream
        strategy, extra = fed.fixed(n, rounds)
        config.update(extra)
    else:
        kwargs = dict(candidate or {})
        if callable(kwargs.get("selector")):  # a rule built for this federation
            kwargs["selector"] = kwargs["selector"](fed)
        strategy = fed.default(np.random.SeedSequence([seed, mid]), rounds, **kwargs)

    def evaluate(server_round: int, arrays: Any) -> MetricRecord | None:
        if server_round == 0 or (server_round % eval_every and server_round != rounds):
            return None
        loss, acc = fed.evaluate(arrays)
        # a per-round budget spends B every round, whatever the method (equal rounds, equal cost)
        cost = strategy.state.cost if fed.total_budget is not None else server_round * BUDGET
        rows.append({"setting": setting, "method": method, "seed": seed, "round": server_round,
                     "cost": cost, "train_loss": loss, "test_accuracy": acc})  # fmt: skip
        return MetricRecord({"train-loss": loss, "test-accuracy": acc})

    strategy.start(grid=LocalGrid(fed.client_app(), fed.K), initial_arrays=fed.initial(),
                   num_rounds=rounds, train_config=ConfigRecord(config), evaluate_fn=evaluate)  # fmt: skip
    arms = [{"setting": setting, "method": method, "seed": seed, "round": r["server_round"],
             "n": r["arm"]} for r in getattr(strategy, "records", [])]  # fmt: skip
    return rows, arms


def _saved(path: Path) -> list[dict[str, Any]] | None:
    if not path.exists():
        return None
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def saved_methods(store: str | Path, setting: str) -> list[str]:
    """The methods with at least one run of ``setting`` saved in ``store`` (a card's ``runs/``
    folder; ``default``, ``fedavg-<n>``, candidates, ``warmup-then-<n>``), sorted by name."""
    folder = Path(store) / check_settings([setting])[0]
    return sorted({f.name.rsplit("-seed", 1)[0] for f in folder.glob("*-seed*.csv")
                   if not f.name.endswith(".arms.csv")})  # fmt: skip


def load_runs(store: str | Path, setting: str, methods: list[str],
              seeds: list[int]) -> list[dict[str, Any]]:  # fmt: skip
    """The rows (:data:`COLUMNS`, as strings, as ``scorecard.csv`` holds them) of every saved
    run of ``methods`` × ``seeds`` of ``setting`` in ``store``, a card's ``runs/`` folder, as
    :func:`summarise` and :func:`final_losses` read them.

    Raises
    ------
    ValueError
        Where ``store`` lacks one of them (the error names the first missing run). A saved run
        is read whatever rule made it: a card rerun checks the default's ``.rule`` file, a
        reader of saved runs does not.
    """
    setting = check_settings([setting])[0]
    rows: list[dict[str, Any]] = []
    for method in methods:
        for seed in seeds:
            path = Path(store) / setting / f"{method}-seed{seed}.csv"
            saved = _saved(path)
            if saved is None:
                raise fail("store", "eegrad.examples.scorecard.load_runs",
                           f"a folder holding every run asked for; {path} does not exist",
                           str(store))  # fmt: skip
            rows += saved
    return rows


def default_rule_of(setting: str) -> str:
    """The name of the default rule a setting's ``default`` runs (its checkpoint fingerprint's:
    private or not, per-round or total budget)."""
    from ..flower.strategy import default_rule_name

    s = SETTINGS[setting]
    return default_rule_name(s.private, s.total_budget is not None)


def _saved_text(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


#: The revision of what the card's harness runs for a method: raised when a run of the same
#: name would come out otherwise (2: a total budget's first round asks one client until a cost
#: is known, which changes every total-budget run, the fixed n's included).
HARNESS_REVISION = 2


def _described(x: Any) -> Any:
    """A stable description of a run's argument for its ``.run`` file (code by its name, a
    rule by its class and parameters)."""
    if isinstance(x, dict):
        return {str(k): _described(v) for k, v in sorted(x.items())}
    if isinstance(x, list | tuple):
        return [_described(v) for v in x]
    if isinstance(x, Selector):
        return f"{type(x).__name__}({_described(x.get_params())})"
    if callable(x):
        return f"{getattr(x, '__module__', '?')}.{getattr(x, '__qualname__', type(x).__name__)}"
    if x is None or isinstance(x, bool | int | float | str):
        return x
    return repr(x)


def run_description(setting: str, method: str, seed: int, rounds: int, eval_every: int,
                    candidate: dict[str, Any] | None, quick: bool,
                    adapt: Callable[[Federation], Federation] | None) -> str:  # fmt: skip
    """What made a saved run (its ``.run`` file): a saved run is taken again only where this
    is today's, so a fixed n's or a candidate's run of another configuration, or of an earlier
    harness, is recomputed rather than taken by its name."""
    return json.dumps(_described({
        "harness": HARNESS_REVISION, "setting": setting, "method": method, "seed": seed,
        "rounds": rounds, "eval_every": eval_every, "candidate": candidate, "quick": quick,
        "adapt": adapt}), sort_keys=True)  # fmt: skip


def _job(setting: str, method: str, seed: int, rounds: int, eval_every: int,
         candidate: dict[str, Any] | None, quick: bool, store: Path | None,
         progress: bool, adapt: Callable[[Federation], Federation] | None = None,
         ) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """One federation, or its saved rows when ``store`` holds them (a ``default`` or
    ``warmup-then-<n>`` run only where the rule that made it, named in its ``.rule`` file, is
    today's default)."""
    import flwr.app  # noqa: F401 - Flower sets its logger's level when first imported

    stem = None if store is None else store / setting / f"{method}-seed{seed}"
    # the default's runs and the warm-up reference's (the default's warm-up) name their rule
    rule = default_rule_of(setting) if method == "default" or \
        method.startswith("warmup-then-") else None  # fmt: skip
    made = run_description(setting, method, seed, rounds, eval_every, candidate, quick, adapt)
    if stem is not None and (rows := _saved(stem.with_suffix(".csv"))) is not None and \
            (rule is None or _saved_text(stem.with_suffix(".rule")) == rule) and \
            _saved_text(stem.with_suffix(".run")) == made:  # fmt: skip
        return rows, _saved(stem.with_suffix(".arms.csv")) or []
    logging.getLogger("flwr").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    rows, arms = run_one(setting, method, seed, rounds=rounds, eval_every=eval_every,
                         candidate=candidate, quick=quick, adapt=adapt)  # fmt: skip
    if stem is not None:  # saved as it ends: an interrupted card loses nothing finished
        stem.parent.mkdir(parents=True, exist_ok=True)
        write_table(stem.with_suffix(".arms.csv"), arms, ARM_COLUMNS)
        if rule is not None:  # before the rows: rows without it are never taken for today's
            atomic_write_bytes(stem.with_suffix(".rule"), (rule + "\n").encode())
        atomic_write_bytes(stem.with_suffix(".run"), (made + "\n").encode())
        write_table(stem.with_suffix(".csv"), rows, COLUMNS)
    if progress:
        print(f"  {setting} seed {seed} {method}: final loss {rows[-1]['train_loss']:.4f} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
    return rows, arms


def plan(settings: list[str], seeds: list[int], *, quick: bool = False,
         candidates: dict[str, dict[str, Any]] | None = None,
         fixed: bool = True, default: bool = True) -> list[tuple]:  # fmt: skip
    """The federations of a card: (setting, method, seed, rounds, eval_every, candidate, quick)
    for the default (``default=False``: none), every fixed n that every seed affords
    (``fixed=False``: none), and each candidate."""
    todo = []
    for name in settings:
        s = SETTINGS[name]
        rounds = s.quick_rounds if quick else s.rounds
        eval_every = min(s.eval_every, rounds)
        ns = _fixed_ns(min(federation(name, seed, rounds, quick).N for seed in seeds),
                       quick) if fixed else []  # fmt: skip
        methods = [*([("default", None)] if default else []),
                   *[(f"fedavg-{n}", None) for n in ns], *(candidates or {}).items()]  # fmt: skip
        todo += [(name, m, seed, rounds, eval_every, c, quick) for seed in seeds
                 for m, c in methods]  # fmt: skip
    return todo


def run(settings: list[str], seeds: list[int], *, quick: bool = False, jobs: int = 1,
        store: str | Path | None = None, progress: bool = False,
        candidates: dict[str, dict[str, Any]] | None = None,
        fixed: bool = True, default: bool = True,
        adapt: Callable[[Federation], Federation] | None = None,
        ) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """Every federation of the card; (rows of :data:`COLUMNS`, rows of :data:`ARM_COLUMNS`).
    ``fixed=False`` runs the default and the candidates alone (no fixed n: a candidate paired
    with the default, without the yardstick); ``default=False`` leaves the default out.
    ``adapt`` changes every federation before it runs (:func:`run_one`): its runs are not the
    card's, so give them a ``store`` of their own.

    Each federation is seeded by its own (setting, method, seed), so the rows are the same
    whatever ``jobs`` (joblib's loky processes) and whatever was saved in ``store`` before.
    """
    todo = plan(settings, seeds, quick=quick, candidates=candidates, fixed=fixed,
                default=default)  # fmt: skip
    return _execute(todo, jobs=jobs, store=store, progress=progress, adapt=adapt)


def _execute(todo: list[tuple], *, jobs: int, store: str | Path | None, progress: bool,
             adapt: Callable[[Federation], Federation] | None = None,
             ) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """The federations of ``todo`` (tuples of :func:`plan`) in joblib's loky processes."""
    import joblib

    store = None if store is None else Path(store)  # a str as well: the workers join paths
    parts = joblib.Parallel(n_jobs=jobs, backend="loky")(
        joblib.delayed(_job)(*t, store, progress, adapt) for t in todo)  # t ends with quick
    rows = [r for part, _ in parts for r in part]
    arms = [a for _, part in parts for a in part]
    return rows, arms


def _warmup_references(rows: list[dict], names: list[str], seeds: list[int], *, quick: bool,
                       jobs: int, store: Path | None,
                       progress: bool) -> tuple[list[dict], list[dict], dict[str, str]]:  # fmt: skip
    """Each setting's ``warmup-then-<n>`` at its best fixed n in ``rows``: (rows, arms, the
    method of every setting)."""
    import functools

    todo, methods = [], {}
    for name in names:
        best = summarise([r for r in rows if r["setting"] == name])["best"]
        n = int(best.removeprefix("fedavg-"))
        methods[name] = f"warmup-then-{n}"
        s = SETTINGS[name]
        rounds = s.quick_rounds if quick else s.rounds
        candidate = {"selector": functools.partial(warmup_then, n=n)}
        todo += [(name, methods[name], seed, rounds, min(s.eval_every, rounds), candidate, quick)
                 for seed in seeds]  # fmt: skip
    ref_rows, ref_arms = _execute(todo, jobs=jobs, store=store, progress=progress)
    return ref_rows, ref_arms, methods


# -- summary ---------------------------------------------------------------------------------------------
def final_losses(rows: list[dict[str, Any]], final: str = "window") -> dict[str, dict[int, float]]:
    """Per method and seed: the training loss averaged over the last :data:`LAST` of the run's
    evaluations (in a total-budget setting, whose rounds cost what their clients do: over the
    evaluations after (1 − LAST) of the run's cost); with ``final="model"``, the loss of the
    run's final model (its last evaluation) alone."""
    if final not in ("window", "model"):
        raise fail("final", "eegrad.examples.scorecard.final_losses", "'window' or 'model'",
                   final)  # fmt: skip
    per: dict[tuple[str, int], list[tuple[int, float, float]]] = {}
    total: dict[tuple[str, int], bool] = {}
    for r in rows:
        key = (r["method"], int(r["seed"]))
        setting = SETTINGS.get(r.get("setting", ""))
        total[key] = setting is not None and setting.total_budget is not None
        cost = float(r["cost"]) if total[key] else float(r["round"])
        per.setdefault(key, []).append((int(r["round"]), cost, float(r["train_loss"])))
    out: dict[str, dict[int, float]] = {}
    for (m, seed), pts in per.items():
        pts.sort()
        if final == "model":
            last = [pts[-1][2]]
        elif total[(m, seed)]:
            last = [v for _, c, v in pts if c >= (1.0 - LAST) * pts[-1][1]]
        else:
            last = [v for _, _, v in pts[-max(1, round(LAST * len(pts))):]]
        out.setdefault(m, {})[seed] = float(np.mean(last))
    return out


def mean_and_se(values: list[float] | np.ndarray) -> tuple[float, float]:
    """The mean of ``values`` (one per seed: final losses, or paired differences of two
    methods on the same seeds) and its standard error s/√k over the k seeds (NaN for one; both
    NaN for none)."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return float("nan"), float("nan")
    return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else float("nan")


def summarise(rows: list[dict[str, Any]], method: str = "default",
              final: str = "window") -> dict[str, Any]:  # fmt: skip
    """One setting's line of the card: the final loss of every method (mean, SE, seeds), the
    best and the median fixed n, ``method``'s ratio to both, its rank among the fixed n
    (1: better than all), and its paired difference to the best in standard errors. ``final``:
    the final loss as :func:`final_losses` reads it (the card's window, or the final model).

    ``versus_median`` is ``method`` less the median fixed n (the blind guess), seed by seed,
    in units of the best fixed n's mean loss: (mean, SE) over the seeds. The ratio
    ``over_median`` compares means; this difference is paired, as every method of a seed
    runs on the same data and devices, and so has the smaller SE. ``versus_default`` is the
    same for ``method`` less the default (None for the default itself)."""
    finals = final_losses(rows, final)
    fixed = {m: v for m, v in finals.items() if m.startswith("fedavg-")}
    if method not in finals or not fixed:
        raise fail("rows", "eegrad.examples.scorecard.summarise",
                   f"rows of {method!r} and of at least one fixed n", sorted(finals))  # fmt: skip
    stats = {m: (*mean_and_se(list(v.values())), len(v)) for m, v in finals.items()}
    order = sorted(fixed, key=lambda m: stats[m][0])
    best = order[0]
    median = float(np.median([stats[m][0] for m in order]))
    mine = stats[method][0]
    seeds = sorted(set(finals[method]) & set(finals[best]))
    diff = [finals[method][s] - finals[best][s] for s in seeds]
    d_mean, d_se = mean_and_se(diff)
    versus = None  # a candidate against the default, seed by seed, in the best's units
    if method != "default" and "default" in finals:
        both = sorted(set(finals[method]) & set(finals["default"]))
        versus = mean_and_se([(finals[method][s] - finals["default"][s]) / stats[best][0]
                              for s in both])  # fmt: skip
    # the median fixed n seed by seed: the middle one of the order by mean (the mean of the
    # two middle ones where the number is even, as ``median`` is), on the seeds all of them ran
    middle = order[(len(order) - 1) // 2: len(order) // 2 + 1]
    shared = sorted(set(finals[method]).intersection(*(finals[m] for m in middle)))
    versus_median = mean_and_se([(finals[method][s] - np.mean([finals[m][s] for m in middle]))
                                 / stats[best][0] for s in shared])  # fmt: skip
    return {"method": method, "final_loss": stats, "best": best, "best_loss": stats[best][0],
            "median_loss": median, "over_best": mine / stats[best][0],
            "over_median": mine / median, "rank": 1 + sum(stats[m][0] < mine for m in order),
            "fixed": len(order), "ses_from_best": d_mean / d_se if d_se > 0 else float("nan"),
            "below_median": mine <= median, "versus_median": versus_median,
            "versus_default": versus}  # fmt: skip


def table(summaries: dict[str, dict[str, Any]], method: str = "default") -> str:
    """The card as a Markdown table. Its column "− median" is the paired difference to the
    median fixed n (mean ± SE over seeds, in % of the best fixed n's loss); a candidate's
    table has a last column, its paired difference to the default (the same, in units of the
    best fixed n's loss)."""
    versus = method != "default"
    lines = ["| setting | best fixed n | median fixed n | " + method + " | / best | / median | "
             "− median | rank | SEs from best |" + (" − default |" if versus else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|" if versus else "")]  # fmt: skip
    for name, s in summaries.items():
        st = SETTINGS[name]
        mean, se, _ = s["final_loss"][s.get("method", method)]
        b_mean, b_se, _ = s["final_loss"][s["best"]]
        line = (f"| ({st.letter}) {name}: {st.summary} | {s['best'].removeprefix('fedavg-')}: "
                f"{b_mean:.4f} ± {b_se:.4f} | {s['median_loss']:.4f} | {mean:.4f} ± {se:.4f} | "
                f"{s['over_best']:.3f} | {s['over_median']:.3f} | "
                f"{100 * s['versus_median'][0]:+.1f} % ± {100 * s['versus_median'][1]:.1f} % | "
                f"{s['rank']} of "
                f"{s['fixed'] + 1} | {s['ses_from_best']:+.1f} |")  # fmt: skip
        if versus:
            v = s.get("versus_default")
            line += " – |" if v is None else f" {v[0]:+.3f} ± {v[1]:.3f} |"
        lines.append(line)
    return "\n".join(lines)


def _on_a_cost_grid(pts: list[dict[str, Any]]) -> tuple[np.ndarray, list[list[float]]]:
    """One method's losses by cost, a list of the seeds' values per point: at the recorded
    costs where every seed has the same (a per-round budget), else each seed's run
    interpolated on 60 costs up to the least final cost."""
    seeds: dict[int, list[tuple[float, float]]] = {}
    for r in pts:
        seeds.setdefault(int(r["seed"]), []).append((float(r["cost"]), float(r["train_loss"])))
    runs = [sorted(v) for v in seeds.values()]
    costs = sorted({c for run in runs for c, _ in run})
    if all(len(run) == len(costs) for run in runs):
        return np.array(costs), [[run[i][1] for run in runs] for i in range(len(costs))]
    grid = np.linspace(max(run[0][0] for run in runs), min(run[-1][0] for run in runs), 60)
    values = [np.interp(grid, [c for c, _ in run], [v for _, v in run]) for run in runs]
    return grid, [[v[i] for v in values] for i in range(grid.size)]


def plot(rows: list[dict[str, Any]], summaries: dict[str, dict[str, Any]], path_stem: Path) -> None:
    """Each setting's training loss over cost: the default, the best and the median fixed n
    (bands ±2 SE over seeds), the other fixed n in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summaries)
    cols = min(4, len(names))
    nrows = -(-len(names) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 3.0 * nrows), squeeze=False,
                             constrained_layout=True)  # fmt: skip
    for ax, name in zip(axes.flat, names, strict=False):
        s = summaries[name]
        mine = [r for r in rows if r["setting"] == name]
        fixed = sorted((m for m in s["final_loss"] if m.startswith("fedavg-")),
                       key=lambda m: s["final_loss"][m][0])  # fmt: skip
        median = fixed[len(fixed) // 2]
        show = {"default": ("C0", "default"), fixed[0]: ("C1", f"{fixed[0]} (best)"),
                median: ("C4", f"{median} (median)")}  # fmt: skip
        for m in sorted({r["method"] for r in mine}):
            cost, table_ = _on_a_cost_grid([r for r in mine if r["method"] == m])
            mean = np.array([np.mean(v) for v in table_])
            if m in show:
                se = np.array([np.std(v, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0
                               for v in table_])  # fmt: skip
                color, label = show[m]
                ax.plot(cost, mean, color=color, label=label, lw=1.6)
                ax.fill_between(cost, mean - 2 * se, mean + 2 * se, color=color, alpha=0.2)
            elif m.startswith("fedavg-"):
                ax.plot(cost, mean, color="0.8", lw=0.7)
        ax.set_yscale("log")
        ax.set_title(f"({SETTINGS[name].letter}) {name}", fontsize=9)
        ax.set_xlabel("total cost (budget units)", fontsize=8)
        ax.set_ylabel("training loss", fontsize=8)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    for ext in ("png", "pdf"):
        fig.savefig(f"{path_stem}.{ext}", dpi=110)
    plt.close(fig)


def plot_arms(rows: list[dict[str, Any]], arms: list[dict[str, Any]], names: list[str],
              path_stem: Path, method: str = "default") -> None:  # fmt: skip
    """Each setting's n of ``method`` over its run: every seed's rounds (dots) and their mean
    in ten bins (line), against the share of the run spent (the round's cost over the run's
    in a total-budget setting, its round over the rounds otherwise)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(names))
    nrows = -(-len(names) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.6 * nrows), squeeze=False,
                             constrained_layout=True)  # fmt: skip
    for ax, name in zip(axes.flat, names, strict=False):
        total = SETTINGS[name].total_budget is not None
        cost = {(int(r["seed"]), int(r["round"])): float(r["cost"]) for r in rows
                if r["setting"] == name and r["method"] == method}  # fmt: skip
        runs: dict[int, list[tuple[int, int]]] = {}
        for a in arms:
            if a["setting"] == name and a["method"] == method:
                runs.setdefault(int(a["seed"]), []).append((int(a["round"]), int(a["n"])))
        share, ns = [], []
        for seed, pts in runs.items():
            pts.sort()
            last = pts[-1][0]
            end = cost.get((seed, last)) if total else last
            for rnd, n in pts:
                spent = cost.get((seed, rnd)) if total else rnd
                if spent is not None and end:
                    share.append(spent / end)
                    ns.append(n)
        share, ns = np.asarray(share), np.asarray(ns, dtype=float)
        ax.scatter(share, ns, s=4, alpha=0.25, color="C0", lw=0)
        if share.size:
            bins = np.minimum((share * 10).astype(int), 9)
            mids = [(b + 0.5) / 10 for b in range(10) if np.any(bins == b)]
            means = [ns[bins == b].mean() for b in range(10) if np.any(bins == b)]
            ax.plot(mids, means, color="C3", lw=1.6, label="mean n")
            ax.legend(fontsize=7)
        ax.set_title(f"({SETTINGS[name].letter}) {name}", fontsize=9)
        ax.set_xlabel("share of the run's " + ("budget" if total else "rounds"), fontsize=8)
        ax.set_ylabel(f"n of the {method}", fontsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    for ext in ("png", "pdf"):
        fig.savefig(f"{path_stem}.{ext}", dpi=110)
    plt.close(fig)


def main(out: str | Path = "results/flower_scorecard", *, quick: bool = False,
         seeds: int | None = None, settings: list[str] | None = None, jobs: int = 1,
         progress: bool = True, command: str | None = None,
         candidates: dict[str, dict[str, Any]] | None = None,
         warmup_reference: bool = False) -> dict[str, Any]:  # fmt: skip
    """Run the card; write ``scorecard.csv``, ``arms.csv``, ``scorecard.md``, ``scorecard.png``,
    ``scorecard-arms.png`` and ``metadata.json``; return each setting's summary.

    ``quick``: 2 seeds, the short runs of each setting and about five fixed n (minutes);
    otherwise 10 seeds and every fixed n. ``candidates``: other EE-Grad strategies to run
    beside the default (name → keyword arguments), each on the default's random streams and
    summarised as the default is, with its paired difference to the default.
    ``warmup_reference``: once the fixed n have run, each setting's ``warmup-then-<n>`` at its
    best fixed n (:class:`WarmupThenFixed`, the module's notes), summarised under
    :data:`WARMUP_REFERENCE`.
    """
    owner = "eegrad.examples.scorecard.main"
    names = check_settings(list(SETTINGS) if settings is None else settings)
    seeds = check_integer(seeds if seeds is not None else (2 if quick else 10), "seeds", owner,
                          ge=2)  # fmt: skip
    jobs = check_integer(jobs, "jobs", owner)
    if jobs == 0 or jobs < -1:
        raise fail("jobs", owner, "a positive integer or -1 (every core)", jobs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    store = out / ("runs-quick" if quick else "runs")
    rows, arms = run(names, list(range(seeds)), quick=quick, jobs=jobs, store=store,
                     progress=progress, candidates=candidates)  # fmt: skip
    reference: dict[str, str] = {}  # setting → its warmup-then-<n>
    if warmup_reference:
        ref_rows, ref_arms, reference = _warmup_references(
            rows, names, list(range(seeds)), quick=quick, jobs=jobs, store=store,
            progress=progress)  # fmt: skip
        rows, arms = rows + ref_rows, arms + ref_arms
    write_table(out / "scorecard.csv", rows, COLUMNS)
    write_table(out / "arms.csv", arms, ARM_COLUMNS)
    methods = ["default", *(candidates or {})]
    summaries = {m: {name: summarise([r for r in rows if r["setting"] == name], m)
                     for name in names} for m in methods}  # fmt: skip
    if reference:
        methods.append(WARMUP_REFERENCE)
        summaries[WARMUP_REFERENCE] = {
            name: summarise([r for r in rows if r["setting"] == name], reference[name])
            for name in names}  # fmt: skip
    final_model = {name: summarise([r for r in rows if r["setting"] == name], final="model")
                   for name in names}  # fmt: skip
    plot(rows, summaries["default"], out / "scorecard")
    plot_arms(rows, arms, names, out / "scorecard-arms")
    command = command or f"eegrad example flower-scorecard{' --quick' if quick else ''}"
    text = [(f"# The scorecard of federations\n\n`{command}` ({seeds} seeds; final training loss "
             f"= the mean of the last {LAST:.0%} of a run's evaluations, then mean ± SE over "
             "seeds; − median: the paired difference to the median fixed n, mean ± SE over "
             "seeds in % of the best fixed n's loss; SEs from best: the paired difference to "
             "the best fixed n over its SE)\n")]
    for m in methods:
        text += [f"\n## {m}\n", table(summaries[m], m), ""]
    text += ["\n## default, the final model\n",
             ("Each run's last evaluation alone (the model a run delivers), then mean ± SE over "
              "seeds, every method so.\n"), table(final_model), ""]
    atomic_write_bytes(out / "scorecard.md", "\n".join(text).encode())
    import flwr

    write_json(out / "metadata.json", {
        "example": "flower-scorecard", "quick": quick, "seeds": seeds, "settings": names,
        "command": command, "summary": summaries, "final_model": final_model,
        "versions": {**environment(), "flwr": flwr.__version__},
        "wall_time_s": time.perf_counter() - t0})  # fmt: skip
    if progress:
        for m in methods:
            print(f"\n{m}\n" + table(summaries[m], m))
        print("\ndefault, the final model\n" + table(final_model))
    return summaries
