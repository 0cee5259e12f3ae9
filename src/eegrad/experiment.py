"""Experiments: build the model from a configuration and run a study into tidy tables.

Nothing here touches files or plots (see :mod:`eegrad.results`, :mod:`eegrad.plots`).

Random streams: every piece of randomness comes from ``SeedSequence(seed, spawn_key=key)``
with a key that names what it is for — the T (or η) index and a method's stable id — so a
result depends on the seed and the configuration only, never on the order of execution or on
which other methods run beside it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import theory
from .arms import Arms
from .config import ConfigError, ExperimentConfig, SelectorConfig
from .costs import LinearAggregation, LogAggregation, PowerAggregation, PowerCost
from .estimators import control_variate_mean, quadratic_final_gaps
from .objectives import Objective, Quadratic, QuadraticForm
from .oracle import MiniBatchOracle
from .rounds import estimate_gradient
from .selectors import FixedArm, OptimalArm, Selector, make_rule
from .sgd import run_sgd

__all__ = [
    "Study",
    "build_arms",
    "build_objective",
    "build_oracle",
    "build_selector",
    "run_study",
    "stream",
    "study_work",
]

Progress = Callable[[int], Any]

SGD_COLUMNS = ("T", "method", "k", "gap_mean", "gap_se", "realizations")
RULES_COLUMNS = ("profile", "T", "method", "regret", "regret_se", "lai_robbins", "lock_in",
                 "realizations")  # fmt: skip
PULLS_COLUMNS = ("profile", "T", "method", "n", "pulls_mean")
MEMORY_COLUMNS = ("profile", "T", "method", "final_gap_ratio", "final_gap_ratio_se",
                  "final_gap_ratio_direct", "final_gap_ratio_direct_se", "lock_in",
                  "realizations")  # fmt: skip
MEMORY_PULLS_COLUMNS = ("profile", "T", "method", "k", "n", "pulls_mean")
THEOREM1_COLUMNS = (
    "T", "method", "c", "error_mean", "error_se", "sigma2_star_over_T", "Z_T",
    "identity_lhs_mean", "identity_lhs_se", "identity_rhs_mean", "identity_rhs_se",
    "identity_diff_mean", "identity_diff_se", "regret", "regret_se", "realizations",
)  # fmt: skip
THEOREM2_COLUMNS = (
    "eta", "method", "c", "contraction_mean", "contraction_se", "tau_bound", "eta_max",
    "realizations",
)  # fmt: skip


@dataclass
class Study:
    """A finished study: its configuration, one tidy table (column name -> list) and facts
    derived from it for plots and the report."""

    config: ExperimentConfig
    columns: tuple[str, ...]
    rows: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    #: Further tidy tables written beside the main one: file stem -> (rows, columns).
    tables: dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]] = field(default_factory=dict)

    def column(self, name: str, **where: Any) -> np.ndarray:
        """Values of one column over the rows matching ``where`` (in table order)."""
        return np.array([r[name] for r in self.rows if all(r[k] == v for k, v in where.items())])


def stream(seed: int, *key: int) -> np.random.Generator:
    """The generator for ``key`` under ``seed`` (``SeedSequence(seed, spawn_key=key)``)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(key)))


def _stream(cfg: ExperimentConfig, *key: int) -> np.random.Generator:
    """The configuration's stream for ``key``, under its ``spawn_key`` prefix (set by sweeps:
    one prefix per task, so tasks draw independent streams)."""
    return stream(cfg.seed, *cfg.spawn_key, *key)


def method_id(name: str) -> int:
    """A stable integer id of a method's name, used as a stream key."""
    return zlib.crc32(name.encode())


def build_objective(cfg: ExperimentConfig) -> Objective:
    o = cfg.objective
    if o.kind == "quadratic":
        if o.d < 1:
            raise ConfigError(f"Key 'objective.d' must be an integer >= 1. Got {o.d!r} instead.")
        return Quadratic(d=o.d)
    if o.h is None:
        raise ConfigError("Key 'objective.h' must be given for kind 'diagonal_quadratic'.")
    return QuadraticForm(np.diag(o.h))


