"""Checkpoints: the state of a run in one ``.npz`` file, without pickle.

A checkpoint holds a JSON tree (member ``state.json``, a 0-d unicode array) and the NumPy arrays
it refers to (members ``a0``, ``a1``, …). :func:`capture_state` turns an object's attributes into
that tree — numbers, strings, lists, dicts, slices, NumPy arrays and scalars, PyTorch tensors,
``numpy.random.Generator`` (its bit generator's state and its seed sequence, so that later
spawns are the same) and, recursively, other objects' attributes; functions and modules are not
state and are left as they are. :func:`restore_state` writes such a tree back into an object
built the same way (the same classes, constructed with the same configuration): arrays in place
where the object already has one of that shape and dtype (so that views and shared arrays stay
shared; an array of another dtype than the object's is refused, one of another shape is taken
as saved, for arrays that grow with a run), generators in place; an object with a ``_before_restore(fields)`` method is first
asked to build what it makes lazily (so that it is restored in place too). An object whose
saved fields lack one the object holds (a layout another version wrote) is refused, naming it,
rather than restored with that part as the fresh object made it. Objects are created without
their constructor only for eegrad's own classes, found by name in the package: a checkpoint
never runs code it names.

:func:`write_checkpoint` replaces the file atomically (a temporary file, then a rename), so an
interrupted write leaves the previous checkpoint intact; :func:`read_checkpoint` loads with
``allow_pickle=False``.
"""

from __future__ import annotations

import importlib
import json
import types
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ._validation import InvalidParameterError
from .parts import is_torch
from .results import atomic_write

__all__ = ["CheckpointError", "capture_state", "read_checkpoint", "restore_state",
           "write_checkpoint"]  # fmt: skip

FORMAT = "eegrad-checkpoint"
VERSION = 1


class CheckpointError(InvalidParameterError):
    """A checkpoint that cannot be used here: unreadable, of another format, or of another
    run (the message names what differs)."""


