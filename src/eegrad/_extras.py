"""Optional parts of the package and the error that names the extra installing them.

The library proper (costs, arms, oracles, selectors, engines, a user's loop, Flower) needs only
NumPy and SciPy. Plotting, progress bars, sweeps and report rendering — what the command line and
the studies' figures use — come with the ``cli`` extra (``pip install "eegrad[cli]"``).
"""

from __future__ import annotations

import importlib

__all__ = ["CLI_MODULES", "missing_extra", "require_cli"]

#: The modules the ``cli`` extra installs: Matplotlib, tqdm, joblib, markdown-it-py.
CLI_MODULES = ("matplotlib", "tqdm", "joblib", "markdown_it")


def missing_extra(exc: ImportError, what: str, extra: str = "cli") -> ModuleNotFoundError:
    """The error for ``what`` when an optional module is missing: it names the module and the
    extra that installs it."""
    name = getattr(exc, "name", None) or str(exc)
    return ModuleNotFoundError(
        f"{what} needs {name.split('.')[0]}, which eegrad's core does not install: install the "
        f"'{extra}' extra, pip install \"eegrad[{extra}]\".", name=name)  # fmt: skip


def require_cli(what: str = "eegrad's command line") -> None:
    """Raise :func:`missing_extra`'s error if a module of the ``cli`` extra is missing."""
    for module in CLI_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise missing_extra(exc, what) from exc