def build_arms(cfg: ExperimentConfig, T: int) -> Arms:
    """The arms of the configuration at T (σ² scaled by T / reference_T if asked)."""
    a = cfg.arms
    if a.sigma2 is not None:
        arms = Arms(sigma2=a.sigma2)
    else:
        c = a.costs
        cost = PowerCost(c_min=c.c_min, a=c.a, p=c.p)
        agg = {
            "linear": lambda: LinearAggregation(b=c.b),
            "log": lambda: LogAggregation(b=c.b),
            "power": lambda: PowerAggregation(b=c.b, q=c.q),
        }[c.aggregation]()
        arms = Arms.from_costs(cost, agg, c.budget)
    if a.scale_with_T:
        arms = arms.scaled(T / a.reference_T)
    return arms


def build_oracle(cfg: ExperimentConfig, T: int) -> MiniBatchOracle:
    return MiniBatchOracle(build_objective(cfg), build_arms(cfg, T), noise=cfg.noise)


def build_selector(
    sel: SelectorConfig, c: float | None = None, rounds: int | None = None
) -> Selector:
    """The selector a configuration names, built by the rule registry (``c`` overrides the
    configured c; ``rounds``, the run's total rounds, resolves ``horizon = "KT"``)."""
    params = dict(sel.params)
    if c is not None:
        params["c"] = c
    if params.get("horizon") == "KT":
        if rounds is None:
            raise ConfigError("Key 'horizon' = 'KT' needs a study that runs K iterates of T "
                              "rounds ('sgd' or 'memory').")  # fmt: skip
        params["horizon"] = rounds
    return make_rule(sel.rule, **params)


def rule_name(sel: SelectorConfig) -> str:
    """The method's name in tables: the label, else ``mboN`` for a fixed arm, else the rule
    (with EE-Grad's c where it differs from the default 1, and a horizon where told one)."""
    if sel.label:
        return sel.label
    p = sel.params
    if sel.rule == "fixed":
        return f"mbo{p['n']}"
    if sel.rule == "eegrad" and p.get("c") not in (None, 1.0):
        return f"eegrad-c{p['c']:g}"
    if p.get("horizon") is not None:
        return f"{sel.rule}-h{p['horizon']}"
    return sel.rule


def _methods(cfg: ExperimentConfig, arms: Arms, T: int) -> list[tuple[str, Selector]]:
    rounds = cfg.K * T
    methods = [(rule_name(cfg.selector), build_selector(cfg.selector, rounds=rounds))]
    methods += [(rule_name(r), build_selector(r, rounds=rounds)) for r in cfg.rules]
    if cfg.baselines:
        names = {m for m, _ in methods}
        methods += [(f"mbo{n}", FixedArm(n)) for n in arms.n if f"mbo{n}" not in names]
    seen: set[str] = set()
    for name, _ in methods:
        if name in seen:
            raise ConfigError(f"Two methods are named {name!r}: give one a 'label'.")
        seen.add(name)
    return methods


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    n = x.shape[0]
    se = float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return float(x.mean()), se


def _c_values(cfg: ExperimentConfig) -> list[float]:
    return list(cfg.c_values) or [cfg.selector.value("c")]


def study_work(cfg: ExperimentConfig) -> int:
    """Units of work of a study (realization-rounds), for a progress bar."""
    R = cfg.realizations
    if cfg.study == "sgd":
        n_methods = 1 + len(cfg.rules) + (len(build_arms(cfg, cfg.T[0]).n) if cfg.baselines else 0)
        return sum(R * cfg.K * T * n_methods for T in cfg.T)
    if cfg.study == "rules":
        return R * max(cfg.T) * len(cfg.profiles) * len(_rules_list(cfg))
    if cfg.study == "memory":
        return R * cfg.K * sum(cfg.T) * len(cfg.profiles) * len(_rules_list(cfg))
    if cfg.study == "theorem1":
        return sum(R * T * (len(_c_values(cfg)) + 1) for T in cfg.T)
    return R * cfg.T[0] * len(cfg.eta) * (len(_c_values(cfg)) + 1)


