r"""Federated ℓ2-regularised logistic regression on real data, with EE-Grad choosing how many
clients take part in each round (the ``examples`` extra: scikit-learn's bundled breast-cancer
data, no download).

The setting of the paper's introduction. The training set is split among C clients *by label*
(sorted by class, then cut into C shards), so clients are not identically distributed. A round
has a budget B in sample-gradient units. Arm n asks n clients chosen at random: the server's
aggregation costs D(n) = b (n − 1), each client's share (B − D(n))/n pays its overhead c_min and
buys a local batch of ⌊(share − c_min)/s⌋ samples at s per sample. Few clients give precise but
biased-by-client gradients; many clients give cheap, noisy local batches — the best n depends on
the data and is unknown.

Every method runs K SGD steps ``w ← w − η G`` with G the mean of T rounds; a step costs T·B.
Methods: ``eegrad`` (the paper's rule; β·P from a pilot of the initial rounds, c = 1),
``thompson`` (:class:`eegrad.ThompsonVariance`, the best rule without memory), ``default``
(:func:`eegrad.default_selector`: Thompson with memory across steps) and ``fixed-n`` for
every n. The best fixed n in
hindsight is the one with the lowest mean final objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..arms import Arms
from ..config import ConfigError
from ..costs import LinearAggregation, PowerCost, batch_sizes
from ..experiment import method_id
from ..loop import GradientEstimator
from ..objectives import LogisticRegression
from ..results import write_table
from ..selectors import EEGrad, FixedArm, Selector, ThompsonVariance, default_selector

__all__ = ["FederatedSetup", "load_setup", "main", "run_federated"]

COLUMNS = ("method", "seed", "round", "cost", "objective_gap", "test_accuracy")


@dataclass
class FederatedSetup:
    """Data, clients, cost model and arms of the example."""

    objective: LogisticRegression
    clients: list[tuple[np.ndarray, np.ndarray]]  # (X_c, y_c in {-1, +1})
    X_test: np.ndarray
    y_test: np.ndarray
    arms: Arms
    batch: np.ndarray  # local batch of each arm, shape (N,)
    budget: float


def load_setup(
    n_clients: int = 10,
    budget: float = 30.0,
    c_min: float = 2.0,
    aggregation: float = 0.25,
    cost_per_sample: float = 0.5,
    lam: float = 0.1,
    test_fraction: float = 0.3,
) -> FederatedSetup:
    """Load the data, split it, and build the arms from the cost model.

    The cost-fidelity function is C(θ) = c_min + s θ with θ the local batch size, so
    θ_n = ((B − D(n))/n − c_min)/s (:func:`eegrad.Arms.from_costs`); the batch is ⌊θ_n⌋, and
    the arms are the n <= C whose batch is at least 1.
    """
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError as exc:
        raise ConfigError("The federated example needs scikit-learn's bundled data: "
                          "pip install 'eegrad[examples]'") from exc  # fmt: skip

    data = load_breast_cancer()
    X, y = data.data, data.target.astype(float)
    rng = np.random.default_rng(0)  # the train/test split is part of the example, fixed
    order = rng.permutation(len(y))
    n_test = round(test_fraction * len(y))
    test, train = order[:n_test], order[n_test:]
    mu, sd = X[train].mean(axis=0), X[train].std(axis=0)
    Z = np.hstack([(X - mu) / sd, np.ones((len(y), 1))])  # standardised features and a bias
    y_pm = 2.0 * y - 1.0
    objective = LogisticRegression(Z[train], y_pm[train], lam=lam)
    by_label = train[np.argsort(y[train], kind="stable")]
    clients = [(Z[idx], y_pm[idx]) for idx in np.array_split(by_label, n_clients)]
    arms = Arms.from_costs(PowerCost(c_min=c_min, a=cost_per_sample, p=1.0),
                           LinearAggregation(b=aggregation), budget)  # fmt: skip
    # The arms are the n <= C whose share buys at least one sample.
    keep = int(np.sum(((arms.spend - c_min) >= cost_per_sample) & (arms.n <= n_clients)))
    batch = batch_sizes(arms.spend[:keep], c_min, cost_per_sample)
    arms = Arms(arms.sigma2[:keep], theta=arms.theta[:keep], spend=arms.spend[:keep],
                budget=budget)  # fmt: skip
    return FederatedSetup(objective, clients, Z[test], y_pm[test], arms, batch, budget)


def client_gradient(setup: FederatedSetup, c: int, w: np.ndarray, b: int, rng) -> np.ndarray:
    """Gradient of client c's loss on a local batch of b samples (with replacement)."""
    Xc, yc = setup.clients[c]
    idx = rng.integers(0, len(yc), b)
    Xb, yb = Xc[idx], yc[idx]
    margin = yb * (Xb @ w)
    weight = -yb / (1.0 + np.exp(margin))
    return weight @ Xb / b + setup.objective.lam * w


