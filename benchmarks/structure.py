"""How the strategy and the rules read, measured from the code, beside Flower's FedAvg and one
Optax transformation.

For each class (or Optax's function and its state): its lines (with and without docstrings
and comments), constructor parameters, methods, ``if`` statements and those that test a mode
(an ``if`` whose test names one of the class's mode attributes). Then one federated round is
traced: the files of eegrad whose frames are on the stack where a reply is folded and where
the rule is told, and the rule's methods called to tell it a round::

    python benchmarks/structure.py [--optax PATH_TO_optax/_src/transform.py]

(``pip download optax --no-deps`` and unzip the wheel for the Optax file; without it that row
is left out.)
"""

from __future__ import annotations

import argparse
import ast
import inspect
import io
import sys
import tokenize
from pathlib import Path
from typing import Any

#: The attributes whose tests are a mode's, per class (the strategy's nine modes; a rule's
#: objective and capability flags).
MODES = {
    "EEGradStrategy": ("total_budget", "budget", "privacy", "secure_sums", "steps", "schedule",
                       "strategy", "aggregator", "inner", "damp_exploration", "checkpoint",
                       "csv_path", "release", "budgeting", "evaluate", "on_round", "T"),
    "rule": ("objective", "uses_parts", "uses_signal", "uses_costs", "uses_rounds_left",
             "uses_weighted_spread", "reads", "_mode"),
}


def _code_lines(source: str) -> int:
    """Lines that hold code: no blank line, comment or docstring."""
    tree = ast.parse(source)
    doc = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef | ast.Module):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    getattr(body[0], "value", None), ast.Constant) and isinstance(
                    body[0].value.value, str):  # fmt: skip
                doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):  # fmt: skip
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc)


def measure(label: str, source: str, modes: tuple[str, ...]) -> dict[str, Any]:
    """The row of one class (or a function with its state) given its source."""
    tree = ast.parse(source)
    top = tree.body[0]
    params, methods = 0, 0
    init = None
    if isinstance(top, ast.ClassDef):
        funcs = [n for n in top.body if isinstance(n, ast.FunctionDef)]
        methods = len(funcs)
        init = next((f for f in funcs if f.name == "__init__"), None)
    elif isinstance(top, ast.FunctionDef):
        init = top
        methods = sum(isinstance(n, ast.FunctionDef) for n in ast.walk(top)) - 1
    if init is not None:
        a = init.args
        params = len(a.args) + len(a.kwonlyargs) - (1 if isinstance(top, ast.ClassDef) else 0)
    ifs = [n for n in ast.walk(tree) if isinstance(n, ast.If | ast.IfExp)]
    mode_ifs = 0
    for n in ifs:
        names = {x.attr for x in ast.walk(n.test) if isinstance(x, ast.Attribute)}
        names |= {x.id for x in ast.walk(n.test) if isinstance(x, ast.Name)}
        mode_ifs += bool(names & set(modes))
    return {"class": label, "lines": len(source.splitlines()), "code lines": _code_lines(source),
            "constructor parameters": params, "methods": methods, "ifs": len(ifs),
            "ifs that test a mode": mode_ifs}  # fmt: skip


def _source(obj: Any) -> str:
    import textwrap

    return textwrap.dedent(inspect.getsource(obj))