def run_study(cfg: ExperimentConfig, progress: Progress | None = None) -> Study:
    """Run the study a configuration names; ``progress(units)`` is called as work completes."""
    tick = progress or (lambda units: None)
    runner = {"sgd": _sgd_study, "theorem1": _theorem1_study, "theorem2": _theorem2_study,
              "rules": _rules_study, "memory": _memory_study}  # fmt: skip
    return runner[cfg.study](cfg, tick)


def _initial_iterates(cfg: ExperimentConfig, d: int, *key: int) -> np.ndarray:
    return cfg.init_scale * _stream(cfg, *key).standard_normal((cfg.realizations, d))


def _sgd_study(cfg: ExperimentConfig, tick: Progress) -> Study:
    """Expected gaps E F(w_k) − F*, k = 1..K+1, of each method at each T (Figure 1)."""
    study = Study(cfg, SGD_COLUMNS)
    R = cfg.realizations
    eta = cfg.eta[0]
    study.extra["arms"] = {}
    for ti, T in enumerate(cfg.T):
        oracle = build_oracle(cfg, T)
        study.extra["arms"][T] = oracle.arms
        w0 = _initial_iterates(cfg, oracle.d, ti, 0)
        for name, selector in _methods(cfg, oracle.arms, T):
            out = run_sgd(
                oracle,
                selector,
                w0,
                cfg.K,
                T,
                eta,
                rng=_stream(cfg, ti, 1, method_id(name)),
                engine=cfg.engine,
            )
            for k in range(cfg.K + 1):
                mean, se = _mean_se(out.gaps[:, k])
                study.rows.append(
                    {"T": T, "method": name, "k": k + 1, "gap_mean": mean, "gap_se": se,
                     "realizations": R}
                )  # fmt: skip
            tick(R * cfg.K * T)
    return study


def _theorem1_study(cfg: ExperimentConfig, tick: Progress) -> Study:
    """E‖G − ∇F‖²/S(w) against σ*²/T and Z_T; both sides of eq. (gammaDelta)."""
    study = Study(cfg, THEOREM1_COLUMNS)
    R = cfg.realizations
    sel_cfg = cfg.selector
    if sel_cfg.rule != "eegrad":
        raise ConfigError("Study 'theorem1' needs selector.rule = 'eegrad' (Z_T is EE-Grad's).")
    for ti, T in enumerate(cfg.T):
        oracle = build_oracle(cfg, T)
        arms = oracle.arms
        w = np.tile(np.asarray(cfg.w, dtype=float), (R, 1))
        S = float(oracle.at(w[:1]).S[0])
        if S <= 0:
            raise ConfigError(f"Key 'w' must give S(w) > 0 for study 'theorem1'. Got {cfg.w!r}.")
        grad = oracle.objective.grad(w)
        star_T = arms.sigma2_star / T
        # The optimal oracle, measured.
        res = estimate_gradient(oracle, OptimalArm(), w, T, _stream(cfg, ti, 0),
                                engine=cfg.engine)  # fmt: skip
        err = ((res.gradient - grad) ** 2).sum(axis=1) / S
        m, se = _mean_se(err)
        study.rows.append(_t1_row(T, "optimal", float("nan"), m, se, star_T, star_T, R))
        tick(R * T)
        if T < 2 * arms.N:
            continue  # EE-Grad is defined for T >= 2N only
        beta, P = _eegrad_constants(sel_cfg, arms, S)
        for c in _c_values(cfg):
            sel = build_selector(sel_cfg, c=c)
            res = estimate_gradient(oracle, sel, w, T, _stream(cfg, ti, 1, method_id(f"c={c}")),
                                    engine=cfg.engine)  # fmt: skip
            err = ((res.gradient - grad) ** 2).sum(axis=1) / S
            lhs = err - star_T
            rhs = (res.counts @ arms.delta) / T**2
            regret = (res.counts @ arms.delta) / (T * arms.sigma2_star)
            z = float(theory.Z_T(T, arms.sigma2, S, sel_cfg.value("alpha"), beta, P, c, oracle.d))
            row = _t1_row(T, "eegrad", c, *_mean_se(err), star_T, z, R)
            row.update(zip(("identity_lhs_mean", "identity_lhs_se"), _mean_se(lhs), strict=True))
            row.update(zip(("identity_rhs_mean", "identity_rhs_se"), _mean_se(rhs), strict=True))
            row.update(zip(("identity_diff_mean", "identity_diff_se"), _mean_se(lhs - rhs),
                           strict=True))  # fmt: skip
            row.update(zip(("regret", "regret_se"), _mean_se(regret), strict=True))
            study.rows.append(row)
            tick(R * T)
    study.extra["lai_robbins"] = {
        T: float(theory.lai_robbins_regret(build_arms(cfg, T).sigma2, T, len(cfg.w))) for T in cfg.T
    }
    return study


