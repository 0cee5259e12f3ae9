"""Which nodes a round asks (:mod:`eegrad.flower.draws`): a uniform draw, and where the rule
keeps your schedule, a draw among the nodes a round of yours would ask."""

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra

from eegrad.flower.draws import draw_nodes


def test_without_your_n_a_round_draws_as_numpy_draws_n_of_the_connected():
    ours, theirs = np.random.default_rng(3), np.random.default_rng(3)
    for n in (1, 4, 9, 30):
        np.testing.assert_array_equal(draw_nodes(ours, 20, n),
                                      theirs.choice(20, size=min(n, 20), replace=False))


@pytest.mark.parametrize("n", [1, 3, 5, 8, 20])
def test_a_round_draws_among_the_nodes_yours_would_ask_and_moves_the_stream_as_yours(n):
    """Fewer than your 5: a subset of the 5 your round draws; more: those 5 and others; and
    the stream after the round is where a round of yours leaves it."""
    for seed in range(20):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        pick = draw_nodes(ours, 20, n, yours=5)
        yours = theirs.choice(20, size=5, replace=False)
        assert pick.size == n
        assert np.unique(pick).size == n
        assert set(pick) <= set(yours) if n <= 5 else set(yours) <= set(pick)
        if n <= 5:
            assert ours.integers(1 << 30) == theirs.integers(1 << 30)


@pytest.mark.parametrize("n", [2, 5, 8])
def test_a_draw_among_yours_leaves_each_node_equally_likely(n):
    """Each of the K = 12 nodes is asked in n/K of the rounds. Over M = 6,000 rounds a node's
    count is Binomial(M, n/K); the bound is 4.5 of its standard deviations (12 nodes: a false
    alarm well under 1e-4)."""
    K, M = 12, 6000
    rng = np.random.default_rng(11)
    counts = np.zeros(K)
    for _ in range(M):
        counts[draw_nodes(rng, K, n, yours=4)] += 1
    p = n / K
    assert np.all(np.abs(counts - M * p) <= 4.5 * np.sqrt(M * p * (1 - p)))
