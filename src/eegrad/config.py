"""Experiment configurations: typed, validated TOML (never evaluated as code).

A configuration is a tree of frozen dataclasses. :func:`build_config` turns a mapping into one
(an unknown key or a value of the wrong type is a :class:`ConfigError` that names the key, the
file and the expected type) and :func:`check_values` checks the keys every study shares. A
study's own keys are checked by the study (:mod:`eegrad.studies`, which sits above this module):
:func:`eegrad.studies.load_config` and :func:`eegrad.studies.config_from_dict` read a file or a
mapping and run every check.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ._validation import InvalidParameterError

if TYPE_CHECKING:
    from .selectors import RuleInfo, Selector

__all__ = [
    "ArmsConfig",
    "ConfigError",
    "CostConfig",
    "ExperimentConfig",
    "ObjectiveConfig",
    "ProfileConfig",
    "SelectorConfig",
    "build_config",
    "check_values",
    "config_data",
    "config_to_dict",
    "preset_names",
    "preset_path",
]


class ConfigError(InvalidParameterError):
    """A configuration file has an unknown key, a wrong type or an invalid value."""


@dataclass(frozen=True)
class ObjectiveConfig:
    """The objective F. ``kind``: ``"quadratic"`` (F = ½‖w‖², dimension ``d``) or
    ``"diagonal_quadratic"`` (F = ½ Σ h_i w_i², curvatures ``h``)."""

    kind: str = "quadratic"
    d: int = 2
    h: list[float] | None = None


@dataclass(frozen=True)
class CostConfig:
    """A cost-fidelity function (``kind = "power"``: C(θ) = c_min + a θ^p) and an aggregation
    cost (``aggregation = "linear" | "log" | "power"`` with ``b`` and ``q``)."""

    kind: str = "power"
    c_min: float = 0.0
    a: float = 1.0
    p: float = 1.0
    aggregation: str = "linear"
    b: float = 0.0
    q: float = 1.0
    budget: float = 1.0


@dataclass(frozen=True)
class ArmsConfig:
    """The arms: ``sigma2`` directly, or ``[arms.costs]``. With ``scale_with_T``, σ² is given
    at ``reference_T`` and multiplied by T / reference_T (the paper's Figure 1)."""

    sigma2: list[float] | None = None
    scale_with_T: bool = False
    reference_T: int = 50
    costs: CostConfig | None = None


@dataclass(frozen=True)
class SelectorConfig:
    """A selection rule — a method of a study, as a value: ``rule``, the name of a registered
    rule (:func:`eegrad.all_rules`: ``"eegrad"``, ``"kl_lcb"``, ``"memory_thompson"``,
    ``"fixed"``...), ``label``, its name in tables and rows (default: :attr:`name`, derived
    from the rule and its parameters; figures name it by :attr:`legend`), and the rule's own
    parameters as the other keys of the same table, checked by the rule's class — e.g.
    ``alpha``, ``beta``, ``P``, ``c`` for ``"eegrad"`` (Algorithm 1), ``n`` for ``"fixed"``,
    ``window`` for ``"memory_thompson"``. A parameter left out takes the class's default. A
    parameter the rule lists in ``run_rounds_params`` (``horizon`` of ``"memory_kl_lcb"``) may
    also be ``"KT"``: the study's K·T rounds at each T.

    Code that needs to know what a method is reads this value (its rule, :meth:`value`,
    :attr:`keeps_memory`), never its name.

    Examples
    --------
    >>> from eegrad.config import SelectorConfig
    >>> m = SelectorConfig("memory_kl_lcb", params={"horizon": "KT"})
    >>> m.name, m.legend, m.keeps_memory
    ('memory_kl_lcb-hKT', 'kl-LCB with memory, told K·T', True)
    >>> SelectorConfig("fixed", params={"n": 3}).name
    'mbo3'
    """

    rule: str = "eegrad"
    label: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def info(self) -> RuleInfo:
        """The rule's registry entry."""
        from .selectors import rule_info

        return rule_info(self.rule)

    def value(self, key: str) -> Any:
        """The parameter ``key`` as configured, else the rule's default."""
        if key in self.params:
            return self.params[key]
        return self.info.parameters()[key].default

    @property
    def name(self) -> str:
        """The name in tables and the method's stream key: the ``label``, else the rule's own
        (:meth:`~eegrad.selectors.Selector.method_name`: ``"mbo3"``, ``"eegrad-c10"``...)."""
        return self.label or self.info.cls.method_name(self.params)

    @property
    def legend(self) -> str:
        """The name in figures, from the rule's registered label and its parameters
        (:meth:`~eegrad.selectors.Selector.method_legend`: ``"MBO(3)"``, ``"EE-Grad, c = 10"``)."""
        return self.info.cls.method_legend(self.params, self.info.label)

    @property
    def keeps_memory(self) -> bool:
        """Whether the rule keeps its evidence across SGD iterates."""
        return bool(self.info.cls.keeps_memory)

    @property
    def told_run_rounds(self) -> tuple[str, ...]:
        """The parameters given as ``"KT"`` (the run's total rounds, resolved by :meth:`build`)."""
        from .selectors.base import RUN_ROUNDS

        return tuple(k for k in self.info.cls.run_rounds_params if self.params.get(k) == RUN_ROUNDS)

    def build(self, c: float | None = None, rounds: int | None = None) -> Selector:
        """The selector, built by the rule registry (``c`` overrides the configured c;
        ``rounds``, the run's total rounds K·T, resolves the parameters given as ``"KT"``)."""
        from .selectors import make_rule

        params = dict(self.params)
        if c is not None:
            params["c"] = c
        for key in self.told_run_rounds:
            if rounds is None:
                raise ConfigError(f"Key {key!r} = 'KT' needs a study that runs K iterates of T "
                                  "rounds ('sgd' or 'memory').")  # fmt: skip
            params[key] = rounds
        return make_rule(self.rule, **params)

    def __getattr__(self, key: str) -> Any:
        # ``sel.c``: the rule's parameter as :meth:`value` gives it (only for the rule's own
        # parameters; anything else is the usual AttributeError).
        if key.startswith("_") or key in ("rule", "label", "params"):
            raise AttributeError(key)
        from .selectors import rule_info

        if key in rule_info(self.rule).parameters():
            return self.value(key)
        raise AttributeError(f"rule {self.rule!r} has no parameter {key!r}")


@dataclass(frozen=True)
class ProfileConfig:
    """A named arm profile (study ``"rules"``)."""

    name: str = "profile"
    sigma2: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class ExperimentConfig:
    """One experiment.

    ``study`` is ``"sgd"`` (expected gaps over K iterates for each T, as in Figure 1),
    ``"theorem1"`` (the estimate's error against Z_T over a grid of T) or ``"theorem2"``
    (one-step contraction against τ(η) over a grid of η).
    """

    study: str = "sgd"
    name: str = "experiment"
    seed: int = 0
    realizations: int = 2000
    T: list[int] = field(default_factory=lambda: [50])
    K: int = 5
    eta: list[float] = field(default_factory=lambda: [0.85])
    engine: str = "auto"
    noise: str = "gaussian"
    #: Initial iterates w_1 ~ N(0, init_scale² I), one per realization (studies "sgd", "theorem2").
    init_scale: float = 1.0
    #: The fixed iterate of study "theorem1".
    w: list[float] = field(default_factory=lambda: [1.0, -0.5])
    #: Include every fixed oracle MBO(n) as a method (study "sgd").
    baselines: bool = True
    #: Values of c to compare (studies "theorem1" and "theorem2"; empty: the selector's c).
    c_values: list[float] = field(default_factory=list)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    arms: ArmsConfig = field(default_factory=ArmsConfig)
    selector: SelectorConfig = field(default_factory=SelectorConfig)
    #: More rules run beside the selector (study "sgd": overlays; study "rules": the compared
    #: rules, the selector first).
    rules: list[SelectorConfig] = field(default_factory=list)
    #: Arm profiles of study "rules" (the arms table is ignored there).
    profiles: list[ProfileConfig] = field(default_factory=list)
    #: Prefix of every random stream's key (SeedSequence spawn_key); sweeps give each task its
    #: own. Leave empty otherwise.
    spawn_key: list[int] = field(default_factory=list)


_CHOICES = {
    ("engine",): ("auto", "numpy", "numba"),
    ("noise",): ("gaussian", "rademacher", "uniform"),
    ("objective", "kind"): ("quadratic", "diagonal_quadratic"),
    ("arms", "costs", "kind"): ("power",),
    ("arms", "costs", "aggregation"): ("linear", "log", "power"),
}


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp) if a is not type(None))
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0])}s"
    if dataclasses.is_dataclass(tp):
        return "a table"
    return {int: "integer", float: "float", str: "string", bool: "boolean"}.get(tp, str(tp))