def _eegrad_constants(sel: SelectorConfig, arms: Arms, S: Any) -> tuple[Any, Any]:
    """β and P of EE-Grad as the bounds of Theorems 1 and 2 use them ("oracle": the truth)."""
    beta = arms.sigma2.max() if sel.value("beta") == "oracle" else sel.value("beta")
    P = S if sel.value("P") == "oracle" else sel.value("P")
    return beta, P


def _t1_row(T, method, c, m, se, star_T, z, R) -> dict[str, Any]:
    nan = float("nan")
    return {
        "T": T, "method": method, "c": c, "error_mean": m, "error_se": se,
        "sigma2_star_over_T": star_T, "Z_T": z, "identity_lhs_mean": nan,
        "identity_lhs_se": nan, "identity_rhs_mean": nan, "identity_rhs_se": nan,
        "identity_diff_mean": nan, "identity_diff_se": nan, "regret": nan, "regret_se": nan, "realizations": R,
    }  # fmt: skip


def _theorem2_study(cfg: ExperimentConfig, tick: Progress) -> Study:
    """One-step contraction E F(w_2)/E F(w_1) against τ(η) (EE-Grad) and τ°(η) (optimal)."""
    study = Study(cfg, THEOREM2_COLUMNS)
    R = cfg.realizations
    T = cfg.T[0]
    oracle = build_oracle(cfg, T)
    arms = oracle.arms
    obj = oracle.objective
    if obj.m is None or obj.L is None:
        raise ConfigError("Study 'theorem2' needs an objective with known m and L.")
    sel_cfg = cfg.selector
    if sel_cfg.rule != "eegrad":
        raise ConfigError("Study 'theorem2' needs selector.rule = 'eegrad' (τ is EE-Grad's).")
    w0 = _initial_iterates(cfg, oracle.d, 0)
    gap0 = obj.gap(w0)
    S = oracle.at(w0).S
    beta, P = _eegrad_constants(sel_cfg, arms, S)
    m, L = obj.m, obj.L
    weights = gap0 / gap0.sum()
    study.extra.update(sigma2_star=arms.sigma2_star, m=m, L=L, O={})
    for ei, eta in enumerate(cfg.eta):
        methods = [("optimal", float("nan"), OptimalArm())]
        methods += [("eegrad", c, build_selector(sel_cfg, c=c)) for c in _c_values(cfg)]
        for name, c, sel in methods:
            out = run_sgd(oracle, sel, w0, 1, T, eta,
                          rng=_stream(cfg, 1 + ei, method_id(f"{name}{c}")),
                          engine=cfg.engine)  # fmt: skip
            gap1 = out.gaps[:, 1]
            rho = gap1.mean() / gap0.mean()
            se = float((gap1 - rho * gap0).std(ddof=1) / (np.sqrt(R) * gap0.mean()))
            if name == "optimal":
                bound = float(theory.tau_opt(eta, arms.sigma2_star, T, m, L))
                edge = float(theory.eta_max(arms.sigma2_star / T, L))
            else:
                # τ(w) depends on w through Z_T(w): the bound on E F(w_2) is E[τ(w_1) F(w_1)].
                O = theory.O_T(T, arms.sigma2, S, sel_cfg.value("alpha"), beta, P, c, oracle.d)
                bound = float(np.sum(weights * theory.tau(eta, arms.sigma2_star, T, O, m, L)))
                study.extra["O"][c] = float(np.sum(weights * O))
                z = arms.sigma2_star / T + study.extra["O"][c]
                edge = float(theory.eta_max(z, L))
            study.rows.append(
                {"eta": eta, "method": name, "c": c, "contraction_mean": float(rho),
                 "contraction_se": se, "tau_bound": bound, "eta_max": edge, "realizations": R}
            )  # fmt: skip
            tick(R * T)
    return study