def rows(optax: Path | None) -> list[dict[str, Any]]:
    from flwr.serverapp.strategy import FedAvg

    import eegrad.flower as fl
    import eegrad.selectors as sel

    out = [measure("Flower FedAvg", _source(FedAvg), ("fraction_train", "fraction_evaluate",
                                                      "weighted_by_key"))]  # fmt: skip
    if optax is not None and optax.exists():
        text = optax.read_text()
        tree = ast.parse(text)
        lines = text.splitlines()
        parts = [n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)
                 and n.name in ("ScaleByAdamState", "scale_by_adam")]  # fmt: skip
        src = "\n".join("\n".join(lines[n.lineno - 1 - len(n.decorator_list):n.end_lineno])
                        for n in sorted(parts, key=lambda n: n.name != "scale_by_adam"))  # fmt: skip
        out.append(measure("Optax scale_by_adam (+ its state)", src, ()))
    out.append(measure("EEGradStrategy (the keywords' factory)", _source(fl.EEGradStrategy),
                       MODES["EEGradStrategy"]))  # fmt: skip
    from eegrad.flower import round_loop

    out.append(measure("RoundLoop (the rounds over the parts)", _source(round_loop.RoundLoop),
                       MODES["EEGradStrategy"]))  # fmt: skip
    driver = getattr(fl, "driver", None)
    if driver is not None and hasattr(driver, "RuleDriver"):
        out.append(measure("RuleDriver", _source(driver.RuleDriver), MODES["rule"]))
    from eegrad.selectors import (
        model_rule,
        noise_model,
        progress,
        progress_model,
        signal_curve,
        spread_fit,
    )

    modules = (progress, progress_model, noise_model, model_rule, signal_curve, spread_fit, sel)
    for name in ("ProgressModel", "NoiseModel", "ModelRule", "SignalCurve", "ProgressThompson",
                 "BudgetThompson", "SpreadThompson", "SpreadFit", "EEGrad", "FixedArm",
                 "Selector"):  # fmt: skip
        cls = next((getattr(m, name) for m in modules if hasattr(m, name)), None)
        if cls is not None:
            out.append(measure(name, _source(cls), MODES["rule"]))
    return out


