r"""What the rules of a fitted model share: a model (a plain object) told each round's record, a
warm-up, and a posterior draw of the noise.

A :class:`ModelRule` holds one model, :attr:`~ModelRule.model`, built by :meth:`~ModelRule.init`
from the rule's parameters: a :class:`~eegrad.selectors.noise_model.NoiseModel`
(:class:`~eegrad.SpreadThompson`) or a
:class:`~eegrad.selectors.progress_model.ProgressModel` (:class:`~eegrad.ProgressThompson`,
:class:`~eegrad.BudgetThompson`). It routes each round's record to the model, plays the warm-up
(:attr:`~ModelRule.warmup_arms`), chooses the least noise of a posterior draw while the model
is not ready, and then asks the rule's objective (:meth:`~ModelRule._choose`). A rule is its
model's type, its objective and its warm-up; a variant of the model is a subclass of the model
that the rule's :meth:`~ModelRule._new_model` builds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_array, check_client_counts, check_integer, check_real, fail
from ..spread import check_noise_order, check_population
from .base import ProtocolError, Selector
from .evidence import RoundEvidence
from .noise_model import NoiseModel

__all__ = ["ModelRule", "largest_best"]


def largest_best(value: np.ndarray) -> np.ndarray:
    """The arm (n − 1) of the largest ``value`` in each row, shape (R, N) → (R,); ties go to
    the largest n (the safer mean)."""
    N = value.shape[1]
    return (N - 1 - np.argmax(value[:, ::-1], axis=1)).astype(np.int64)


def _check_warmup(warmup: Any, owner: str) -> tuple[int, ...]:
    """The warm-up's numbers of clients: integers >= 1, at least one >= 2."""
    out = check_client_counts(warmup, "warmup", owner)
    if not out or max(out) < 2:
        raise fail("warmup", owner, "at least one round of n >= 2 clients (a spread to fit)",
                   list(out))  # fmt: skip
    return out