def _rules_list(cfg: ExperimentConfig) -> list[SelectorConfig]:
    return [cfg.selector, *cfg.rules]


def _rules_study(cfg: ExperimentConfig, tick: Progress) -> Study:
    """Normalised regret Σ_n Δ_n E γ_T(n) / (T σ*²) of each rule on each arm profile, over a
    grid of T, with the Lai–Robbins asymptote and the mean pulls per arm.

    Every rule here is anytime (its index uses ln t, never the horizon), so one run to the
    largest T, with the counts read at each T of the grid, gives the regret at every T.
    """
    from ._random import RealizationStreams
    from .rounds import counts_at_checkpoints

    study = Study(cfg, RULES_COLUMNS)
    pulls: list[dict[str, Any]] = []
    study.tables[f"{cfg.name}_pulls"] = (pulls, PULLS_COLUMNS)
    R = cfg.realizations
    grid = sorted(set(cfg.T))
    objective = build_objective(cfg)
    w = np.tile(np.asarray(cfg.w, dtype=float), (R, 1))
    objective.check_iterate(w, "the 'rules' study", "w")
    for pi, prof in enumerate(cfg.profiles):
        arms = Arms(prof.sigma2)
        oracle = MiniBatchOracle(objective, arms, noise=cfg.noise)
        at = oracle.at(w)
        if grid[0] < 2 * arms.N:
            raise ConfigError(f"Key 'T' must be >= 2N = {2 * arms.N} for profile {prof.name!r}.")
        lr = theory.lai_robbins_regret(arms.sigma2, np.array(grid, dtype=float), objective.d)
        for sel_cfg in _rules_list(cfg):
            name = rule_name(sel_cfg)
            sel = build_selector(sel_cfg)
            streams = RealizationStreams(_stream(cfg, pi, method_id(name)), R,
                                         rounds=grid[-1])  # fmt: skip
            sel.init(R, arms.N, objective.d, truth=at.truth(), streams=streams)
            snapshots = counts_at_checkpoints(at, sel, grid, streams, cfg.engine)
            for T, lr_T in zip(grid, lr, strict=True):
                counts = snapshots[T]
                regret = counts @ arms.delta / (T * arms.sigma2_star)
                m, se = _mean_se(regret)
                lock = float(np.mean(counts[:, arms.n_star - 1] < T / 2))
                study.rows.append(
                    {"profile": prof.name, "T": T, "method": name, "regret": m,
                     "regret_se": se, "lai_robbins": float(lr_T), "lock_in": lock,
                     "realizations": R}
                )  # fmt: skip
                for n in arms.n:
                    pulls.append(
                        {"profile": prof.name, "T": T, "method": name, "n": int(n),
                         "pulls_mean": float(counts[:, n - 1].mean())}
                    )  # fmt: skip
            tick(R * grid[-1])
    return study


def pull_shares(study: Study, profile: str, T: int, method: str, n: int) -> np.ndarray:
    """Mean share of arm n in the pulls of each iterate k = 1..K, shape (K,), from the
    ``NAME_pulls`` table of a memory study."""
    rows = study.tables[f"{study.config.name}_pulls"][0]
    mine = sorted((r["k"], r["pulls_mean"]) for r in rows if r["profile"] == profile
                  and r["T"] == T and r["method"] == method and r["n"] == n)  # fmt: skip
    return np.array([p for _, p in mine]) / T


