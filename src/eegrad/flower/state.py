"""The run state of :class:`~eegrad.flower.EEGradStrategy`, declared in one object.

The strategy's constructor arguments are its configuration, never changed by a run; everything
a run changes is a :class:`RunState` (as Optax keeps an optimizer's state apart from its
hyperparameters). :meth:`RunState.state_dict` gives it as plain values — numbers, lists, dicts,
arrays, random generators, the rule's driver — which :mod:`eegrad.flower.checkpointing`
writes; :meth:`RunState.load_state_dict` sets them back. A fresh :class:`RunState` is a fresh
run: :meth:`~eegrad.flower.EEGradStrategy.start` makes one unless it resumes.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .driver import RuleDriver
from .privacy import PrivateRounds
from .stops import RunStopped

__all__ = ["PendingRound", "RunState", "Streams"]


@dataclass
class Streams:
    """The run's independent random streams (children of the strategy's ``rng``).

    Parameters
    ----------
    selector : numpy.random.Generator
        The rule's draws (through its driver).
    sampling : numpy.random.Generator
        Which nodes a round asks.
    noise : numpy.random.Generator
        A private release's noise.
    evaluate : numpy.random.Generator
        Which nodes evaluate (its own: turning evaluation on changes no training).
    """

    selector: np.random.Generator
    sampling: np.random.Generator
    noise: np.random.Generator
    evaluate: np.random.Generator

    def copy(self) -> Streams:
        """Independent copies at the same positions."""
        return copy.deepcopy(self)

    def fingerprint(self) -> str:
        """The streams as a checkpoint's fingerprint names them: the seed (the entropy of their
        seed sequence, where they have one) and a digest of the four generators' states, so that
        a run of another seed, or of a generator drawn from before, is told apart."""
        gens = (self.selector, self.sampling, self.noise, self.evaluate)
        states = json.dumps([g.bit_generator.state for g in gens], sort_keys=True, default=str)
        digest = hashlib.sha256(states.encode()).hexdigest()[:16]
        seq = self.selector.bit_generator.seed_seq
        seed = seq.entropy if isinstance(seq, np.random.SeedSequence) else None
        return f"seed {seed}, streams {digest}"


@dataclass
class PendingRound:
    """A round asked whose replies are not yet all folded: what the round's record and step
    read of its asking.

    Parameters
    ----------
    server_round : int
        The run's round (a resumed run's counted on).
    n : int
        The clients the rule asked for.
    nodes : list of int
        The nodes asked.
    keys : list of str
        The model's array names.
    model : list of ndarray
        The round's model, its arrays (views of the message's bytes).
    timeout : float or None
        How long the round waits for its replies, in seconds (its budget's cap on Flower's).
    why : str or None
        Why the rule asked n (where the log or a callback reads it).
    """

    server_round: int
    n: int
    nodes: list[int]
    keys: list[str]
    model: list[np.ndarray]
    timeout: float | None = None
    why: str | None = None


@dataclass
class RunState:
    """Everything a run of :class:`~eegrad.flower.EEGradStrategy` changes.

    The rule at work is held by its driver (``rule``), built when the first round knows the
    nodes (K) and the model's size (d); so is the private release (``private``).

    Parameters
    ----------
    streams : Streams
        The run's random streams.
    records : list of dict
        One dict per server round (:data:`~eegrad.flower.strategy.RECORD_COLUMNS`).
    metrics : dict
        Each round's train metrics, by server round.
    server_round : int
        The last server round done (the next one is ``server_round + 1``).
    steps_taken : int
        Steps taken (every round with replies, or every T rounds).
    cost : float
        Budget spent: B a round.
    num_nodes, dim : int or None
        K, the nodes connected at the first round, and d, the model's size (None before it).
    rule : RuleDriver or None
        The rule's driver (it holds the rule and its evidence).
    private : PrivateRounds or None
        Central DP's side of the run (its accountant's state is saved).
    inner : dict or None
        The inner strategy's run state (:func:`eegrad.flower.inner.inner_state`), as last saved.
    client_costs : dict
        With a total budget: each node's latest reported cost, by node id
        (:class:`~eegrad.flower.round_costs.RoundCosts`).
    joined : dict
        The server round at which each node was first connected, by node id (the nodes that
        joined after the run's first round are asked a few at a time while their cost is
        unknown: :mod:`eegrad.flower.newcomers`).
    rounds_done, num_rounds, min_clients, timeout : int, int, int, float
        The session (not saved): the rounds a resumed run had done at its start, the run's last
        server round, the fewest clients a round can run (2 under SecAgg+), how long a round
        waits for its replies (None: no limit).
    first_round, said_fewer, said_more, said_no_steps, nodes_connected : bool, bool, bool, bool, int
        Whether the next round is the run's first (it waits for the nodes), whether fewer or
        more nodes than planned were said, whether replies without local steps were said, the
        nodes connected at the pending round.
    said_newcomers : bool
        Whether a round's cut of late nodes of unknown cost was said.
    pending : PendingRound or None
        The round asked whose replies are not yet folded.
    latest, evaluated, evaluates : ArrayRecord, dict, bool
        The model the next round starts from, the federated evaluations by round, whether the
        start was given an ``evaluate_fn``.
    spent, stopped : RunStopped or None, str or None
        Why the next round cannot run (a budget spent), and why the run ended before its
        rounds.
    """

    streams: Streams
    records: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[int, dict[str, Any]] = field(default_factory=dict)
    server_round: int = 0
    steps_taken: int = 0
    cost: float = 0.0
    num_nodes: int | None = None
    dim: int | None = None
    rule: RuleDriver | None = None
    private: PrivateRounds | None = None
    inner: dict[str, Any] | None = None
    client_costs: dict[int, float] = field(default_factory=dict)
    joined: dict[int, int] = field(default_factory=dict)
    # -- the run's session: set by its start and its rounds, not saved (a resume sets it anew)
    rounds_done: int = 0
    num_rounds: int | None = None
    min_clients: int = 1
    timeout: float | None = None
    first_round: bool = True
    said_fewer: bool = False
    said_more: bool = False
    said_no_steps: bool = False
    said_newcomers: bool = False
    nodes_connected: int | None = None
    pending: PendingRound | None = None
    latest: Any = None
    evaluated: dict[int, Any] = field(default_factory=dict)
    evaluates: bool = False
    spent: RunStopped | None = None
    stopped: str | None = None

    def state_dict(self) -> dict[str, Any]:
        """The state as plain values (the rule's driver and the generators as objects that
        :func:`eegrad.checkpoint.capture_state` writes)."""
        return {"server_round": self.server_round, "steps_taken": self.steps_taken,
                "cost": self.cost, "num_nodes": self.num_nodes, "dim": self.dim,
                "records": self.records, "metrics": self.metrics,
                "accountant": None if self.private is None else self.private.state_dict(),
                "sampling_rng": self.streams.sampling, "noise_rng": self.streams.noise,
                "evaluate_rng": self.streams.evaluate, "rule": self.rule,
                "inner": self.inner,
                "client_costs": {str(k): v for k, v in self.client_costs.items()},
                "joined": {str(k): v for k, v in self.joined.items()}}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Set the state from :meth:`state_dict`'s values; the rule's driver (and the private
        release, with ``privacy``) must already be built for the saved K and d, and is
        replaced by the saved one."""
        self.server_round, self.steps_taken = int(state["server_round"]), int(state["steps_taken"])
        self.cost = float(state["cost"])
        self.records = list(state["records"])
        self.metrics = {int(k): v for k, v in state["metrics"].items()}
        self.streams.sampling, self.streams.noise = state["sampling_rng"], state["noise_rng"]
        self.streams.evaluate = state["evaluate_rng"]
        self.rule = state["rule"]
        if self.private is not None:
            self.private.rng = self.streams.noise
            if state["accountant"] is not None:
                self.private.load_state_dict(state["accountant"])
        self.inner = state["inner"]
        self.client_costs = {int(k): float(v) for k, v in state["client_costs"].items()}
        self.joined = {int(k): int(v) for k, v in state["joined"].items()}

