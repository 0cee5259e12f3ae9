import numpy as np
import pytest

from eegrad._random import BLOCK_SIZE, RealizationStreams, as_generator


@pytest.mark.parametrize("rounds", [None, 5, 70, 200])
def test_buffered_draws_equal_round_by_round_block_draws(rounds):
    """Buffering CHUNK_ROUNDS rounds at a time never changes the numbers: they equal, for
    each block, successive (Rb, d) draws from the block's own generator."""
    R, d, n_rounds = 2 * BLOCK_SIZE + 17, 3, 150
    streams = RealizationStreams(np.random.default_rng(42), R, rounds=rounds)
    got = np.stack([streams.draw("normal", (d,)) for _ in range(n_rounds)])
    ref_parent = np.random.default_rng(42)
    children = ref_parent.spawn(len(streams.slices) + 1)
    want = np.empty_like(got)
    for b, sl in enumerate(streams.slices):
        for t in range(n_rounds):
            want[t, sl] = children[b].standard_normal((sl.stop - sl.start, d))
    np.testing.assert_array_equal(got, want)


def test_blocks_are_fixed_size_and_independent_of_R_beyond_them():
    """Realizations in the first block see the same numbers whatever R is."""
    a = RealizationStreams(np.random.default_rng(1), BLOCK_SIZE).draw("normal", (2,))
    b = RealizationStreams(np.random.default_rng(1), 3 * BLOCK_SIZE).draw("normal", (2,))
    np.testing.assert_array_equal(a, b[:BLOCK_SIZE])


@pytest.mark.parametrize("kind", ["rademacher", "uniform"])
def test_other_kinds_have_unit_variance(kind):
    z = RealizationStreams(np.random.default_rng(0), 50_000).draw(kind, (2,))
    # SE of the mean of z² is std(z²)/√n (0 for Rademacher, whose z² is 1); 4 SE + 1e-12.
    sq = z**2
    assert np.all(np.abs(sq.mean(axis=0) - 1) <= 4 * sq.std(axis=0) / np.sqrt(len(z)) + 1e-12)


def test_as_generator():
    g = np.random.default_rng(0)
    assert as_generator(g) is g
    assert isinstance(as_generator(3), np.random.Generator)
    assert isinstance(as_generator(np.random.SeedSequence(3)), np.random.Generator)
    for bad in (None, 1.5, "3", True):
        with pytest.raises(TypeError, match="'rng' parameter"):
            as_generator(bad)
