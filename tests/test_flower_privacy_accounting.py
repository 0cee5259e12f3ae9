"""The recorded ε of a private run is never below what its release spends.

The release's sensitivity is measured, not assumed: two federations that differ only in one
client's update (replace-one neighbours, the accountant's relation), run on the same noise,
release models whose distance over the noise's SD is what the accountant must be told. That
measured sensitivity is then checked against two computations independent of dp-accounting's
subsampling bound: the exact ε of composed Gaussian mechanisms at q = 1 (Gaussian DP, a closed
form), and at q < 1 the Rényi divergence of the mixture pair that one client's replacement makes,
integrated numerically.
"""

import logging
import math

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("dp_accounting")

from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from scipy.optimize import brentq
from scipy.special import logsumexp
from scipy.stats import norm

from eegrad import FixedArm
from eegrad.flower import CentralDP, EEGradStrategy, LocalGrid
from eegrad.flower.privacy import REPLACE_ONE_SENSITIVITY

D = 6
Z, C, DELTA = 1.0, 1.0, 1e-5


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _app(sign):
    """Client 0 replies w − sign·u with ‖u‖ = 100 C (clipped to the update clip rC); the
    others w − v_pid, the same in both federations."""
    app = ClientApp()

    @app.train()
    def train(msg, context):
        pid = int(context.node_config["partition-id"])
        w = msg.content["arrays"]["w"].numpy()
        u = np.zeros(D)
        if pid == 0:
            u[0] = sign * 100.0 * C
        else:
            u[1 + pid % (D - 1)] = 0.3 * C
        rec = {"arrays": ArrayRecord({"w": Array(w - u)}),
               "metrics": MetricRecord({"num-examples": 10, "cost": 1.0})}  # fmt: skip
        return Message(RecordDict(rec), reply_to=msg)

    return app


def _run(sign, K, n, rounds, z=Z):
    dp = CentralDP(noise_multiplier=z, clipping_norm=C, delta=DELTA)
    strategy = EEGradStrategy(100.0, 1.0, selector=FixedArm(n), privacy=dp, rng=5)
    res = strategy.start(grid=LocalGrid(_app(sign), K, seed=1),
                         initial_arrays=ArrayRecord({"w": Array(np.zeros(D))}),
                         num_rounds=rounds)  # fmt: skip
    return strategy, res.arrays["w"].numpy()


def _measured_sensitivity(K=8):
    """Δ/σ of one round of all K clients: the released models' distance over the noise's SD on
    the round's sum (zC), the noise drawn alike in both federations."""
    _, plus = _run(+1, K, K, 1)
    _, minus = _run(-1, K, K, 1)
    sd_mean = Z * C / K  # the noise's SD on the released mean
    return float(np.linalg.norm(plus - minus)) / sd_mean


def _gdp_epsilon(mu, delta):
    """The exact ε at δ of a μ-GDP mechanism (Dong, Roth & Su 2022, Corollary 2.13):
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), decreasing in ε."""
    def excess(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    return brentq(excess, 0.0, 10.0 * mu * mu + 50.0, xtol=1e-10)


def _mixture_rdp(q, m, alpha):
    """D_α(P‖Q) of P = (1−q)N(0,1) + qN(m,1) and Q = (1−q)N(0,1) + qN(−m,1): one round whose
    other clients add nothing, client i sampled with probability q and replaced by its
    opposite (in units of the noise's SD; 2m = Δ/σ). A trapezoid in log space on a grid wide
    enough for the integrand's peak (near α·m for large α)."""
    x = np.linspace(-40.0 - 2 * alpha * m, 40.0 + 2 * alpha * m, 400_001)
    log_p = np.logaddexp(np.log1p(-q) + norm.logpdf(x), np.log(q) + norm.logpdf(x - m))
    log_q = np.logaddexp(np.log1p(-q) + norm.logpdf(x), np.log(q) + norm.logpdf(x + m))
    f = alpha * log_p + (1 - alpha) * log_q
    log_integral = logsumexp(f) + math.log(x[1] - x[0])
    return log_integral / (alpha - 1)


def test_the_measured_sensitivity_is_the_one_the_accountant_is_told():
    """Client 0's update +u or −u, clipped to rC, all K clients every round, the same noise:
    the released means lie 2rC/K apart, 2r/z noise SDs — the release's replace-one sensitivity
    (CentralDP.sensitivity) — and the accountant's multiplier is zC over exactly that."""
    ratio = _measured_sensitivity()
    dp = CentralDP(Z, C, DELTA)
    assert ratio == pytest.approx(dp.sensitivity / (Z * C), rel=1e-9)
    assert ratio == pytest.approx(REPLACE_ONE_SENSITIVITY, rel=1e-9)
    assert ratio > 1.8  # not C: replacing a client moves the sum by up to about 1.82 C
    assert dp.event(4, 8).noise_multiplier == pytest.approx(1.0 / ratio, rel=1e-9)


def test_recorded_epsilon_at_q_one_is_at_least_the_exact_gaussian_dp_epsilon():
    """10 rounds of all 8 nodes (q = 1, no amplification), z = 1, δ = 1e-5: the releases
    compose to a μ-GDP mechanism, μ = √R Δ/σ with the measured Δ/σ, whose ε is exact; the
    recorded ε (RDP, an upper bound) is at least that, and within the RDP conversion's usual
    slack of it (below 1.25×)."""
    rounds = 10
    ratio = _measured_sensitivity()
    exact = _gdp_epsilon(math.sqrt(rounds) * ratio, DELTA)
    strategy, _ = _run(+1, 8, 8, rounds)
    recorded = strategy.records[-1]["epsilon"]
    assert recorded >= exact
    assert recorded < 1.25 * exact
    # The earlier accounting (sensitivity C) recorded the ε of μ = √R/z: under half of it.
    assert _gdp_epsilon(math.sqrt(rounds) / Z, DELTA) < 0.5 * exact


@pytest.mark.parametrize("n", [5, 15])
def test_recorded_epsilon_at_q_below_one_bounds_the_mixture_pairs_rdp(n):
    """n of 20 nodes a round (q = 1/4, 3/4), 10 rounds, z = 1: the Rényi divergence of the mixture
    pair one client's replacement makes (at the measured Δ/σ), composed over the rounds and
    turned into ε by dp-accounting's conversion at its own orders up to 64, is at most the
    recorded ε; so is, order by order, the pair's RDP at most the accountant's."""
    from dp_accounting import dp_event, rdp
    from dp_accounting.privacy_accountant import NeighboringRelation
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    K, rounds = 20, 10
    ratio = _measured_sensitivity()
    strategy, _ = _run(+1, K, n, rounds)
    recorded = strategy.records[-1]["epsilon"]
    orders = np.array([a for a in rdp.RdpAccountant().orders if 1 < a <= 64])
    pair = np.array([_mixture_rdp(n / K, ratio / 2, a) for a in orders])
    acc = rdp.RdpAccountant(orders=list(orders),
                            neighboring_relation=NeighboringRelation.REPLACE_ONE)  # fmt: skip
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(
        K, n, dp_event.GaussianDpEvent(CentralDP(Z, C, DELTA).event(n, K).noise_multiplier)))
    assert np.all(pair <= acc.rdp * (1 + 1e-9))
    eps_pair, _ = compute_epsilon(orders, rounds * pair, DELTA)
    assert eps_pair <= recorded
