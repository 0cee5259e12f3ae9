"""Execution engines: ``"numpy"`` (always available, the readable reference) and ``"numba"``
(compiled, the ``fast`` extra). Both run the same rounds on the same random streams."""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

from .._validation import fail
from .memory_glue import attach

attach()  # the rules with memory get their compiled fit and choice from this side

__all__ = ["ENGINES", "EngineFallbackWarning", "check_engine", "numba_available", "resolve_engine"]

ENGINES = ("auto", "numpy", "numba")


class EngineFallbackWarning(UserWarning):
    """The compiled engine was asked for a case it does not support; NumPy ran it instead."""


def numba_available() -> bool:
    """Whether Numba is installed (the ``fast`` extra)."""
    return importlib.util.find_spec("numba") is not None


def check_engine(engine: Any, owner: str) -> str:
    """``engine``, if it is one of :data:`ENGINES` and, for ``"numba"``, Numba is installed;
    else the standard error naming ``owner``."""
    if engine not in ENGINES:
        raise fail("engine", owner, f"one of {ENGINES}", engine)
    if engine == "numba" and not numba_available():
        raise fail("engine", owner, "'numba' only with Numba installed (pip install "
                   "'eegrad[fast]')", engine)  # fmt: skip
    return engine


def resolve_engine(engine: Any, at: Any, selector: Any, owner: str) -> str:
    """The engine that runs this estimate: ``"numpy"`` or ``"numba"``.

    ``"auto"`` takes Numba when it is installed and supports the oracle and selector, else
    NumPy. An explicit ``"numba"`` that cannot run the case falls back to NumPy with an
    :class:`EngineFallbackWarning` naming why — never a silently different computation.
    """
    if check_engine(engine, owner) == "numpy" or not numba_available():
        return "numpy"
    from .numba_engine import unsupported_reason

    why = unsupported_reason(at, selector)
    if why is None:
        return "numba"
    if engine == "numba":
        warnings.warn(f"engine 'numba' does not support {why}; running on NumPy",
                      EngineFallbackWarning, stacklevel=3)  # fmt: skip
    return "numpy"
