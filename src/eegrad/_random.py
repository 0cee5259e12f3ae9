"""Random streams: one independent generator per fixed-size block of realizations.

A Monte Carlo run over R realizations splits them into blocks of :data:`BLOCK_SIZE`. Each
block draws from its own ``numpy.random.Generator``, spawned from the caller's generator
(``Generator.spawn``, i.e. ``SeedSequence.spawn``). Within a block, a round consumes its
draws in C order, realization-major. Any engine that follows this layout (the NumPy
engine, the compiled one, any number of threads) produces the same numbers for a seed.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ._validation import InvalidParameterTypeError

__all__ = ["BLOCK_SIZE", "RealizationStreams", "as_generator"]

#: Realizations per random stream. A constant of the library, never of the machine: changing
#: it changes every result for a given seed.
BLOCK_SIZE = 256

#: Rounds of noise drawn at once per block (bounded memory: CHUNK_ROUNDS * R * width floats).
CHUNK_ROUNDS = 64


def as_generator(rng: Any, owner: str = "this function") -> np.random.Generator:
    """Return a ``Generator`` from a ``Generator``, an integer seed or a ``SeedSequence``.

    ``None`` is refused: results must depend on an explicit seed.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.SeedSequence) or (
        isinstance(rng, numbers.Integral) and not isinstance(rng, bool)
    ):
        return np.random.default_rng(rng)
    raise InvalidParameterTypeError(
        f"The 'rng' parameter of {owner} must be a numpy.random.Generator, a SeedSequence "
        f"or an integer seed. Got {rng!r} instead."
    )


class RealizationStreams:
    """Independent generators for the blocks of ``R`` realizations.

    Parameters
    ----------
    rng : numpy.random.Generator
        Parent generator; ``ceil(R / block_size) + 1`` children are spawned from it (the last
        child serves oracles that draw their own noise for all realizations at once).
    R : int
        Number of realizations.
    block_size : int
        Realizations per stream.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        R: int,
        block_size: int = BLOCK_SIZE,
        rounds: int | None = None,
    ):
        self.R = R
        #: Rounds the caller will draw (if known): the last chunk then draws no more than needed.
        self.rounds = rounds
        self.block_size = block_size
        n_blocks = -(-R // block_size)
        children = rng.spawn(n_blocks + 1)
        self.generators: list[np.random.Generator] = children[:n_blocks]
        #: A generator for code that draws for all realizations at once (user oracles).
        self.shared: np.random.Generator = children[n_blocks]
        self.slices = [slice(b * block_size, min((b + 1) * block_size, R)) for b in range(n_blocks)]
        self._buffers: dict[tuple[Any, ...], list[Any]] = {}
        self._selector_generators: list[np.random.Generator] | None = None

    @property
    def selector_generators(self) -> list[np.random.Generator]:
        """One generator per block for a selector's own randomness (e.g. posterior sampling),
        spawned from :attr:`shared` on first use: the gradients' noise streams stay the same
        whichever selector runs (common random numbers)."""
        if self._selector_generators is None:
            self._selector_generators = self.shared.spawn(len(self.slices))
        return self._selector_generators

    def per_block(self, draw: Any, out: np.ndarray) -> np.ndarray:
        """Fill ``out`` (leading axis R) block by block: ``out[sl] = draw(gen, sl)`` with each
        block's selector generator."""
        for gen, sl in zip(self.selector_generators, self.slices, strict=True):
            out[sl] = draw(gen, sl)
        return out

    def draw(self, kind: str, tail: tuple[int, ...]) -> np.ndarray:
        """Draws of shape ``(R, *tail)``, unit variance, one round's worth.

        ``kind`` is ``"normal"``, ``"rademacher"`` or ``"uniform"`` (on [-√3, √3]). Draws are
        buffered CHUNK_ROUNDS rounds at a time per block; since a block's generator fills
        ``(c, Rb, *tail)`` in C order, the numbers equal those of ``c`` successive
        ``(Rb, *tail)`` draws, so buffering never changes a result.
        """
        key = (kind, tail)
        entry = self._buffers.get(key)  # [buffer, next row, rounds drawn so far]
        if entry is None or entry[1] >= entry[0].shape[0]:
            drawn = 0 if entry is None else entry[2]
            chunk = CHUNK_ROUNDS
            if self.rounds is not None and self.rounds > drawn:
                chunk = min(chunk, self.rounds - drawn)
            buf = np.empty((chunk, self.R, *tail))
            for gen, sl in zip(self.generators, self.slices, strict=True):
                buf[:, sl] = _draw(gen, kind, (chunk, sl.stop - sl.start, *tail))
            entry = [buf, 0, drawn + chunk]
            self._buffers[key] = entry
        out = entry[0][entry[1]]
        entry[1] += 1
        return out


_SQRT3 = float(np.sqrt(3.0))


def _draw(gen: np.random.Generator, kind: str, size: tuple[int, ...]) -> np.ndarray:
    if kind == "normal":
        return gen.standard_normal(size)
    if kind == "rademacher":
        return 2.0 * gen.integers(0, 2, size=size).astype(np.float64) - 1.0
    if kind == "uniform":
        return gen.uniform(-_SQRT3, _SQRT3, size=size)
    raise ValueError(f"unknown draw kind {kind!r}")  # internal: never reached from user input