def minibatch_oracle(setup: FederatedSetup, w: np.ndarray, n: int, rng) -> np.ndarray:
    """MBO(n): n distinct clients at random, each with the batch its share buys, averaged."""
    chosen = rng.choice(len(setup.clients), size=n, replace=False)
    b = int(setup.batch[n - 1])
    return np.mean([client_gradient(setup, c, w, b, rng) for c in chosen], axis=0)


def _pilot_scale(setup: FederatedSetup, w: np.ndarray, rng) -> float:
    """β·P for the paper's rule, which needs bounds the user does not know: the largest trace
    of an arm's sample covariance over 4 pulls per arm at the initial iterate (a pilot)."""
    worst = 0.0
    for n in setup.arms.n:
        g = np.array([minibatch_oracle(setup, w, int(n), rng) for _ in range(4)])
        worst = max(worst, float(np.var(g, axis=0, ddof=1).sum()))
    return worst


def run_federated(
    setup: FederatedSetup,
    seeds: int = 10,
    K: int = 150,
    T: int = 40,
    eta: float | None = None,
    methods: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Rows of ``COLUMNS``: every method, seed and SGD step (round 0 is the initial iterate)."""
    obj = setup.objective
    eta = 1.0 / obj.L if eta is None else eta
    f_star = obj.f_star
    N = setup.arms.N
    names = methods or ["eegrad", "thompson", "default", *[f"fixed-{n}" for n in range(1, N + 1)]]
    rows = []
    for seed in range(seeds):
        for name in names:
            ss = np.random.SeedSequence(seed, spawn_key=(method_id(name),))
            data_rng, rule_rng = (np.random.default_rng(s) for s in ss.spawn(2))
            w = np.zeros(obj.d)
            selector = _selector(name, setup, w, data_rng)
            est = GradientEstimator(selector, setup.arms, T, dim=obj.d, rng=rule_rng)
            for k in range(K + 1):
                rows.append(_row(setup, name, seed, k, k * T * setup.budget, w, f_star))
                if k == K:
                    break
                if k > 0:
                    est.next_iterate()
                while not est.done:
                    n = est.ask()
                    est.tell(minibatch_oracle(setup, w, n, data_rng))
                w = w - eta * est.result()
    return rows


def _selector(name: str, setup: FederatedSetup, w: np.ndarray, rng) -> Selector:
    if name == "eegrad":
        return EEGrad(alpha=2.5, beta=_pilot_scale(setup, w, rng), P=1.0, c=1.0)
    if name == "default":
        return default_selector()
    if name == "thompson":
        return ThompsonVariance()
    return FixedArm(int(name.split("-")[1]))


def _row(setup, name, seed, k, cost, w, f_star) -> dict[str, Any]:
    gap = float(setup.objective.value(w[None])[0] - f_star)
    predicted = np.where(setup.X_test @ w >= 0, 1.0, -1.0)
    acc = float(np.mean(predicted == setup.y_test))
    return {"method": name, "seed": seed, "round": k, "cost": float(cost),
            "objective_gap": gap, "test_accuracy": acc}  # fmt: skip


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Final objective gap per method and its standard error over seeds, and the best and worst
    fixed n.

    The gap of one seed is averaged over the last tenth of the steps (at least the last one):
    the last iterate alone carries the noise of its last step, and with few seeds that noise
    decides the ranking."""
    last = max(r["round"] for r in rows)
    tail = last - max(1, last // 10) + 1
    per_seed: dict[str, dict[int, list[float]]] = {}
    for r in rows:
        if r["round"] >= tail:
            per_seed.setdefault(r["method"], {}).setdefault(r["seed"], []).append(
                r["objective_gap"]
            )
    means, ses = {}, {}
    for m, seeds in per_seed.items():
        v = np.array([np.mean(g) for g in seeds.values()])
        means[m] = float(v.mean())
        ses[m] = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    fixed = {m: v for m, v in means.items() if m.startswith("fixed-")}
    return {"final_gap": means, "final_gap_se": ses, "steps_averaged": last - tail + 1,
            "best_fixed": min(fixed, key=fixed.get), "worst_fixed": max(fixed, key=fixed.get)}  # fmt: skip


def plot(rows: list[dict[str, Any]], path_stem: Path) -> None:
    from matplotlib.figure import Figure

    from ..plots import save_figure

    summary = summarise(rows)
    fig = Figure(figsize=(11, 4.2))
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.13, top=0.88, wspace=0.22)
    ax1, ax2 = fig.subplots(1, 2)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    styles = {"eegrad": ("#1f77b4", "EE-Grad (paper's rule)"),
              "default": ("#d62728", "EE-Grad (default rule: Thompson with memory)"),
              "thompson": ("#ff7f0e", "EE-Grad (Thompson, no memory)"),
              summary["best_fixed"]: ("#2ca02c", f"best fixed n in hindsight ({summary['best_fixed']})"),
              summary["worst_fixed"]: ("#7f7f7f", f"worst fixed n ({summary['worst_fixed']})")}  # fmt: skip
    for m in methods:
        sub = [r for r in rows if r["method"] == m]
        seeds = sorted({r["seed"] for r in sub})
        cost = np.array(sorted({r["cost"] for r in sub}))
        for ax, key, log in ((ax1, "objective_gap", True), (ax2, "test_accuracy", False)):
            Y = np.array([[r[key] for r in sub if r["seed"] == s] for s in seeds])
            mean = Y.mean(axis=0)
            se = Y.std(axis=0, ddof=1) / np.sqrt(len(seeds)) if len(seeds) > 1 else 0 * mean
            if m in styles:
                colour, label = styles[m]
                ax.plot(cost, mean, color=colour, lw=2, label=label)
                ax.fill_between(cost, mean - 2 * se, mean + 2 * se, color=colour, alpha=0.2, lw=0)
            else:
                ax.plot(cost, mean, color="#bbbbbb", lw=0.8,
                        label="other fixed n" if m == "fixed-1" or (m == "fixed-2" and
                        summary["best_fixed"] == "fixed-1") else None)  # fmt: skip
            if log:
                ax.set_yscale("log")
    ax1.set_ylabel("objective gap F(w) − F*")
    ax2.set_ylabel("test accuracy")
    for ax in (ax1, ax2):
        ax.set_xlabel("cumulative cost (sample-gradient units)")
        ax.grid(True, alpha=0.3)
    ax1.legend(fontsize=8)
    n_seeds = len({r["seed"] for r in rows})
    fig.suptitle("Federated logistic regression (breast cancer, clients split by label): "
                 f"mean over {n_seeds} seeds, ±2 SE", fontsize=10)  # fmt: skip
    save_figure(fig, path_stem)


def main(out: str | Path = "results/federated", seeds: int = 10, K: int = 150, T: int = 40,
         budget: float = 30.0) -> dict[str, Any]:  # fmt: skip
    """Run the example and write ``federated.csv`` and ``federated.png`` (and ``.pdf``)."""
    out = Path(out)
    setup = load_setup(budget=budget)
    rows = run_federated(setup, seeds=seeds, K=K, T=T)
    write_table(out / "federated.csv", rows, COLUMNS)
    plot(rows, out / "federated")
    return summarise(rows)