def _convert(value: Any, tp: Any, key: str, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted, else raise."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and type(None) in typing.get_args(tp):
            return None
        for a in args:
            try:
                return _convert(value, a, key, where)
            except ConfigError:
                continue
        raise _type_error(key, where, tp, value)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            # A scalar where a list is expected is taken as a list of one.
            value = [value]
        try:
            return [_convert(v, item, key, where) for v in value]
        except ConfigError:
            raise _type_error(key, where, tp, value) from None
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise _type_error(key, where, tp, value)
        return _build(tp, value, key, where)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str and isinstance(value, str):
        return value
    raise _type_error(key, where, tp, value)


def _type_error(key: str, where: str, tp: Any, value: Any) -> ConfigError:
    return ConfigError(
        f"Key {key!r} in {where} must be {_type_name(tp)}. "
        f"Got {value!r} ({type(value).__name__}) instead."
    )


def _build_selector(data: dict[str, Any], prefix: str, where: str) -> SelectorConfig:
    """A rule's table: ``rule``, ``label`` and the parameters of the rule's class, each checked
    by building the rule (its constructor's own errors, naming the parameter and the rule)."""
    from .selectors import rule_info, rule_names
    from .selectors.base import RUN_ROUNDS

    rule = data.get("rule", "eegrad")
    if not isinstance(rule, str) or rule not in rule_names():
        raise ConfigError(f"Key '{prefix}.rule' in {where} must be one of "
                          f"{', '.join(map(repr, rule_names()))}. Got {rule!r} instead.")  # fmt: skip
    label = data.get("label")
    if label is not None and not isinstance(label, str):
        raise _type_error(f"{prefix}.label", where, str, label)
    info = rule_info(rule)
    accepted = info.parameters()
    try:
        hints = typing.get_type_hints(info.cls.__init__)
    except Exception:  # noqa: BLE001 - annotations that do not resolve: the class checks alone
        hints = {}
    params: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("rule", "label"):
            continue
        if key not in accepted:
            raise ConfigError(
                f"Unknown key '{prefix}.{key}' in {where} for rule {rule!r} "
                f"({info.cls.__name__}). Expected one of: rule, label, {', '.join(accepted)}."
            )
        hint = hints.get(key, Any)
        told_rounds = key in info.cls.run_rounds_params and value == RUN_ROUNDS
        if not told_rounds and hint is not Any:
            value = _convert(value, hint, f"{prefix}.{key}", where)  # the class's annotation
        params[key] = value
    for key in info.required():
        if key not in params:
            raise ConfigError(f"Key '{prefix}.{key}' in {where} must be given for rule {rule!r}.")
    if not info.simulated:
        raise ConfigError(
            f"Key '{prefix}.rule' in {where}: rule {rule!r} learns from the parts of each pull, "
            "which the simulator does not produce; use it through "
            "GradientEstimator.tell_parts or eegrad.flower."
        )
    sel = SelectorConfig(rule=rule, label=label, params=params)
    try:
        sel.build(rounds=1)  # a "KT" parameter as one round: the run's K·T is known later
    except (InvalidParameterError, TypeError) as exc:
        raise ConfigError(f"In {where}, table {prefix!r}: {exc}") from None
    return sel


def _build(cls: type, data: dict[str, Any], prefix: str, where: str) -> Any:
    if cls is SelectorConfig:
        return _build_selector(data, prefix, where)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}.{key}" if prefix else key
        if key not in hints:
            raise ConfigError(
                f"Unknown key {full!r} in {where}. Expected one of: {', '.join(names)}."
            )
        converted = _convert(value, hints[key], full, where)
        choices = _CHOICES.get(tuple(full.split(".")))
        if choices is not None and converted not in choices:
            raise ConfigError(
                f"Key {full!r} in {where} must be one of {', '.join(map(repr, choices))}. "
                f"Got {converted!r} instead."
            )
        kwargs[key] = converted
    return cls(**kwargs)