class ModelRule(Selector):
    r"""A rule of a fitted model: the parameters of its noise, the model it holds, its warm-up.

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order, warmup
        As :class:`~eegrad.SpreadThompson`.
    **model_options
        The parameters of the rule's model beyond the noise's, by name
        (:attr:`model_type`'s ``options``: ``signal_degree`` and ``shape_discount`` for a
        :class:`~eegrad.selectors.progress_model.ProgressModel`), checked by the model's type
        and kept as the rule's attributes.

    Attributes
    ----------
    model : NoiseModel
        The rule's model of the run (after :meth:`init`; :meth:`_new_model` builds it).
    rounds : int
        The rounds told since :meth:`init` that showed a spread, across iterates: the warm-up's
        counter.
    warmup_arms : list of int
        The arms (n − 1) of the warm-up's rounds, in order (after :meth:`init`).
    """

    uses_statistics = False
    reads = NoiseModel.reads
    keeps_memory = True
    #: The type of the rule's model: a variant of the model is a subclass of it given here.
    model_type: type[NoiseModel] = NoiseModel

    def __init__(self, discount: float = 0.9, population: int | None = None, spend: Any = None,
                 seed: int = 0, release_noise: Any = None, noise_order: int = 1,
                 warmup: Any = None, **model_options: Any) -> None:  # fmt: skip
        super().__init__()
        owner = type(self).__name__
        self.noise_order = check_noise_order(noise_order, owner, "noise_order")
        self.warmup = None if warmup is None else _check_warmup(warmup, owner)
        self.discount = check_real(discount, "discount", owner, gt=0, le=1)
        self.population = check_population(population, owner)
        self.spend = None if spend is None else check_array(spend, "spend", owner, ndim=1,
                                                              positive=True)  # fmt: skip
        self.seed = check_integer(seed, "seed", owner, ge=0)
        self.release_noise = None if release_noise is None else check_array(
            release_noise, "release_noise", owner, ndim=1)  # fmt: skip
        if self.release_noise is not None and np.any(self.release_noise < 0):
            raise fail("release_noise", owner, "variances >= 0", self.release_noise)
        # the model's own parameters (its ``options``), kept as the rule's attributes
        for name, value in self.model_type.check_options(owner, **model_options).items():
            setattr(self, name, value)
        self._own_rng = np.random.default_rng(self.seed)

    def get_params(self) -> dict[str, Any]:
        """``discount``, ``population``, ``spend``, ``seed`` (and ``release_noise``,
        ``noise_order`` and ``warmup`` where not their defaults), then the model's
        options."""
        spend = None if self.spend is None else self.spend.tolist()
        params = {"discount": self.discount, "population": self.population, "spend": spend,
                  "seed": self.seed}  # fmt: skip
        if self.release_noise is not None:
            params["release_noise"] = self.release_noise.tolist()
        if self.noise_order != 1:
            params["noise_order"] = self.noise_order
        if self.warmup is not None:
            params["warmup"] = list(self.warmup)
        return {**params, **self._model_options()}

    # -- lifecycle -------------------------------------------------------------------------------
    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: a new model, no evidence; checks population >= N, one spend and one
        release variance per arm, and the warm-up's n <= N."""
        owner = type(self).__name__
        if self.population is not None and N > self.population:
            raise fail("population", owner, f">= N = {N} (the most clients an arm asks)",
                       self.population)  # fmt: skip
        if self.spend is not None and self.spend.shape != (N,):
            raise fail("spend", owner, f"of length N = {N}, one spend per arm",
                       f"length {self.spend.shape[0]}")  # fmt: skip
        if self.release_noise is not None and self.release_noise.shape != (N,):
            raise fail("release_noise", owner, f"of length N = {N}, one variance per arm",
                       f"length {self.release_noise.shape[0]}")  # fmt: skip
        if self.warmup is not None:
            check_client_counts(self.warmup, "warmup", owner, most=N)
        super().init(R, N, d, truth, streams)
        self.rounds = 0
        spend = self.spend if self.spend is not None else 1.0 / np.arange(1, N + 1)
        self.model = self._new_model(R, N, np.asarray(spend, dtype=np.float64))
        self.warmup_arms = self._default_warmup(N) if self.warmup is None else \
            [n - 1 for n in self.warmup]  # fmt: skip

    def _new_model(self, R: int, N: int, spend: np.ndarray) -> NoiseModel:
        """The rule's model of a run of R realizations over N arms with per-client spends
        ``spend``: a :attr:`model_type` of the rule's parameters."""
        return self.model_type(R, N, spend, self.population, self.noise_order, self.discount,
                               self.release_noise, **self._model_options())  # fmt: skip

    def _model_options(self) -> dict[str, Any]:
        """The model's parameters beyond the noise's (:attr:`NoiseModel.options
        <eegrad.selectors.noise_model.NoiseModel.options>`), as the rule keeps them."""
        return {name: getattr(self, name) for name in self.model_type.options}

    def _default_warmup(self, N: int) -> list[int]:
        """The warm-up's arms where none is given: N, 2 and ≈ √(2N), the distinct ones."""
        warm = [N, 2, round(math.sqrt(2.0 * N))]
        return [n - 1 for i, n in enumerate(warm) if 1 <= n <= N and n not in warm[:i]]

    def next_iterate(self, truth: Any = None, streams: Any = None) -> None:
        """A new SGD iterate: the per-iterate counts restart; the model is kept."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: next_iterate() before init(R, N, d)")
        R, N, _ = self._shape
        self.counts = np.zeros((R, N), np.int64)
        self.t = 0
        self._pending = None
        self.truth, self.streams = truth, streams

    def reset(self) -> None:
        """Forget all evidence (same sizes)."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: reset() before init(R, N, d)")
        self.init(*self._shape, truth=self.truth, streams=self.streams)

    # -- tell ------------------------------------------------------------------------------------
    def tell(self, arms: np.ndarray, gradients: np.ndarray, *, check: bool = True) -> None:
        """Refused: this rule learns from the parts of a pull (:meth:`tell_parts`)."""
        raise ProtocolError(
            f"{self!r} learns from the parts of each pull: call tell_parts(arms, parts, weights) "
            "with the n updates and their samples, not tell() with their mean."
        )

    def _observe_round(self, ev: RoundEvidence, owner: str) -> None:
        """The model takes what of the record comes before the round's spread, then the
        spread's statistic, then the rest (each field checked before the model changes)."""
        self.model.before_statistic(ev, owner)
        super()._observe_round(ev, owner)
        self.model.after_statistic(ev, owner)

    def _observe_pairs(self, arms: np.ndarray, y: np.ndarray, weights: np.ndarray,
                       weighted_spread: np.ndarray | None = None) -> None:  # fmt: skip
        second = weighted_spread if self.uses_weighted_spread else None
        self._observe_statistic(arms, self.model.pair_round(arms, y, weights, second))

    def _observe_sums(self, arms: np.ndarray, spread: np.ndarray, n: np.ndarray, W: np.ndarray,
                      W2: np.ndarray, inverse_weight_sum: np.ndarray | None) -> None:  # fmt: skip
        if self.noise_order == 2 and inverse_weight_sum is None:
            raise fail("inverse_weight_sum", f"{type(self).__name__}.tell_spread_sums",
                       "the sum Σ1/ω of the parts' inverse weights, which noise_order=2 needs "
                       "(eegrad.flower.with_spread_sums sends it)", None)  # fmt: skip
        self._observe_statistic(arms, self.model.sums_round(arms, spread, n, W, W2,
                                                              inverse_weight_sum))  # fmt: skip

    def _observe_statistic(self, arms: np.ndarray, statistic: Any) -> None:
        """One round's statistic (:class:`~eegrad.selectors.spread_fit.SpreadRound`) to the
        model; a round that shows a spread counts towards the warm-up (a driver's cap to one
        part, or failures, leave the warm-up where it was)."""
        self._advance(arms)
        if self.model.add(arms, *statistic):
            self.rounds += 1

    # -- reads -----------------------------------------------------------------------------------
    def predicted(self) -> np.ndarray:
        """The model's fitted variance v_n of every arm, shape (R, N)."""
        return self.model.predicted()

    def step_scale(self, arms: Any) -> np.ndarray | None:
        """The model's scale of a step by a round of ``arms`` where it has one (the progress
        of a round's, :meth:`ProgressModel.step_scale
        <eegrad.selectors.progress_model.ProgressModel.step_scale>`), else the default from
        the predicted noise (:meth:`eegrad.selectors.Selector.step_scale`)."""
        own = self.model.step_scale(arms)
        return super().step_scale(arms) if own is None else own

    def estimates(self) -> dict[str, np.ndarray]:
        """``variance``: the fitted variance v_n of arm n's mean (:meth:`predicted`), once a
        round has been told (empty before)."""
        if self.rounds == 0:
            return {}
        return {"variance": self.predicted()[0]}

    def _warming_up(self) -> bool:
        """Whether the rule still chooses as its warm-up does: the warm-up's rounds, or the
        model not ready for the objective (then the least noise of a draw)."""
        return self.rounds < len(self.warmup_arms) or not self.model.ready()

    # -- ask -------------------------------------------------------------------------------------
    def _select(self, t: int) -> np.ndarray:
        R, N, _ = self._shape
        if N == 1:
            return np.zeros(R, dtype=np.int64)
        if self.rounds < len(self.warmup_arms):
            return np.full(R, self.warmup_arms[self.rounds], dtype=np.int64)
        if not self.model.ready():
            return self._least_noise()
        return self._choose()

    def _least_noise(self) -> np.ndarray:
        """The arm of least noise under a posterior draw (ties to the largest n)."""
        return largest_best(-self._sampled_noise())

    def _choose(self) -> np.ndarray:
        """The rule's objective's choice once the warm-up is over and the model ready."""
        raise NotImplementedError

    def _sampled_noise(self) -> np.ndarray:
        """Every arm's noise under one posterior draw of the model's parameters, shape (R, N)
        (the draw's standard normals from the run's streams, or the rule's own seed)."""
        R = self._shape[0]
        theta, cov = self.model.fit()
        k = theta.shape[-1]
        if self.streams is None:
            z = self._own_rng.standard_normal((R, k))
        else:
            z = self.streams.per_block(lambda gen, sl: gen.standard_normal((sl.stop - sl.start, k)),
                                       np.empty((R, k)))  # fmt: skip
        return self.model.drawn(theta, cov, z)
