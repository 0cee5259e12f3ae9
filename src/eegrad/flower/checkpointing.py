"""Checkpoint and resume of :class:`~eegrad.flower.EEGradStrategy`.

After each round the strategy writes everything needed to continue (:func:`save_round`): the
rule's and the estimator's state, the random streams, the records, the round number, the
privacy accountant and the round's model arrays, in the format of :mod:`eegrad.checkpoint`
(``.npz`` arrays and a JSON tree, replaced atomically; never a pickle). A strategy constructed
with a checkpoint that exists continues it (:func:`resume`) after checking that the
checkpoint is of the same run (:func:`fingerprint`: budget, D, rule, privacy, model arrays...),
or refuses it naming what differs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import Array, ArrayRecord

from ..checkpoint import (
    CheckpointError,
    capture_state,
    read_checkpoint,
    restore_state,
    write_checkpoint,
)
from ..results import write_table
from .model_arrays import array_view

if TYPE_CHECKING:
    from .strategy import EEGradStrategy

__all__ = ["fingerprint", "resume", "save_round"]


def fingerprint(strategy: EEGradStrategy, model: dict[str, np.ndarray]) -> dict[str, Any]:
    """What a checkpoint must share with the strategy to continue it."""
    st = strategy
    sel = st._given_selector if st._rule_given else None  # the rule as given, not as set up
    from .strategy import default_rule_name  # here: the strategy imports this module

    default = (default_rule_name(st.privacy is not None) if st.steps == "every-round"
               else "default")  # fmt: skip
    n = np.arange(1.0, st.max_arms + 2.0)
    return {"budget": st.budget, "c_min": st.c_min, "steps": st.steps, "T": st.T,
            "D(1..N+1)": [float(x) for x in st.aggregation(n)],
            "server_lr": st.server_lr, "damp_exploration": st.damp_exploration,
            "fraction_evaluate": st.fraction_evaluate,
            "weighted_by_key": st.weighted_by_key,
            "rule": default if sel is None else type(sel).__name__,
            "rule parameters": None if sel is None else repr(sel.get_params()),
            "privacy": repr(st.privacy), "secure_sums": st.secure_sums,
            "model arrays": [[k, list(a.shape), a.dtype.str] for k, a in model.items()]}  # fmt: skip


def save_round(strategy: EEGradStrategy, server_round: int,
               new_arrays: ArrayRecord | None) -> None:  # fmt: skip
    """Write the run's state after ``server_round`` to the strategy's checkpoint (replacing
    the previous one atomically): ``new_arrays`` is the round's model (None: the round made no
    step)."""
    rnd = strategy._round
    model = ({k: array_view(new_arrays[k]) for k in rnd["keys"]} if new_arrays is not None
             else dict(zip(rnd["keys"], rnd["model"], strict=True)))  # fmt: skip
    fields = {"round": server_round, "steps_taken": strategy._steps_taken, "cost": strategy._cost,
              "num_nodes": strategy._num_nodes, "dim": strategy.estimator.dim,
              "records": strategy.records, "metrics": strategy._metrics,
              "accountant": None if strategy._private is None else
              strategy._private.accountant.state_dict(),
              "sampling_rng": strategy._sampling_rng, "noise_rng": strategy._noise_rng,
              "evaluate_rng": strategy._evaluate_rng, "estimator": strategy.estimator}  # fmt: skip
    tree, arrays = capture_state(fields)
    for i, a in enumerate(model.values()):
        arrays[f"model{i}"] = a
    state = {"fingerprint": fingerprint(strategy, model), "model keys": list(model),
             "state": tree}  # fmt: skip
    write_checkpoint(strategy.checkpoint, state, arrays)


def resume(strategy: EEGradStrategy, initial_arrays: ArrayRecord) -> ArrayRecord:
    """Load the checkpoint into this strategy; returns the model to continue from."""
    tree, arrays = read_checkpoint(strategy.checkpoint)
    keys = tree["model keys"]
    model = {k: arrays.pop(f"model{i}") for i, k in enumerate(keys)}
    given = {k: array_view(initial_arrays[k]) for k in initial_arrays}
    saved_fp, here = tree["fingerprint"], fingerprint(strategy, model)
    here["model arrays"] = [[k, list(a.shape), a.dtype.str] for k, a in given.items()]
    differ = [k for k in saved_fp if saved_fp[k] != here.get(k)]
    if differ:
        what = "; ".join(f"{k}: {saved_fp[k]!r} in the checkpoint, {here.get(k)!r} here"
                         for k in differ)  # fmt: skip
        raise CheckpointError(f"The checkpoint {strategy.checkpoint} is of another run: {what}.")
    state = tree["state"]["__dict__"]
    strategy._setup(state["num_nodes"], state["dim"])  # the fresh selector and estimator
    # The rule's and the estimator's state (the rule is the estimator's), in place.
    live = {"sampling_rng": strategy._sampling_rng, "noise_rng": strategy._noise_rng,
            "evaluate_rng": strategy._evaluate_rng, "estimator": strategy.estimator}  # fmt: skip
    restored = restore_state(live, {"__dict__": {k: state[k] for k in live}}, arrays,
                             "checkpoint")  # fmt: skip
    strategy._sampling_rng, strategy._noise_rng = restored["sampling_rng"], restored["noise_rng"]
    strategy._evaluate_rng = restored["evaluate_rng"]
    if strategy._private is not None:
        strategy._private.rng = strategy._noise_rng
    plain = restore_state(None, {"__dict__": {k: state[k] for k in (
        "round", "steps_taken", "cost", "records", "metrics", "accountant")}}, arrays,
        "checkpoint")  # fmt: skip
    if plain["accountant"] is not None:
        strategy._private.accountant.load_state_dict(plain["accountant"])
    strategy._offset = plain["round"]
    strategy._steps_taken, strategy._cost = plain["steps_taken"], plain["cost"]
    strategy.records = plain["records"]
    strategy._metrics = {int(k): v for k, v in plain["metrics"].items()}
    if strategy.csv_path is not None:  # the rounds the checkpoint holds, nothing after them
        write_table(strategy.csv_path, strategy.records, strategy.columns)
    return ArrayRecord({k: Array(np.ascontiguousarray(a)) for k, a in model.items()})