def _memory_study(cfg: ExperimentConfig, tick: Progress) -> Study:
    """Final expected gap of each rule relative to the optimal oracle, in the Figure 1 setting
    (σ² given at T = arms.reference_T and scaled by T / reference_T), with memory across
    iterates or without.

    Heavy tails: the final gap F(w_{K+1}) of one run is a product of K random factors times
    F(w_1). The estimate (:mod:`eegrad.estimators`) takes the last step in expectation,
    E[F(w_{K+1}) | w_K, γ_K] = F(w_K)((1 − η)² + η² Σ_n γ_{K,n} σ_n² / T²), and uses as control
    variate the same run replayed with the optimal oracle, whose mean is the closed form
    E F(w_1) ρ*^K (:func:`eegrad.theory.fixed_oracle_gaps`); its standard error is a
    delete-a-group jackknife. The direct estimate (the mean of the last-step expectations) is
    reported beside it. All methods share the initial iterates and the noise streams.
    """
    if cfg.objective.kind != "quadratic":
        raise ConfigError("Study 'memory' needs objective.kind = 'quadratic' (its closed form).")
    if cfg.noise != "gaussian":
        raise ConfigError("Study 'memory' needs noise = 'gaussian' (its control variate is exact "
                          f"for Gaussian noise); got {cfg.noise!r}.")  # fmt: skip
    if cfg.realizations < 4:
        raise ConfigError("Study 'memory' needs realizations >= 4 (its jackknife standard "
                          f"error); got {cfg.realizations}.")  # fmt: skip
    study = Study(cfg, MEMORY_COLUMNS)
    pulls: list[dict[str, Any]] = []
    study.tables[f"{cfg.name}_pulls"] = (pulls, MEMORY_PULLS_COLUMNS)
    R, K, eta = cfg.realizations, cfg.K, cfg.eta[0]
    objective = build_objective(cfg)
    ref = cfg.arms.reference_T
    mean_f1 = 0.5 * objective.d * cfg.init_scale**2  # E F(w_1), w_1 ~ N(0, init_scale² I)
    for pi, prof in enumerate(cfg.profiles):
        for ti, T in enumerate(cfg.T):
            arms = Arms(np.asarray(prof.sigma2) * T / ref)
            oracle = MiniBatchOracle(objective, arms, noise=cfg.noise)
            w0 = _initial_iterates(cfg, objective.d, pi, ti, 0)
            star = float(arms.sigma2[arms.n_star - 1])
            optimal = float(theory.fixed_oracle_gaps(mean_f1, eta, star, T, K)[-1])
            for r in _rules_list(cfg):
                name = rule_name(r)
                out = run_sgd(oracle, build_selector(r, rounds=K * T), w0, K, T, eta,
                              rng=_stream(cfg, pi, ti, 1), engine=cfg.engine)  # fmt: skip
                X, Y = quadratic_final_gaps(out.w, out.counts, arms.sigma2, T, eta, star)
                est, se, _ = control_variate_mean(X, Y, optimal, groups=min(20, R // 2))
                direct, direct_se = _mean_se(X)
                last = out.counts[:, -1]
                mean_pulls = out.counts.mean(axis=0)  # (K, N)
                for k in range(K):
                    for n in arms.n:
                        pulls.append({"profile": prof.name, "T": T, "method": name, "k": k + 1,
                                      "n": int(n), "pulls_mean": float(mean_pulls[k, n - 1])})  # fmt: skip
                study.rows.append(
                    {"profile": prof.name, "T": T, "method": name,
                     "final_gap_ratio": est / optimal, "final_gap_ratio_se": se / optimal,
                     "final_gap_ratio_direct": direct / optimal,
                     "final_gap_ratio_direct_se": direct_se / optimal,
                     "lock_in": float(np.mean(last[:, arms.n_star - 1] < T / 2)),
                     "realizations": R}
                )  # fmt: skip
                tick(R * K * T)
    return study