def _qualname(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


class _Capture:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.seen: dict[int, str] = {}

    def array(self, a: np.ndarray) -> str:
        key = self.seen.get(id(a))
        if key is None:
            if a.dtype.hasobject:
                raise CheckpointError(f"An object array cannot be checkpointed: {a!r:.80}")
            key = f"a{len(self.arrays)}"
            self.arrays[key] = np.ascontiguousarray(a)
            self.seen[id(a)] = key
        return key

    def value(self, x: Any) -> Any:
        if x is None or isinstance(x, bool | int | float | str):
            return x
        if isinstance(x, np.ndarray):
            return {"__array__": self.array(x)}
        if isinstance(x, np.generic):
            return {"__scalar__": x.dtype.str, "value": x.item()}
        if isinstance(x, np.dtype):
            return {"__dtype__": x.str}
        if is_torch(x) and hasattr(x, "detach"):
            return {"__tensor__": self.array(x.detach().cpu().numpy()), "device": str(x.device)}
        if isinstance(x, np.random.Generator):
            ss = x.bit_generator.seed_seq
            seq = None if not isinstance(ss, np.random.SeedSequence) else {
                "entropy": ss.entropy, "spawn_key": list(ss.spawn_key),
                "pool_size": ss.pool_size, "n_children_spawned": ss.n_children_spawned}  # fmt: skip
            return {"__generator__": type(x.bit_generator).__name__,
                    "state": x.bit_generator.state, "seed_seq": seq}  # fmt: skip
        if isinstance(x, slice):
            return {"__slice__": [x.start, x.stop, x.step]}
        if isinstance(x, list):
            return [self.value(v) for v in x]
        if isinstance(x, tuple):
            return {"__tuple__": [self.value(v) for v in x]}
        if isinstance(x, frozenset) and all(isinstance(v, str) for v in x):
            return {"__frozenset__": sorted(x)}  # e.g. what a rule reads
        if isinstance(x, dict):
            if all(isinstance(k, str) for k in x):
                return {"__dict__": {k: self.value(v) for k, v in x.items()}}
            return {"__items__": [[self.value(k), self.value(v)] for k, v in x.items()]}
        if isinstance(x, types.FunctionType | types.BuiltinFunctionType | types.ModuleType
                      | type) or type(x).__module__.split(".")[0] == "numba":  # fmt: skip
            return {"__transient__": True}  # code, not state: the fresh object's is kept
        if hasattr(x, "__dict__"):
            return {"__object__": _qualname(x),
                    "fields": {k: self.value(v) for k, v in vars(x).items()}}  # fmt: skip
        if _qualname(x).startswith("torch."):  # a dtype or device: its name
            return {"__torch__": str(x)}
        raise CheckpointError(f"A {type(x).__name__} cannot be checkpointed: {x!r:.80}")


def capture_state(obj: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """The JSON tree of ``obj``'s attributes and the arrays it refers to (an array referred
    to twice is stored once)."""
    cap = _Capture()
    return cap.value(obj), cap.arrays


def _generator(spec: dict[str, Any], fresh: Any) -> np.random.Generator:
    seq = spec["seed_seq"]
    if isinstance(fresh, np.random.Generator) and type(fresh.bit_generator).__name__ == \
            spec["__generator__"]:  # fmt: skip
        gen = fresh
        ss = gen.bit_generator.seed_seq
        if seq is not None and isinstance(ss, np.random.SeedSequence):
            behind = seq["n_children_spawned"] - ss.n_children_spawned
            if behind < 0 or ss.entropy != seq["entropy"] or list(ss.spawn_key) != \
                    seq["spawn_key"]:  # fmt: skip
                gen = None  # another seed: rebuilt below from the checkpoint's
            elif behind:
                ss.spawn(behind)  # the same children from now on
    else:
        gen = None
    if gen is None:
        bits = getattr(np.random, spec["__generator__"])
        ss = None if seq is None else np.random.SeedSequence(
            seq["entropy"], spawn_key=tuple(seq["spawn_key"]), pool_size=seq["pool_size"],
            n_children_spawned=seq["n_children_spawned"])  # fmt: skip
        gen = np.random.Generator(bits(ss))
    gen.bit_generator.state = spec["state"]
    return gen


class _Restore:
    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays
        self.made: dict[str, Any] = {}

    def array(self, key: str, fresh: Any, where: str = "") -> np.ndarray:
        if key in self.made:
            return self.made[key]
        if key not in self.arrays:
            raise CheckpointError(f"The checkpoint has no array {key!r} for {where}.")
        saved = self.arrays[key]
        if isinstance(fresh, np.ndarray) and fresh.dtype != saved.dtype:
            raise CheckpointError(f"The checkpoint holds {where} as {saved.dtype}, where this "
                                  f"run has {fresh.dtype}.")  # fmt: skip
        if (isinstance(fresh, np.ndarray) and fresh.shape == saved.shape
                and fresh.dtype == saved.dtype and fresh.flags.writeable):  # fmt: skip
            fresh[...] = saved
            out = fresh
        else:
            out = np.array(saved)
        self.made[key] = out
        return out

    def value(self, tree: Any, fresh: Any, where: str) -> Any:
        if tree is None or isinstance(tree, bool | int | float | str):
            return tree
        if isinstance(tree, list):
            old = fresh if isinstance(fresh, list) and len(fresh) == len(tree) else [None] * len(tree)
            return [self.value(t, f, f"{where}[{i}]") for i, (t, f) in enumerate(zip(tree, old,
                                                                                   strict=True))]  # fmt: skip
        if "__array__" in tree:
            return self.array(tree["__array__"], fresh, where)
        if "__scalar__" in tree:
            return np.dtype(tree["__scalar__"]).type(tree["value"])
        if "__dtype__" in tree:
            return np.dtype(tree["__dtype__"])
        if "__tensor__" in tree:
            import torch

            data = self.array(tree["__tensor__"], None)
            return torch.as_tensor(data, device=tree["device"])
        if "__torch__" in tree:
            return fresh  # a dtype or device: the fresh object's, checked by its configuration
        if "__generator__" in tree:
            return _generator(tree, fresh)
        if "__slice__" in tree:
            return slice(*tree["__slice__"])
        if "__frozenset__" in tree:
            return frozenset(tree["__frozenset__"])
        if "__tuple__" in tree:
            old = fresh if isinstance(fresh, tuple) and len(fresh) == len(tree["__tuple__"]) \
                else [None] * len(tree["__tuple__"])  # fmt: skip
            return tuple(self.value(t, f, where) for t, f in zip(tree["__tuple__"], old,
                                                                  strict=True))  # fmt: skip
        if "__dict__" in tree:
            old = fresh if isinstance(fresh, dict) else {}
            return {k: self.value(v, old.get(k), f"{where}[{k!r}]")
                    for k, v in tree["__dict__"].items()}  # fmt: skip
        if "__items__" in tree:
            return {self.value(k, None, where): self.value(v, None, where)
                    for k, v in tree["__items__"]}  # fmt: skip
        if "__transient__" in tree:
            return fresh
        if "__object__" in tree:
            return self.object(tree, fresh, where)
        raise CheckpointError(f"Unknown entry in the checkpoint at {where}: {tree!r:.80}")

    def object(self, tree: dict[str, Any], fresh: Any, where: str) -> Any:
        name = tree["__object__"]
        if fresh is not None and hasattr(fresh, "__dict__"):
            if _qualname(fresh) != name:
                raise CheckpointError(f"The checkpoint holds a {name.rsplit('.', 1)[-1]} at "
                                      f"{where}, where this run has a "
                                      f"{type(fresh).__name__}.")  # fmt: skip
            obj = fresh
        else:
            module, _, qual = name.rpartition(".")
            if module != "eegrad" and not module.startswith("eegrad."):
                raise CheckpointError(f"The checkpoint holds a {name} at {where}, which this "
                                      "run does not have; only eegrad's own classes are made "
                                      "from a checkpoint.")  # fmt: skip
            cls = importlib.import_module(module)
            for part in qual.split("."):
                cls = getattr(cls, part)
            obj = cls.__new__(cls)
        prepare = getattr(obj, "_before_restore", None)
        if callable(prepare):  # e.g. build the parts the fresh object makes lazily
            prepare(tree["fields"])
        current = vars(obj)
        if obj is fresh and (lacking := [k for k in current if k not in tree["fields"]]):
            # state the fresh object holds and the checkpoint does not: another layout (an
            # earlier version's), whose run would go on with that part started afresh
            raise CheckpointError(
                f"The checkpoint holds a {name.rsplit('.', 1)[-1]} at {where} without "
                f"{', '.join(repr(k) for k in lacking)}, which this run's has: it was written "
                "by another version of eegrad.")  # fmt: skip
        for k, v in tree["fields"].items():
            value = self.value(v, current.get(k), f"{where}.{k}")
            object.__setattr__(obj, k, value)
        return obj


def restore_state(obj: Any, tree: Any, arrays: dict[str, np.ndarray], where: str = "") -> Any:
    """Write the captured ``tree`` back into ``obj`` (in place where possible); returns the
    restored object (``obj`` itself for an object tree)."""
    return _Restore(arrays).value(tree, obj, where or type(obj).__name__)


def _why(err: BaseException) -> str:
    """What went wrong in reading, in words that suit a damaged file (NumPy's advice to load a
    file that looks pickled with ``allow_pickle`` is no advice for a checkpoint, which never
    holds a pickle)."""
    text = str(err)
    if "pickle" in text:
        return "its bytes are not those of an .npz archive; a checkpoint never holds a pickle"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def write_checkpoint(path: str | Path, tree: Any, arrays: dict[str, np.ndarray]) -> None:
    """Write ``tree`` (JSON) and ``arrays`` to ``path`` (``.npz``), replacing it atomically."""
    doc = json.dumps({"format": FORMAT, "version": VERSION, "state": tree}, allow_nan=True)
    members = {"state.json": np.array(doc), **arrays}

    def write(fh: Any) -> None:
        np.savez(fh, **members)

    atomic_write(path, write)


def read_checkpoint(path: str | Path) -> tuple[Any, dict[str, np.ndarray]]:
    """The tree and arrays of a checkpoint written by :func:`write_checkpoint`."""
    path = Path(path)
    try:  # the file opened here, so that it is closed whatever NumPy makes of its bytes
        with open(path, "rb") as fh:
            data = np.load(fh, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise CheckpointError(f"The file {path} is not an eegrad checkpoint (a single "
                                      "array, not an .npz archive).")  # fmt: skip
            with data:
                members = {k: data[k] for k in data.files}
    except CheckpointError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as err:
        raise CheckpointError(f"The checkpoint {path} cannot be read: it is damaged, truncated "
                              f"or not an eegrad checkpoint ({_why(err)}).") from err
    try:
        doc = json.loads(str(members.pop("state.json")))
    except (KeyError, json.JSONDecodeError) as err:
        raise CheckpointError(f"The file {path} is not an eegrad checkpoint.") from err
    if not isinstance(doc, dict) or "state" not in doc:
        raise CheckpointError(f"The file {path} is not an eegrad checkpoint (its state.json is "
                              "no checkpoint's tree).")  # fmt: skip
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise CheckpointError(f"The file {path} is not an eegrad checkpoint of version "
                              f"{VERSION} (format {doc.get('format')!r}, version "
                              f"{doc.get('version')!r}).")  # fmt: skip
    return doc["state"], members
