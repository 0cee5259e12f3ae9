"""The rule registry: one entry per selection rule, read by configurations, the CLI, figures and
the engines.

A rule registers itself where it is defined::

    @register_rule("kl_lcb", label="kl-LCB")
    class KLLCB(IndexSelector): ...

and is then known everywhere: ``{rule = "kl_lcb", loglog = 0.5}`` in a configuration file (its
parameters checked by the class's own constructor), ``--rule kl_lcb`` or ``--rule KLLCB`` on the
command line, its label in figures, whether the compiled engine runs it, and the common tests
that every registered rule passes (``tests/test_rule_contract.py``). A new rule is one module:
the registry imports every module of :mod:`eegrad.selectors` on its first use, so a module placed
in the package is found without a list to edit (its class is exported under
``eegrad.selectors.<module>``; add it to the package's ``__all__`` to export it at the top).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._discover import import_package_modules
from .._validation import InvalidParameterError, InvalidParameterTypeError
from .base import Selector, has_kernel

__all__ = [
    "RuleInfo",
    "all_rules",
    "make_rule",
    "register_rule",
    "rule_info",
    "rule_names",
    "unregister_rule",
]


@dataclass(frozen=True)
class RuleInfo:
    """What the package knows of one selection rule.

    Attributes
    ----------
    name : str
        The rule's name in configurations and on the command line (``"memory_thompson"``).
    cls : type
        The :class:`~eegrad.selectors.Selector` subclass.
    label : str
        Its name in figures and reports.
    example : dict
        Parameters that make a working instance for tests and documentation (the required ones,
        and numbers for constants that the simulator would otherwise supply).
    """

    name: str
    cls: type[Selector]
    label: str
    example: dict[str, Any] = field(default_factory=dict)

    @property
    def compiled(self) -> bool:
        """Whether the compiled engine runs it: the class defines its own compiled index
        (``eegrad.selectors.base.has_kernel``; otherwise the NumPy engine runs it, with
        :class:`~eegrad.engines.EngineFallbackWarning` where ``engine="numba"`` was asked for)."""
        return has_kernel(self.cls)

    @property
    def simulated(self) -> bool:
        """Whether the simulator runs it: it learns from whole pulls, not from the parts of a
        pull (``"spread"`` in its :attr:`~eegrad.Selector.reads`), which only a federated or
        data-parallel loop produces (:meth:`eegrad.GradientEstimator.tell_parts`,
        :mod:`eegrad.flower`)."""
        return "spread" not in self.cls.reads

    def parameters(self) -> dict[str, inspect.Parameter]:
        """The constructor's parameters, by name."""
        sig = inspect.signature(self.cls.__init__)
        return {k: p for k, p in sig.parameters.items() if k != "self"
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}  # fmt: skip

    def required(self) -> list[str]:
        """Parameters without a default."""
        return [k for k, p in self.parameters().items() if p.default is inspect.Parameter.empty]


_RULES: dict[str, RuleInfo] = {}


def _discover() -> dict[str, RuleInfo]:
    """The registry, after every module of the selectors package has been imported."""
    import_package_modules(__package__)
    return _RULES


def register_rule(name: str, *, label: str,
                  example: Mapping[str, Any] | None = None) -> Callable[[type], type]:  # fmt: skip
    """Class decorator: register a selector class under ``name`` (see :class:`RuleInfo`)."""

    def decorate(cls: type) -> type:
        if not (isinstance(cls, type) and issubclass(cls, Selector)):
            raise InvalidParameterTypeError(f"register_rule({name!r}) decorates a Selector "
                                            f"subclass. Got {cls!r} instead.")  # fmt: skip
        taken = _RULES.get(name)
        if taken is not None and taken.cls is not cls:
            raise InvalidParameterError(f"The rule name {name!r} is taken by "
                                        f"{taken.cls.__name__}.")  # fmt: skip
        _RULES[name] = RuleInfo(name, cls, label, dict(example or {}))
        cls.rule_name = name
        return cls

    return decorate


def unregister_rule(name: str) -> None:
    """Remove a registered rule (for tests that register toy rules)."""
    info = _RULES.pop(name, None)
    if info is not None and info.cls.__dict__.get("rule_name") == name:
        del info.cls.rule_name


def all_rules() -> tuple[RuleInfo, ...]:
    """Every registered rule, in registration order."""
    return tuple(_discover().values())


def rule_names() -> tuple[str, ...]:
    """The registered rules' names."""
    return tuple(_discover())


def rule_info(rule: str | type) -> RuleInfo:
    """The registry entry of a rule, by name, class name (``"MemoryKLLCB"``) or class."""
    for info in _discover().values():
        if rule in (info.name, info.cls, info.cls.__name__):
            return info
    known = ", ".join(f"{i.name} ({i.cls.__name__})" for i in _RULES.values())
    raise InvalidParameterError(f"The 'rule' parameter must be a registered rule: {known}. "
                                f"Got {rule!r} instead.")  # fmt: skip


def make_rule(rule: str | type, **params: Any) -> Selector:
    """Build a registered rule from its name and parameters, checked by the class itself.

    Examples
    --------
    >>> from eegrad.selectors import make_rule
    >>> make_rule("memory_thompson", window=32)
    MemoryThompson(shape='auto', discount=1.0, window=32, seed=0)
    """
    info = rule_info(rule)
    accepted = info.parameters()
    for key in params:
        if key not in accepted:
            raise InvalidParameterError(
                f"Rule {info.name!r} ({info.cls.__name__}) has no parameter {key!r}. Expected "
                f"one of: {', '.join(accepted) or 'none'}."
            )
    missing = [k for k in info.required() if k not in params]
    if missing:
        raise InvalidParameterError(
            f"Rule {info.name!r} ({info.cls.__name__}) needs the parameter {missing[0]!r}."
        )
    return info.cls(**params)
