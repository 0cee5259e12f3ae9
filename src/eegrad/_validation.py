"""Validation at the public boundary: one error type, one message template.

Every message names the parameter, its owner, the rule and the value received, e.g.
``The 'alpha' parameter of EEGrad must be a float > 2 (eq. pickOracle). Got 2.0 instead.``
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "InvalidParameterError",
    "InvalidParameterTypeError",
    "NonFiniteGradientError",
    "check_array",
    "check_client_counts",
    "check_integer",
    "check_real",
]


class InvalidParameterError(ValueError):
    """A parameter's value breaks a documented rule."""


class InvalidParameterTypeError(TypeError):
    """A parameter has the wrong type."""


class NonFiniteGradientError(InvalidParameterError):
    """An oracle returned a gradient containing NaN or Inf."""


def _message(name: str, owner: str, rule: str, value: Any) -> str:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"The {name!r} parameter of {owner} must be {rule}. Got {shown} instead."


def fail(name: str, owner: str, rule: str, value: Any) -> InvalidParameterError:
    """Build (not raise) the standard error for a broken rule."""
    return InvalidParameterError(_message(name, owner, rule, value))


def check_real(
    value: Any,
    name: str,
    owner: str,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    ref: str = "",
) -> float:
    """Return ``value`` as a finite float obeying the given bounds, else raise.

    ``ref`` (e.g. ``"eq. pickOracle"``) is appended to the rule in the message.
    """
    parts = []
    if gt is not None:
        parts.append(f"> {gt:g}")
    if ge is not None:
        parts.append(f">= {ge:g}")
    if lt is not None:
        parts.append(f"< {lt:g}")
    if le is not None:
        parts.append(f"<= {le:g}")
    rule = "a finite float" + (" " + " and ".join(parts) if parts else "")
    if ref:
        rule += f" ({ref})"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(_message(name, owner, rule, value))
    x = float(value)
    ok = np.isfinite(x)
    ok = ok and (gt is None or x > gt) and (ge is None or x >= ge)
    ok = ok and (lt is None or x < lt) and (le is None or x <= le)
    if not ok:
        raise fail(name, owner, rule, value)
    return x


def check_integer(
    value: Any, name: str, owner: str, *, ge: int | None = None, ref: str = ""
) -> int:
    """Return ``value`` as an ``int`` (no silent truncation of floats), else raise."""
    rule = "an integer" + (f" >= {ge}" if ge is not None else "")
    if ref:
        rule += f" ({ref})"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidParameterTypeError(_message(name, owner, rule, value))
    x = int(value)
    if ge is not None and x < ge:
        raise fail(name, owner, rule, value)
    return x


def check_client_counts(value: Any, name: str, owner: str, *,
                        most: int | None = None) -> tuple[int, ...]:  # fmt: skip
    """Return ``value``, a sequence of numbers of clients (integers >= 1, each <= ``most``
    where given: the arms 1..N), as a tuple, else raise (a type error for a value that is no
    sequence). An empty sequence passes: the caller says how many it needs."""
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        raise InvalidParameterTypeError(
            _message(name, owner, "a sequence of numbers of clients", value))
    out = tuple(check_integer(n, name, owner, ge=1) for n in value)
    if most is not None and out and max(out) > most:
        raise fail(name, owner, f"numbers of clients in 1..N = 1..{most}", list(out))
    return out


def check_array(
    value: Any,
    name: str,
    owner: str,
    *,
    ndim: int | None = None,
    shape: tuple[int | None, ...] | None = None,
    positive: bool = False,
    nonempty: bool = True,
) -> np.ndarray:
    """Return ``value`` as a finite float64 array of the required shape, else raise.

    ``shape`` may contain ``None`` for a free axis.
    """
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterTypeError(
            _message(name, owner, "an array of real numbers", value)
        ) from exc
    if ndim is not None and arr.ndim != ndim:
        raise fail(name, owner, f"a {ndim}-dimensional array (shape {arr.shape} given)", value)
    if shape is not None and (
        arr.ndim != len(shape)
        or any(s is not None and s != a for s, a in zip(shape, arr.shape, strict=True))
    ):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise fail(name, owner, f"an array of shape {want}, not {arr.shape}", value)
    if nonempty and arr.size == 0:
        raise fail(name, owner, "a non-empty array", value)
    if not np.all(np.isfinite(arr)):
        raise fail(name, owner, "an array of finite numbers (no NaN or Inf)", value)
    if positive and not np.all(arr > 0):
        raise fail(name, owner, "an array of positive numbers", value)
    return arr


def check_callable(value: Any, name: str, owner: str) -> Callable[..., Any]:
    """Return ``value`` if it is callable, else raise a ``TypeError``."""
    if not callable(value):
        raise InvalidParameterTypeError(_message(name, owner, "callable", value))
    return value


def renamed(new_value: Any, old_value: Any, new: str, old: str, owner: str, default: Any) -> Any:
    """The value of a renamed parameter: ``old`` still works, with a DeprecationWarning
    (given both, an error)."""
    import warnings

    if old_value is None:
        return new_value
    if new_value != default:
        raise InvalidParameterError(f"{owner} was given both {new!r} and its old name {old!r}: "
                                    f"give {new!r} only.")  # fmt: skip
    warnings.warn(f"The {old!r} parameter of {owner} is now {new!r} (one name, one meaning: "
                  f"{old!r} is reserved for the paper's symbol); {old!r} will be removed.",
                  DeprecationWarning, stacklevel=3)  # fmt: skip
    return old_value
