"""What a study is, and the registry of studies.

A study is one module of :mod:`eegrad.studies` that registers a :class:`StudyKind`: its name
(the configuration's ``study``), its preset, its tidy columns, how to run it, how much work it is,
how sweeps merge it, its figure and its report paragraph. The CLI, the pipeline, the sweeps and
the report read this registry; a new study is one module plus its preset.

A configuration names its study, so reading one is done here, above :mod:`eegrad.config`:
:func:`config_from_dict` and :func:`load_config` build the configuration, check the keys every
study shares, refuse a key the study does not read (its :attr:`StudyKind.keys`) and check the
study's own keys together (its :attr:`StudyKind.check`), so that a file that loads is one that
runs; :func:`run_study` and :func:`study_work` dispatch to the study a configuration names.

A finished :class:`Study` is its configuration and its tables. :func:`load_study` rebuilds one
from a results folder (``metadata.json`` and the CSVs), so that a figure or a report can be
remade from results alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._discover import import_package_modules
from ..config import (
    ConfigError,
    ExperimentConfig,
    build_config,
    check_arms_table,
    check_values,
    config_data,
    need,
    preset_path,
)

__all__ = [
    "COMMON_KEYS",
    "MergeSpec",
    "Section",
    "Study",
    "StudyKind",
    "all_studies",
    "config_from_dict",
    "load_config",
    "load_preset",
    "load_study",
    "ratio_se",
    "register_study",
    "run_study",
    "study_kind",
    "study_work",
    "unregister_study",
]

Progress = Callable[[int], Any]

#: The configuration keys every study reads (its own are :attr:`StudyKind.keys`).
COMMON_KEYS = ("study", "name", "seed", "realizations", "engine", "spawn_key")

#: How a sweep merges a study's chunks: the key columns, the (mean, SE) column pairs merged as
#: means over realizations, and columns that must agree between chunks.
MergeSpec = tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...]]


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


@dataclass
class Section:
    """One paragraph group of the reproduction report."""

    title: str
    paragraphs: list[str]
    image: str | None = None  # path relative to the report's folder
    table: list[list[str]] = field(default_factory=list)  # header row first


def ratio_se(a: float, sa: float, b: float, sb: float) -> tuple[float, float]:
    """a/b and its standard error for independent a and b (delta method)."""
    r = a / b
    return r, abs(r) * float(np.hypot(sa / a, sb / b))


def without_overlays(options: dict[str, Any]) -> dict[str, Any]:
    """Command-line options for a study that takes no ``--rule`` overlays."""
    out = dict(options)
    out.pop("rules", None)
    return out


def c_grid_options(options: dict[str, Any]) -> dict[str, Any]:
    """Command-line options for a study that compares several c: ``--c`` replaces the grid."""
    out = without_overlays(options)
    if "selector.c" in out:
        out["c_values"] = [out["selector.c"]]
    return out


def own_rules_options(options: dict[str, Any]) -> dict[str, Any]:
    """Command-line options for a study that compares its own list of rules: EE-Grad's
    constants and overlays are left to its configuration."""
    out = without_overlays(options)
    for key in ("selector.alpha", "selector.beta", "selector.P", "selector.c"):
        out.pop(key, None)
    return out


def check_methods(cfg: ExperimentConfig, where: str, *, iterates: bool) -> None:
    """The methods of a study that compares rules (:func:`eegrad.experiment.methods_of`): no
    two of one name, and a parameter given as ``"KT"`` only where the study runs K iterates of
    T rounds (``iterates``)."""
    from ..experiment import methods_of

    for m in methods_of(cfg):
        for key in m.told_run_rounds:
            need(iterates, key, where, f"a number for study {cfg.study!r}, which runs no K "
                 "iterates ('KT' is K·T rounds)", "KT")  # fmt: skip


def no_derived_facts(study: Study) -> None:
    """The default ``derive`` of a study: its figure and paragraph need only its tables."""


@dataclass(frozen=True)
class StudyKind:
    """A registered study (see the module's notes).

    Attributes
    ----------
    name : str
        The configuration's ``study`` value.
    preset : str
        The shipped preset that reproduces it (``eegrad reproduce PRESET``).
    columns : tuple of str
        Columns of its main table.
    run : callable
        ``run(cfg, tick) -> Study``; ``tick(units)`` reports work done.
    work : callable
        ``work(cfg) -> int``: units of work (realization-rounds), for a progress bar.
    plot : callable
        ``plot(study) -> matplotlib.figure.Figure``.
    section : callable
        ``section(study, image) -> Section``: the report's paragraph, from the tables alone.
    derive : callable
        ``derive(study)``: facts the figure and the paragraph need beside the tables
        (``study.extra``), recomputed from the configuration; run by :func:`load_study`.
    merge : MergeSpec or None
        How sweeps merge its chunks; None: it cannot be swept.
    check : callable
        ``check(cfg, where)``: the study's own configuration keys, alone and together, checked
        when a configuration is read and again by :func:`run_study`
        (:func:`eegrad.config.need` gives the standard error); default: the arms table.
    keys : tuple of str or None
        The top-level configuration keys the study reads beside :data:`COMMON_KEYS`; a
        configuration that sets another is refused when it is read, naming the key. None: any
        key of :class:`~eegrad.config.ExperimentConfig` (no declaration).
    options : callable
        ``options(overrides) -> overrides``: how ``eegrad reproduce``'s options (dotted keys:
        ``selector.c``, ``rules``, ...) apply to the study; default: all but ``--rule`` overlays.
    summary : str
        What the study shows and writes, for ``eegrad reproduce --help``.
    small : dict
        Overrides (dotted keys) that make a quick run of its preset, for the tests and smoke
        runs (each study is run on them by the test suite).
    rank : float
        Its place in listings and in the report (smaller first; ties in registration order);
        default: after the package's own.
    """

    name: str
    preset: str
    columns: tuple[str, ...]
    run: Callable[[ExperimentConfig, Progress], Study]
    work: Callable[[ExperimentConfig], int]
    plot: Callable[[Study], Any]
    section: Callable[[Study, str], Section]
    derive: Callable[[Study], None] = no_derived_facts
    merge: MergeSpec | None = None
    check: Callable[[ExperimentConfig, str], None] = check_arms_table
    keys: tuple[str, ...] | None = None
    options: Callable[[dict[str, Any]], dict[str, Any]] = without_overlays
    summary: str = ""
    small: dict[str, Any] = field(default_factory=dict)
    rank: float = math.inf


_STUDIES: dict[str, StudyKind] = {}


def _builtin() -> dict[str, StudyKind]:
    """The registry, after every module of this package is imported (each study module
    registers itself): a study placed in the package is found, with no list to edit."""
    import_package_modules(__package__)
    return _STUDIES


def register_study(kind: StudyKind) -> StudyKind:
    """Add a study to the registry (a study module calls it once)."""
    _STUDIES[kind.name] = kind
    return kind


def unregister_study(name: str) -> None:
    """Remove a registered study (for tests that register toy studies)."""
    _STUDIES.pop(name, None)


def all_studies() -> tuple[StudyKind, ...]:
    """Every registered study, by :attr:`StudyKind.rank`, then in registration order."""
    kinds = list(_builtin().values())
    return tuple(sorted(kinds, key=lambda k: k.rank))  # stable: ties keep registration order


def study_kind(name: str) -> StudyKind:
    """The registered study named ``name`` (a configuration's ``study``) or whose preset it is."""
    for kind in _builtin().values():
        if name in (kind.name, kind.preset):
            return kind
    raise ConfigError(f"Unknown study {name!r}. Expected one of: "
                      f"{', '.join(k.name for k in all_studies())}.")  # fmt: skip


def config_from_dict(data: dict[str, Any], where: str = "the configuration", *,
                     own_keys: bool = True) -> ExperimentConfig:  # fmt: skip
    """Validate a mapping (e.g. parsed TOML) into an :class:`~eegrad.config.ExperimentConfig`:
    its keys and types (:func:`eegrad.config.build_config`), its ``study`` (a registered one),
    the keys every study shares (:func:`eegrad.config.check_values`), no key the study does not
    read (:attr:`StudyKind.keys`; ``own_keys=False`` skips this for a configuration written
    out whole, e.g. a results folder's metadata) and the study's own keys, alone and together
    (its :attr:`StudyKind.check`: e.g. T >= 2N of every profile of study ``rules``).
    """
    cfg = build_config(data, where)
    names = [k.name for k in all_studies()]
    if cfg.study not in names:
        raise ConfigError(f"Key 'study' in {where} must be one of {', '.join(map(repr, names))}. "
                          f"Got {cfg.study!r} instead.")  # fmt: skip
    kind = study_kind(cfg.study)
    if own_keys and kind.keys is not None:
        for key in data:
            if key not in COMMON_KEYS and key not in kind.keys:
                raise ConfigError(
                    f"Key {key!r} in {where} is not read by study {cfg.study!r}, which reads: "
                    f"{', '.join((*COMMON_KEYS, *kind.keys))}."
                )
    check_values(cfg, where)
    kind.check(cfg, where)  # the study's own keys
    return cfg


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Read and validate a TOML experiment file; ``overrides`` (dotted keys) replace entries."""
    return config_from_dict(config_data(path, overrides), where=str(Path(path)))


def load_preset(name: str, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """A shipped preset (e.g. ``"figure1"``), with optional dotted-key overrides."""
    return load_config(preset_path(name), overrides)


def study_work(cfg: ExperimentConfig) -> int:
    """Units of work of a study (realization-rounds), for a progress bar."""
    return study_kind(cfg.study).work(cfg)


def run_study(cfg: ExperimentConfig, progress: Progress | None = None) -> Study:
    """Run the study a configuration names; ``progress(units)`` is called as work completes.
    The study's own checks run first (a configuration built in code, not read, is checked
    here)."""
    kind = study_kind(cfg.study)
    check_values(cfg, "the configuration")
    kind.check(cfg, "the configuration")
    return kind.run(cfg, progress or (lambda units: None))


def _cell(text: str) -> Any:
    """A CSV cell as written by :func:`eegrad.results.write_table`: int, float, NaN or text."""
    if text == "":
        return math.nan
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def load_study(folder: str | Path) -> Study:
    """The study whose results a folder holds (``metadata.json`` and its CSVs), with its derived
    facts recomputed from the configuration: enough to redraw its figure or rewrite its report
    paragraph without running it."""
    from ..results import read_table

    folder = Path(folder)
    meta_path = folder / "metadata.json"
    if not meta_path.exists():
        raise ConfigError(f"No metadata.json in {str(folder)!r}: not a study's results folder.")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    cfg = config_from_dict(meta["config"], str(meta_path), own_keys=False)
    kind = study_kind(cfg.study)
    study = Study(cfg, kind.columns)
    study.rows = [{k: _cell(v) for k, v in r.items()} for r in read_table(folder / f"{cfg.name}.csv")]
    for name in meta.get("files", []):
        stem = name[:-4]
        if name.endswith(".csv") and stem != cfg.name:
            rows = [{k: _cell(v) for k, v in r.items()} for r in read_table(folder / name)]
            study.tables[stem] = (rows, tuple(rows[0]) if rows else ())
    kind.derive(study)
    return study
