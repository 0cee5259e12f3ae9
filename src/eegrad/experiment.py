"""Experiments: build the model from a configuration.

The studies themselves live in :mod:`eegrad.studies`, one module each, above this one (which
runs one by name: :func:`eegrad.studies.run_study`); this module builds what they share
(objective, arms, oracle, selectors, random streams). Nothing here touches files or plots.

Random streams: every piece of randomness comes from ``SeedSequence(seed, spawn_key=key)``
with a key that names what it is for — the T (or η) index and a method's stable id — so a
result depends on the seed and the configuration only, never on the order of execution or on
which other methods run beside it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from .arms import Arms
from .config import ConfigError, ExperimentConfig, SelectorConfig
from .costs import LinearAggregation, LogAggregation, PowerAggregation, PowerCost
from .objectives import Objective, Quadratic, QuadraticForm
from .oracle import MiniBatchOracle
from .selectors import Selector

__all__ = [
    "build_arms",
    "build_objective",
    "build_oracle",
    "build_selector",
    "c_values",
    "config_stream",
    "eegrad_constants",
    "initial_iterates",
    "mean_se",
    "method_id",
    "methods_of",
    "rules_list",
    "stream",
]

def stream(seed: int, *key: int) -> np.random.Generator:
    """The generator for ``key`` under ``seed`` (``SeedSequence(seed, spawn_key=key)``)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(key)))


def config_stream(cfg: ExperimentConfig, *key: int) -> np.random.Generator:
    """The configuration's stream for ``key``, under its ``spawn_key`` prefix (set by sweeps:
    one prefix per task, so tasks draw independent streams)."""
    return stream(cfg.seed, *cfg.spawn_key, *key)


def method_id(name: str) -> int:
    """A stable integer id of a method's name, used as a stream key."""
    return zlib.crc32(name.encode())


def build_objective(cfg: ExperimentConfig) -> Objective:
    """The objective F a configuration names (``[objective]``)."""
    o = cfg.objective  # checked when read (eegrad.config.check_values)
    if o.kind == "quadratic":
        return Quadratic(d=o.d)
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
    """The mini-batch oracle of a configuration at T: its objective, arms and noise."""
    return MiniBatchOracle(build_objective(cfg), build_arms(cfg, T), noise=cfg.noise)


def build_selector(
    sel: SelectorConfig, c: float | None = None, rounds: int | None = None
) -> Selector:
    """The selector a configuration names (:meth:`~eegrad.config.SelectorConfig.build`)."""
    return sel.build(c=c, rounds=rounds)


def mean_se(x: np.ndarray) -> tuple[float, float]:
    """Mean over realizations (axis 0) and its standard error (NaN for one realization)."""
    n = x.shape[0]
    se = float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return float(x.mean()), se


def c_values(cfg: ExperimentConfig) -> list[float]:
    """The values of EE-Grad's c a theorem study compares: ``c_values``, else the selector's c."""
    return list(cfg.c_values) or [cfg.selector.value("c")]


def initial_iterates(cfg: ExperimentConfig, d: int, *key: int) -> np.ndarray:
    """w₁ ~ N(0, init_scale² I) of every realization, from the configuration's stream ``key``."""
    return cfg.init_scale * config_stream(cfg, *key).standard_normal((cfg.realizations, d))


def eegrad_constants(sel: SelectorConfig, arms: Arms, S: Any) -> tuple[Any, Any]:
    """β and P of EE-Grad as the bounds of Theorems 1 and 2 use them ("oracle": the truth)."""
    beta = arms.sigma2.max() if sel.value("beta") == "oracle" else sel.value("beta")
    P = S if sel.value("P") == "oracle" else sel.value("P")
    return beta, P


def rules_list(cfg: ExperimentConfig) -> list[SelectorConfig]:
    """The rules a comparison study runs: the selector first, then ``[[rules]]``."""
    return [cfg.selector, *cfg.rules]


def methods_of(cfg: ExperimentConfig,
               extra: Iterable[SelectorConfig] = ()) -> list[SelectorConfig]:  # fmt: skip
    """The methods a comparison study runs (:func:`rules_list`, then ``extra`` whose names are
    not taken); two methods of one name are refused, naming it."""
    methods = rules_list(cfg)
    names = {m.name for m in methods}
    methods += [m for m in extra if m.name not in names]
    seen: set[str] = set()
    for m in methods:
        if m.name in seen:
            raise ConfigError(f"Two methods are named {m.name!r}: give one a 'label'.")
        seen.add(m.name)
    return methods


