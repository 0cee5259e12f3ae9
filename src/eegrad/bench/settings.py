"""The benchmark's federations, split into a development half and a held-out half.

Most settings run the total-budget mode: clients train as Flower's quickstarts do (E epochs
over their own data in mini-batches of 32, the learning rate the round's config gives), a
client's round costs its samples × :data:`PER_SAMPLE` (``num-examples``) — or, on the wall
clock, its seconds (samples × E / its speed, a fifth of the clients 6× slower: stragglers),
the round lasting as long as its slowest client — and a round of n costs D(n) = D0 + 0.05
(n − 1) more. The run's budget is ``rounds_at_guess`` rounds of the guessed n (10 % of K) at
the clients' mean cost, so that every setting runs about as long. Two run the paper's model
instead (``mode="round"``): B a round (that of the guessed n at the mean cost), each of the n
clients asked sent (B − D(n))/n and training on the samples its share buys, for as many rounds.

The rule may be tuned on the ``development`` group only; the ``held-out`` group was frozen
before a rule ran on it and has since been read (held-out, seen: nineteen settings frozen
before the rule of rounds, the anchored default, the default that keeps your n or the one
whose last rounds are kept for the worst case); the ``fresh`` group was frozen before the
default that draws among your FedAvg's clients ran on it, and is reported as it comes
(held-out, fresh; :data:`SPLITS`). The fresh group pairs data sets and models the others do
not: two classes a client, a Dirichlet split, the wall clock, B a round.

A setting of one's own is made known with :func:`register` (in this process; the bench hands
each worker the setting itself) or written in a TOML file that ``eegrad bench
--settings-file`` reads (:func:`read_settings_file`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._validation import fail

__all__ = ["PER_SAMPLE", "SETTINGS", "SPLITS", "BenchSetting", "check_settings",
           "read_settings_file", "register"]

#: A client's cost per sample it trains on (its ``num-examples``), per epoch.
PER_SAMPLE = 0.01
#: The groups of the settings.
SPLITS = ("development", "held-out", "fresh")


@dataclass(frozen=True)
class BenchSetting:
    """One federation of the benchmark."""

    name: str
    split: str
    dataset: str
    model: str
    K: int
    partition: str
    epochs: int = 2
    D0: float = 1.0
    wall_clock: bool = False
    rounds_at_guess: int = 60
    quick_rounds_at_guess: int = 15
    #: ``"total"``: a budget for the run; ``"round"``: B a round, shared by its clients (the
    #: paper's model: each is sent (B − D(n))/n and trains on the samples it buys), for
    #: ``rounds_at_guess`` rounds.
    mode: str = "total"
    #: Your FedAvg's ``fraction_train``: it asks g = max(1, round(fraction · K)) clients a
    #: round (:func:`~eegrad.bench.methods.guess_n`).
    fraction: float = 0.1

    @property
    def guess(self) -> int:
        """g, the clients your FedAvg asks a round."""
        return max(1, round(self.fraction * self.K))

    @property
    def summary(self) -> str:
        cost = "wall clock, stragglers" if self.wall_clock else f"samples, D(1) = {self.D0:g}"
        mode = "B a round" if self.mode == "round" else "a total budget"
        return (f"{self.dataset}, {self.model}, K = {self.K}, {self.partition}, "
                f"E = {self.epochs}, {cost}, {mode}")


SETTINGS: dict[str, BenchSetting] = {s.name: s for s in (
    # development: the rule may be tuned on these
    BenchSetting("digits-mlp-20", "development", "digits", "mlp", 20, "dirichlet-0.1"),
    BenchSetting("mnist1d-mlp-50", "development", "mnist1d", "mlp", 50, "dirichlet-1.0"),
    BenchSetting("mnist5k-softmax-100", "development", "mnist-5k", "softmax", 100,
                 "dirichlet-0.1"),
    BenchSetting("digits-softmax-50-clock", "development", "digits", "softmax", 50,
                 "dirichlet-1.0", wall_clock=True),
    BenchSetting("digits-softmax-20-round", "development", "digits", "softmax", 20,
                 "dirichlet-0.1", mode="round"),
    # development since the rule of rounds was chosen: neither a new data set nor a new model
    # family (the scorecard's digits softmax; MNIST-1D's MLP)
    BenchSetting("digits-softmax-20-fixed", "development", "digits", "softmax", 20,
                 "dirichlet-0.1", D0=4.0),
    BenchSetting("mnist1d-mlp-20-clock", "development", "mnist1d", "mlp", 20, "dirichlet-0.1",
                 wall_clock=True),
    # held out: each a data set or a model family the development half has not, run once the
    # rule is frozen
    BenchSetting("mnist5k-mlp-200", "held-out", "mnist-5k", "mlp", 200, "dirichlet-1.0"),
    BenchSetting("insteval-softmax-200", "held-out", "insteval", "softmax", 200, "natural",
                 epochs=1),
    BenchSetting("mnist1d-cnn-50-round", "held-out", "mnist1d", "cnn1d", 50, "dirichlet-1.0",
                 mode="round"),
    # held out, cross-device: natural splits of hundreds to a thousand clients, frozen before
    # the rule of rounds ran on them
    BenchSetting("chem97-softmax-1000", "held-out", "chem97", "softmax", 1000, "natural",
                 rounds_at_guess=30, quick_rounds_at_guess=8),
    BenchSetting("movielens-mlp-600", "held-out", "movielens", "mlp", 600, "natural",
                 epochs=1, rounds_at_guess=30, quick_rounds_at_guess=8),
    BenchSetting("flights-softmax-1000", "held-out", "flights", "softmax", 1000, "natural",
                 epochs=1, rounds_at_guess=30, quick_rounds_at_guess=8),
    BenchSetting("shakespeare-charcnn-500", "held-out", "shakespeare", "charcnn", 500,
                 "natural", epochs=1, rounds_at_guess=20, quick_rounds_at_guess=6),
    # held out, seen: frozen before the anchored default ran on them (then fresh); each a data
    # set the others lacked (and a model family: the 2-D CNN)
    BenchSetting("digits-cnn2d-50-shards", "held-out", "digits", "cnn2d", 50, "shards"),
    BenchSetting("diamonds-mlp-100-round", "held-out", "diamonds", "mlp", 100, "dirichlet-0.5",
                 mode="round"),
    BenchSetting("nlswork-softmax-1000", "held-out", "nlswork", "softmax", 1000, "natural",
                 epochs=1, rounds_at_guess=30, quick_rounds_at_guess=8),
    BenchSetting("tv16-mlp-50-clock", "held-out", "tv16", "mlp", 50, "natural", epochs=1,
                 wall_clock=True, rounds_at_guess=30, quick_rounds_at_guess=8),
    # held out, seen: frozen before the default that keeps your n ran on them (then fresh);
    # label skew in three (two classes a client as McMahan et al. split MNIST), B a round with
    # two classes a client, the wall clock, and a fraction of 0.3 set by the app
    BenchSetting("mnist1d-mlp-100-shards", "held-out", "mnist1d", "mlp", 100, "shards"),
    BenchSetting("mnist5k-mlp-50-shards-round", "held-out", "mnist-5k", "mlp", 50, "shards",
                 mode="round"),
    BenchSetting("diamonds-softmax-50-clock", "held-out", "diamonds", "softmax", 50,
                 "dirichlet-0.3", wall_clock=True),
    BenchSetting("mnist5k-softmax-20-shards", "held-out", "mnist-5k", "softmax", 20, "shards",
                 fraction=0.3),
    # held out, seen: frozen before the default whose last rounds are kept for the worst case
    # ran on them (then fresh); clients of unequal costs (a natural split of hundreds, Dirichlet
    # splits, the wall clock)
    BenchSetting("movielens-softmax-300", "held-out", "movielens", "softmax", 300, "natural",
                 epochs=1, rounds_at_guess=30, quick_rounds_at_guess=8),
    BenchSetting("insteval-mlp-100", "held-out", "insteval", "mlp", 100, "dirichlet-0.3"),
    BenchSetting("digits-mlp-50-clock", "held-out", "digits", "mlp", 50, "dirichlet-0.5",
                 wall_clock=True),
    BenchSetting("nlswork-mlp-300", "held-out", "nlswork", "mlp", 300, "natural", epochs=1,
                 rounds_at_guess=30, quick_rounds_at_guess=8),
    # held out, fresh: frozen before the default that draws among your FedAvg's clients ran on
    # them; each a pairing of data set and model the others lack: two classes a client, a
    # Dirichlet split, the wall clock, B a round
    BenchSetting("chem97-mlp-200", "fresh", "chem97", "mlp", 200, "dirichlet-0.5"),
    BenchSetting("diamonds-mlp-50-shards", "fresh", "diamonds", "mlp", 50, "shards"),
    BenchSetting("flights-softmax-100-clock", "fresh", "flights", "softmax", 100,
                 "dirichlet-0.5", wall_clock=True),
    BenchSetting("tv16-mlp-100-round", "fresh", "tv16", "mlp", 100, "dirichlet-0.5",
                 mode="round"),
)}  # fmt: skip

def register(setting: BenchSetting) -> BenchSetting:
    """Make a setting of one's own known to the runner (:func:`~eegrad.bench.runner.run_one`
    by its name), in this process (``eegrad bench`` hands its workers the setting itself); the
    bench's settings are :data:`SETTINGS` as listed above. A name already known is refused
    unless it is the same setting."""
    if not isinstance(setting, BenchSetting):
        raise fail("setting", "register", "a BenchSetting", setting)
    if setting.split not in SPLITS:
        raise fail("split", "BenchSetting", f"one of {', '.join(SPLITS)}", setting.split)
    if setting.mode not in ("total", "round"):
        raise fail("mode", "BenchSetting", "'total' or 'round'", setting.mode)
    known = SETTINGS.get(setting.name)
    if known is not None and known != setting:
        raise fail("setting", "register", f"a name other than the known settings' "
                   f"({', '.join(SETTINGS)}), or the same setting", setting.name)  # fmt: skip
    SETTINGS[setting.name] = setting
    return setting


def read_settings_file(path: str) -> list[str]:
    """Register every setting of a TOML file (each a ``[[setting]]`` table of
    :class:`BenchSetting`'s fields) and return their names; an unknown field is refused,
    naming the known ones."""
    from dataclasses import fields

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    known = {f.name for f in fields(BenchSetting)}
    with open(path, "rb") as fh:
        tables = tomllib.load(fh).get("setting", [])
    if not isinstance(tables, list) or not tables:
        raise fail("settings_file", "eegrad bench", "a TOML file of [[setting]] tables", path)
    names = []
    for table in tables:
        unknown = sorted(set(table) - known)
        if unknown:
            raise fail(unknown[0], "eegrad bench --settings-file", f"a field of a setting: "
                       f"{', '.join(sorted(known))}", table[unknown[0]])  # fmt: skip
        try:
            setting = BenchSetting(**table)
        except TypeError as exc:
            raise fail("setting", "eegrad bench --settings-file", f"the fields name, split, "
                       f"dataset, model, K, partition and any of the others ({exc})",
                       table) from exc  # fmt: skip
        names.append(register(setting).name)
    return names


#: The settings ``--quick`` runs: one of each half.
QUICK = ("digits-mlp-20", "insteval-softmax-200")


def check_settings(names: list[str] | None, quick: bool = False) -> list[str]:
    """The settings to run (all, or :data:`QUICK` with ``quick``, unless named); an unknown
    name is refused, listing the known ones."""
    if not names:
        return list(QUICK if quick else SETTINGS)
    for name in names:
        if name not in SETTINGS:
            raise fail("settings", "eegrad bench", f"names of known settings: "
                       f"{', '.join(SETTINGS)}", name)  # fmt: skip
    return list(dict.fromkeys(names))
