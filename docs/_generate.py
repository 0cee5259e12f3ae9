"""Reference tables written at build time from the code: the TOML configuration keys (from the
configuration dataclasses) and the command line (from the argparse parser)."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

from eegrad import config as cfgmod
from eegrad.cli import build_parser


def _type_name(tp: typing.Any) -> str:
    return cfgmod._type_name(tp)


def _rows(cls: type, prefix: str = "") -> list[tuple[str, str, str]]:
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp) and cls is not cfgmod.SelectorConfig:
            rows += _rows(tp, key + ".")
            continue
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            value = f.default_factory()  # type: ignore[misc]
            default = "(see below)" if dataclasses.is_dataclass(value) else repr(value)
        else:
            default = "required"
        rows.append((key, _type_name(tp), default))
    return rows


def write_config_reference(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Configuration keys", "", ("Generated from `eegrad.config` and the rule registry "
             "when the site is built."), "", "| key | type | default |", "|---|---|---|"]  # fmt: skip
    for key, tp, default in _rows(cfgmod.ExperimentConfig):
        lines.append(f"| `{key}` | {tp} | `{default}` |".replace("||", "|"))
    from eegrad.selectors import all_rules
    from eegrad.studies import COMMON_KEYS, all_studies

    lines += ["", ("Each study reads the common keys (" + ", ".join(f"`{k}`" for k in COMMON_KEYS)
              + ") and its own; a configuration that sets a key its study does not read is "
              "refused when it is read, naming the key:"), "", "| study | its own keys |",
              "|---|---|"]  # fmt: skip
    for kind in all_studies():
        own = "any" if kind.keys is None else ", ".join(f"`{k}`" for k in kind.keys)
        lines.append(f"| `{kind.name}` | {own} |")
    lines += ["", ("A rule's table (`[selector]`, `[[rules]]`) holds `rule`, `label` and the "
              "parameters of the rule's class:"), "", "| rule | class | parameters | compiled |",
              "|---|---|---|---|"]  # fmt: skip
    for info in all_rules():
        params = ", ".join(f"`{k}`" for k in info.parameters())
        lines.append(f"| `{info.name}` | `{info.cls.__name__}` | {params} | "
                     f"{'yes' if info.compiled else 'no'} |")  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_cli_reference(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    parser = build_parser()
    out = ["# Command line", "", ("Generated from the `eegrad` command's parser when the site is "
           "built."), "", "```text", parser.format_help().rstrip(), "```", ""]  # fmt: skip
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        out += [f"## `eegrad {name}`", "", "```text", p.format_help().rstrip(), "```", ""]
    path.write_text("\n".join(out), encoding="utf-8")


#: The API reference's sections: (title, module). Each public name (its module's ``__all__``)
#: is documented once, under the first module that exports it, in this order.
API_SECTIONS = [
    ("Costs, budgets and arms", "eegrad.costs"),
    ("Objectives", "eegrad.objectives"),
    ("Mini-batch oracles", "eegrad.oracle"),
    ("Selection rules", "eegrad.selectors"),
    ("What a rule is told", "eegrad.selectors.evidence"),
    ("A rule's model", "eegrad.selectors.model_rule"),
    ("The noise of every n", "eegrad.selectors.noise_model"),
    ("The progress of a round", "eegrad.selectors.progress_model"),
    ("The fitted models of progress", "eegrad.selectors.progress"),
    ("The noise's fit from the spread", "eegrad.selectors.spread_fit"),
    ("The signal's curve", "eegrad.selectors.signal_curve"),
    ("The fits of progress", "eegrad.selectors.progress_fits"),
    ("Checking a rule", "eegrad.testing"),
    ("Estimates and SGD", "eegrad"),
    ("Your own training loop", "eegrad.loop"),
    ("PyTorch adapter", "eegrad.torch"),
    ("Parts of a pull (federated, data-parallel)", "eegrad.spread"),
    ("Parts told one at a time", "eegrad.parts"),
    ("Checkpoints", "eegrad.checkpoint"),
    ("Flower", "eegrad.flower"),
    ("Theory: the paper's bounds and closed forms", "eegrad.theory"),
    ("Estimators", "eegrad.estimators"),
    ("Configurations", "eegrad.config"),
    ("Experiments", "eegrad.experiment"),
    ("Studies", "eegrad.studies"),
    ("Sweeps", "eegrad.sweep"),
    ("Results, figures and the report", "eegrad.results"),
    ("Figures", "eegrad.plots"),
    ("Report", "eegrad.report"),
]
SKIP = {"__version__", "MergeSpec", "EXECUTORS", "DEFAULT_RULE"}


def write_api_reference(path: Path) -> None:
    import importlib

    seen: set[int] = set()
    out = ["API reference", "=============", "",
           "Every public name, generated from its docstring.", ""]  # fmt: skip
    for title, modname in API_SECTIONS:
        mod = importlib.import_module(modname)
        names = []
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if name in SKIP or id(obj) in seen:
                continue
            seen.add(id(obj))
            names.append(name)
        if not names:
            continue
        out += [title, "-" * len(title), "", f".. currentmodule:: {modname}", "",
                ".. autosummary::", "   :toctree: generated/", ""]  # fmt: skip
        out += [f"   {n}" for n in names] + [""]
    path.write_text("\n".join(out), encoding="utf-8")


def figure_scraper(block, block_vars, gallery_conf):
    """Save the Matplotlib ``Figure`` objects an example holds (eegrad draws with the object API,
    not pyplot, so the default scraper does not see them), once each."""
    from matplotlib.figure import Figure
    from sphinx_gallery.scrapers import figure_rst

    paths = []
    for value in list(block_vars["example_globals"].values()):
        if isinstance(value, Figure) and not getattr(value, "_gallery_saved", False):
            path = next(block_vars["image_path_iterator"])
            value.savefig(path, dpi=110, bbox_inches="tight")
            value._gallery_saved = True
            paths.append(path)
    return figure_rst(paths, gallery_conf["src_dir"])
