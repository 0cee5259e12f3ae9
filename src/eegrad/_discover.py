"""Registration by discovery: import every module of a package once, so that the modules that
register something (a rule, a study) are found with no list to edit."""

from __future__ import annotations

import importlib
import pkgutil
import sys

__all__ = ["import_package_modules"]

_walked: dict[str, tuple[str, ...]] = {}


def import_package_modules(package: str) -> None:
    """Import every module of ``package`` (an imported package); the folders walked are
    remembered, so the walk is repeated only when the package's ``__path__`` changes."""
    path = tuple(sys.modules[package].__path__)
    if _walked.get(package) == path:
        return
    for info in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{info.name}")
    _walked[package] = path