def trace_round() -> dict[str, Any]:
    """One round of the default strategy on a LocalGrid, traced: the eegrad files on the stack
    where a reply is folded (``RoundFold.add``) and where the rule is told (a rule's method whose
    name starts with ``tell``), and those methods of the rule."""
    import numpy as np
    from flwr.app import Array, ArrayRecord, ConfigRecord
    from flwr.clientapp import ClientApp

    from eegrad.flower import DeviceCost, EEGradStrategy, LocalGrid, budgeted_train
    from eegrad.selectors.base import Selector

    K, d = 6, 4
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((K, d))

    def gradient(arrays, b, context, config):
        pid = int(context.node_config["partition-id"])
        return [arrays[0] - centres[pid] + rng.standard_normal(d) / np.sqrt(b)]

    app = ClientApp()
    app.train()(budgeted_train(gradient, lambda ctx, cfg: DeviceCost(1.0, 2.0), lr=0.1))
    strategy = EEGradStrategy(budget=20.0, c_min=1.0, aggregation=lambda n: 0.1 * (n - 1),
                              rng=0, fraction_evaluate=0.0)  # fmt: skip
    src = Path(__import__("eegrad").__file__).parent
    files: set[str] = set()
    told: set[str] = set()

    def on_call(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        self = frame.f_locals.get("self")
        folded = code.co_name == "add" and type(self).__name__.endswith("Fold")
        telling = isinstance(self, Selector) and code.co_name.startswith("tell")
        if not (folded or telling):
            return
        f = frame
        stack = []
        while f is not None:
            path = Path(f.f_code.co_filename)
            if src in path.parents:
                stack.append(str(path.relative_to(src.parent)))
            f = f.f_back
        files.update(stack)
        if telling:
            told.add(code.co_name)

    sys.setprofile(on_call)
    try:
        strategy.start(grid=LocalGrid(app, K, seed=1), initial_arrays=ArrayRecord(
            {"w": Array(np.zeros(d))}), num_rounds=3,
            train_config=ConfigRecord({}))  # fmt: skip
    finally:
        sys.setprofile(None)
    return {"files": sorted(files), "the rule's tell methods called": sorted(told)}


def path_of_one_round() -> dict[str, list[tuple[int, str]]]:
    """The second round of ``choose_clients(FedAvg(fraction_train=0.5))`` on a LocalGrid of six
    nodes whose clients are Flower's own (a ClientApp of no eegrad), profiled: every function
    of eegrad called from its ``configure_train`` to the end of its ``aggregate_train``, by
    file (the grid's own functions left out: they stand for Flower's SuperLink), each as (its
    first line, its qualified name)."""
    import numpy as np
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp.strategy import FedAvg

    from eegrad.flower import LocalGrid, choose_clients

    app = ClientApp()

    @app.train()
    def train(msg: Any, context: Any) -> Any:  # a client of Flower's own
        w = msg.content["arrays"]["w"].numpy()
        pid = int(context.node_config["partition-id"])
        w = w - 0.1 * (w - pid)
        return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w)}), "metrics":
                                   MetricRecord({"num-examples": 10, "train_loss": 1.0})}),
                       reply_to=msg)  # fmt: skip

    strategy = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0), rng=0)
    src = Path(__import__("eegrad").__file__).parent
    grid_file = str(src / "flower" / "grid.py")
    called: dict[str, set[tuple[int, str]]] = {}
    inside = [False]

    def on_call(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not inside[0]:
            return
        code = frame.f_code
        path = Path(code.co_filename)
        if src not in path.parents or code.co_filename == grid_file:
            return
        name = getattr(code, "co_qualname", code.co_name)
        called.setdefault(str(path.relative_to(src.parent)), set()).add(
            (code.co_firstlineno, name))

    configure, aggregate = strategy.configure_train, strategy.aggregate_train

    def configure_train(server_round: int, *a: Any, **kw: Any) -> Any:
        inside[0] = server_round == 2
        return configure(server_round, *a, **kw)

    def aggregate_train(server_round: int, *a: Any, **kw: Any) -> Any:
        try:
            return aggregate(server_round, *a, **kw)
        finally:
            inside[0] = False

    strategy.configure_train, strategy.aggregate_train = configure_train, aggregate_train
    sys.setprofile(on_call)
    try:
        strategy.start(grid=LocalGrid(app, 6, seed=1), num_rounds=3,
                       initial_arrays=ArrayRecord({"w": Array(np.zeros(4))}))  # fmt: skip
    finally:
        sys.setprofile(None)
    return {f: sorted(v) for f, v in sorted(called.items())}


def path_table(path: dict[str, list[tuple[int, str]]]) -> list[str]:
    """:func:`path_of_one_round` as a Markdown table: a file, its lines, the functions."""
    src = Path(__import__("eegrad").__file__).parent.parent
    total = sum(len(v) for v in path.values())
    lines = [f"One round executes {total} functions of eegrad in {len(path)} files:", "",
             "| file | its lines | functions called (first line) |", "|---|---|---|"]
    for f, functions in path.items():
        size = len((src / f).read_text().splitlines())
        names = ", ".join(f"`{name}` ({line})" for line, name in functions)
        lines.append(f"| `{f}` | {size} | {names} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--optax", type=Path, default=None,
                    help="optax/_src/transform.py of an unpacked Optax wheel")  # fmt: skip
    ap.add_argument("--path", action="store_true",
                    help="only the path of one round, as docs/architecture.md shows it")
    args = ap.parse_args(argv)
    import logging

    for logger in (logging.getLogger("flwr"), *logging.getLogger("flwr").handlers):
        logger.setLevel(logging.ERROR)
    if args.path:
        print("\n".join(path_table(path_of_one_round())))
        return
    table = rows(args.optax)
    keys = list(table[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in table:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
    traced = trace_round()
    print()
    print(f"files on the stack where a reply is folded and where the rule is told "
          f"({len(traced['files'])}): {', '.join(traced['files'])}")
    told = traced["the rule's tell methods called"]
    print(f"the rule's tell methods called in a round ({len(told)}): {', '.join(told)}")


if __name__ == "__main__":
    main()
