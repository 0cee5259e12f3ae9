"""What made a bench run: the code of its method and the code of the harness, as fingerprints.

A run of the bench is keyed by its setting, seed, rate, the harness's version and its method's
code (:func:`~eegrad.bench.runner.describe`), so that a changed rule reruns and nothing else
does. The code is split in two by :data:`PLUMBING`:

* **A method's code** (:func:`method_code`): the source of every module of ``eegrad`` that the
  method's own modules import, directly or through others, leaving out the plumbing — read from
  the files, so that any edit to the rule, its models and fits, or the shared estimators it
  reads changes it, with nothing to remember.
* **The harness's code** (:func:`harness_code`): what the runner imports that is no method's
  code (the Flower strategy that drives every method, the data, models and clients of the
  bench, validation, and any module only the plumbing reaches).
  A run is keyed by its declared version, :data:`~eegrad.bench.runner.HARNESS`, and a test holds
  the fingerprint recorded for that version (``tests/data/bench_harness.json``): an edit to the
  harness fails it until the version is bumped (what a run computes changed: every run reruns)
  or the new fingerprint recorded beside the same version (it did not, as
  ``benchmarks/equal_runs.py --compare`` shows; ``benchmarks/equal_runs.py --record-harness``
  writes the record).

The imports are read from each module's syntax tree (top-level and deferred alike); a package's
``__init__`` counts only where it is imported itself.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

__all__ = [
    "PLUMBING",
    "closure",
    "code_fingerprint",
    "harness_code",
    "harness_modules",
    "imports_of",
    "is_plumbing",
    "method_code",
    "method_modules",
    "recorded_harness",
]  # fmt: skip

#: The modules (and packages, with every module under them) that are the harness, not any
#: method's code.
PLUMBING = ("eegrad", "eegrad._validation", "eegrad._discover", "eegrad._random",
            "eegrad._extras", "eegrad.results", "eegrad.checkpoint", "eegrad.recorder",
            "eegrad.flower", "eegrad.examples", "eegrad.bench", "eegrad.bench.runner",
            "eegrad.bench.data", "eegrad.bench.models", "eegrad.bench.settings",
            "eegrad.bench.report", "eegrad.bench.store", "eegrad.bench.fingerprint",
            "eegrad.bench.tuning")  # fmt: skip
#: Packages of rules: a method's code where it reaches them, never the harness's.
_RULE_PACKAGES = ("eegrad.selectors.", "eegrad.engines")
#: Packages whose every module is plumbing.
_PLUMBING_PACKAGES = ("eegrad.flower.", "eegrad.examples.")


def is_plumbing(module: str) -> bool:
    """Whether ``module`` is part of the harness (:data:`PLUMBING`)."""
    return module in PLUMBING or module.startswith(_PLUMBING_PACKAGES)


@cache
def _source(module: str) -> Path | None:
    """The source file of an ``eegrad`` module, or None where it is not one."""
    if module != "eegrad" and not module.startswith("eegrad."):
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


@cache
def imports_of(module: str) -> frozenset[str]:
    """The ``eegrad`` modules ``module`` imports anywhere in its source (``from a import b``
    counts ``a.b`` where that is a module, else ``a``)."""
    path = _source(module)
    if path is None:
        return frozenset()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if _source(sub) is not None else base)
    return frozenset(m for m in found if _source(m) is not None)


def closure(roots: Iterable[str], descend: Callable[[str], bool]) -> list[str]:
    """The modules reached from ``roots`` through their imports, entering only those for
    which ``descend`` holds (the roots always), sorted."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(i for i in imports_of(m) if i not in seen and descend(i))
    return sorted(seen)


def code_fingerprint(modules: Iterable[str], extra: str = "") -> str:
    """The SHA-256 of the modules' names and sources (and ``extra``), a hex string of 16."""
    h = hashlib.sha256()
    for m in sorted(modules):
        path = _source(m)
        h.update(m.encode() + b"\0")
        h.update(path.read_bytes() if path is not None else b"")
        h.update(b"\0")
    h.update(extra.encode())
    return h.hexdigest()[:16]


def method_code(modules: Iterable[str], extra: str = "") -> str:
    """A method's code (the module's notes): the fingerprint of the modules ``modules`` and
    every non-plumbing module they reach, with ``extra`` (the source of what sets its
    parameters inside the harness, where something does)."""
    return code_fingerprint(method_modules(modules), extra)


def method_modules(roots: Iterable[str]) -> list[str]:
    """The modules of a method's code: ``roots`` and the non-plumbing modules they reach."""
    return closure(roots, lambda m: not is_plumbing(m))


def harness_modules(method_roots: Iterable[Iterable[str]]) -> list[str]:
    """The modules of the harness's code: those the runner reaches without entering any
    method's (``method_roots``: each method's roots) or a rule's package."""
    methods = {m for roots in method_roots for m in method_modules(roots)}
    return closure(["eegrad.bench.runner"], lambda m: m not in methods and not (
        m == "eegrad.selectors" or m.startswith(_RULE_PACKAGES)))


def harness_code(method_roots: Iterable[Iterable[str]]) -> str:
    """The harness's code (the module's notes)."""
    return code_fingerprint(harness_modules(method_roots))


def recorded_harness() -> dict[str, object]:
    """What ``tests/data/bench_harness.json`` records: the harness's version
    (:data:`~eegrad.bench.runner.HARNESS`) and the fingerprint of its code, the methods being
    those the bench runs, in both modes."""
    from . import runner

    roots = [runner.method_roots(m, mode)[0] for m in ("guess", "isp", "default", "noise-scale")
             for mode in ("total", "round")]  # fmt: skip
    return {"harness": runner.HARNESS, "fingerprint": harness_code(roots)}