def build_config(data: dict[str, Any], where: str = "the configuration") -> ExperimentConfig:
    """A mapping (e.g. parsed TOML) as an :class:`ExperimentConfig`: every key known, every value
    of its type (a :class:`ConfigError` naming the key, ``where`` and the type otherwise). The
    values are checked by :func:`check_values` and the study's own check
    (:func:`eegrad.studies.config_from_dict` runs them all)."""
    return _build(ExperimentConfig, data, "", where)


def need(ok: bool, key: str, where: str, rule: str, value: Any) -> None:
    """Raise the standard :class:`ConfigError` for ``key`` in ``where`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"Key {key!r} in {where} must be {rule}. Got {value!r} instead.")


def check_arms_table(cfg: ExperimentConfig, where: str) -> None:
    """The arms table of a study that reads it: exactly one of ``sigma2`` and ``costs``."""
    arms = cfg.arms
    need((arms.sigma2 is None) != (arms.costs is None), "arms", where,
         "a table with exactly one of 'sigma2' and 'costs'", dataclasses.asdict(arms))  # fmt: skip


def check_profiles(cfg: ExperimentConfig, where: str) -> None:
    """The arm profiles of a study that compares rules on them."""
    need(len(cfg.profiles) >= 1, "profiles", where, "at least one [[profiles]] table", [])
    for p in cfg.profiles:
        need(len(p.sigma2) >= 1 and all(x > 0 for x in p.sigma2), "profiles.sigma2", where,
             "a non-empty list of positive floats", p.sigma2)  # fmt: skip


def check_values(cfg: ExperimentConfig, where: str) -> None:
    """The values of the keys every study shares (realizations, K, T, eta, seed, init_scale,
    the objective)."""
    need(cfg.realizations >= 1, "realizations", where, "an integer >= 1", cfg.realizations)
    need(cfg.K >= 1, "K", where, "an integer >= 1", cfg.K)
    need(len(cfg.T) >= 1 and all(t >= 1 for t in cfg.T), "T", where, "a non-empty list of T >= 1",
         cfg.T)  # fmt: skip
    need(len(cfg.eta) >= 1 and all(e > 0 for e in cfg.eta), "eta", where, "positive step sizes",
         cfg.eta)  # fmt: skip
    need(cfg.seed >= 0, "seed", where, "an integer >= 0", cfg.seed)
    need(cfg.init_scale > 0, "init_scale", where, "a float > 0", cfg.init_scale)
    o = cfg.objective
    need(o.d >= 1, "objective.d", where, "an integer >= 1", o.d)
    need(o.kind != "diagonal_quadratic" or o.h is not None, "objective.h", where,
         "given for kind 'diagonal_quadratic'", o.h)  # fmt: skip


def dimension(cfg: ExperimentConfig) -> int:
    """d of the configured objective."""
    if cfg.objective.kind == "diagonal_quadratic" and cfg.objective.h is not None:
        return len(cfg.objective.h)
    return cfg.objective.d


def config_to_dict(cfg: ExperimentConfig) -> dict[str, Any]:
    """The configuration as plain data (for metadata), ``None`` entries dropped."""

    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            if "params" in x and "rule" in x:  # a rule's table: its parameters beside 'rule'
                x = {"rule": x["rule"], "label": x["label"], **x["params"]}
            return {k: clean(v) for k, v in x.items() if v is not None}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return clean(dataclasses.asdict(cfg))


def read_toml(path: str | Path, what: str = "Configuration file") -> dict[str, Any]:
    """Parse a TOML file; a missing file or bad TOML is a ConfigError naming the file."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{what} {str(path)!r} does not exist.") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {str(path)!r} is not valid TOML: {exc}") from exc


def config_data(path: str | Path, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """A TOML experiment file as a mapping (``name`` defaults to the file's stem), with
    ``overrides`` (dotted keys) applied; :func:`eegrad.studies.load_config` validates it."""
    path = Path(path)
    data = read_toml(path)
    data.setdefault("name", path.stem)
    return apply_overrides(data, overrides or {})


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys (``"selector.c"``) in a nested mapping; returns a new mapping."""
    import copy

    out = copy.deepcopy(data)
    for dotted, value in overrides.items():
        node = out
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return out


def preset_names() -> list[str]:
    """Names of the presets shipped with the package."""
    files = resources.files("eegrad") / "presets"
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".toml"))


def preset_path(name: str) -> Path:
    """Path of a shipped preset."""
    if name not in preset_names():
        raise ConfigError(f"Unknown preset {name!r}. Expected one of: {', '.join(preset_names())}.")
    return Path(str(resources.files("eegrad") / "presets" / f"{name}.toml"))


