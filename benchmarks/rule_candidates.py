"""Variants of the default rule, run beside it on the scorecard of federations.

Each candidate changes one thing of :class:`eegrad.ProgressThompson` as the default builds it,
and runs on the default's random streams (the clients sampled, their batches, the rule's draws),
so that its paired difference to the default measures the rule and not the streams. The
studies page (``docs/guide/federated-studies.md``) reports what they measured::

    python benchmarks/rule_candidates.py --seeds 30 --out DIR \\
        --candidates mean-noise no-one mean-for-one wide warm-20-6 nnls signal-spread scalar-rate \\
        --settings fedsgd local-steps overheads cnn-e1 cnn-e3 mlp-minibatch minibatch-drift
    python benchmarks/rule_candidates.py --seeds 30 --out DIR --candidates end-model \\
        --settings quickstart fixed-cost wall-clock long-budget

Runs are saved under ``DIR/runs`` as the card saves them (a rerun takes them again), so a
store copied from a card's ``--out`` runs only the candidates.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from eegrad import ProgressThompson
from eegrad.examples import scorecard


def project_nonnegative(theta: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """argmin over x >= 0 of (x − θ)ᵀA(x − θ), per row: θ shape (R, k), A shape (R, k, k)
    (every subset of free coordinates tried; k <= 3 here)."""
    R, k = theta.shape
    out = np.empty_like(theta)
    subsets = [list(s) for m in range(1, k + 1) for s in itertools.combinations(range(k), m)]
    for r in range(R):
        t, a = theta[r], normal[r]
        if np.all(t >= 0):
            out[r] = t
            continue
        best, value = np.zeros(k), float(t @ a @ t)
        for free in subsets:
            x = np.zeros(k)
            x[free] = np.linalg.solve(a[np.ix_(free, free)], a[free, :] @ t)
            v = float((x - t) @ a @ (x - t))
            if np.all(x >= 0) and v < value:
                best, value = x, v
        out[r] = best
    return out


class MeanNoise(ProgressThompson):
    """``mean-noise``: after the warm-up, the fitted noise rather than a posterior draw."""

    def _sampled_noise(self) -> np.ndarray:
        return self.predicted()


class NoOne(ProgressThompson):
    """``no-one``: after the warm-up, never a round of one client."""

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        d = super()._objective(noise).copy()
        d[:, 0] = -np.inf
        return d


class MeanForOne(ProgressThompson):
    """``mean-for-one``: n = 1, whose round shows no spread to correct a draw, on the fitted
    noise; every other n on the draw."""

    def _sampled_noise(self) -> np.ndarray:
        v = super()._sampled_noise().copy()
        v[:, 0] = self.predicted()[:, 0]
        return v


class Wide(ProgressThompson):
    """``wide``: draws from a posterior of twice the standard deviation."""

    def fit(self) -> tuple[np.ndarray, np.ndarray]:
        theta, cov = super().fit()
        return theta, 4.0 * cov


class WarmWithoutTwo(ProgressThompson):
    """``warm-20-6``: the warm-up without its round of two clients."""

    def init(self, R, N, d, truth=None, streams=None) -> None:
        super().init(R, N, d, truth=truth, streams=streams)
        self.warmup = [w for w in self.warmup if w != 1]


class NonNegativeFit(ProgressThompson):
    """``nnls``: the noise's parameters (and each draw of them) projected onto θ >= 0 in the
    fit's own metric, where the default sets each negative component to 0."""

    def _metric(self) -> np.ndarray:
        A = self._normal.copy()
        scale = np.maximum(np.trace(A, axis1=1, axis2=2), 1e-300)
        return A + (1e-6 * scale)[:, None, None] * np.eye(A.shape[-1])

    def _noise_of(self, theta: np.ndarray) -> np.ndarray:
        theta = project_nonnegative(theta, self._metric())
        return self._with_release(self._arm_scale() * np.einsum(
            "rnk,rk->rn", self.coefficients(), theta))  # fmt: skip

    def predicted(self) -> np.ndarray:
        return self._noise_of(self.fit()[0])

    def _sampled_noise(self) -> np.ndarray:
        theta, cov = self.fit()
        R, k = theta.shape
        if self.streams is None:
            z = self._own_rng.standard_normal((R, k))
        else:
            z = self.streams.per_block(lambda g, sl: g.standard_normal((sl.stop - sl.start, k)),
                                       np.empty((R, k)))  # fmt: skip
        jitter = 1e-12 * np.maximum(np.trace(cov, axis1=1, axis2=2), 1e-300)
        L = np.linalg.cholesky(cov + jitter[:, None, None] * np.eye(k))
        return self._noise_of(theta + np.einsum("rij,rj->ri", L, z))


class SignalFromSpread(ProgressThompson):
    """``signal-spread``: the signal's fit told only by rounds whose spread measured their own
    noise (n >= 2); a round of one client has none, and its ‖ū‖² less the predicted noise is
    as wrong as that prediction."""

    _ARMS = ("_arm_q", "_arm_s", "_arm_rounds")
    _SHAPE = ("_shape_q", "_shape_s", "_shape_ss", "_shape_rounds")

    def tell_signal(self, arms: Any, mean_norm2: Any, persistence: Any = None) -> None:
        one = np.asarray(arms) == 0
        if not np.any(one):
            return super().tell_signal(arms, mean_norm2, persistence)
        saved = {k: getattr(self, k).copy() for k in self._ARMS + self._SHAPE}
        super().tell_signal(arms, mean_norm2, persistence)
        for k in self._ARMS:  # the round's evidence taken back, its age kept
            getattr(self, k)[one] = (saved[k] * self.discount)[one]
        for k in self._SHAPE:
            getattr(self, k)[one] = (saved[k] * self.shape_discount)[one]
        self._fit_signal()


class ScalarRate(ProgressThompson):
    """``scalar-rate``: the total-budget rate's quadratic in the per-round mode, each arm
    contracting by its own gain, :math:`1 - \\sqrt{\\rho_n} = (1 - \\sqrt{\\hat\\rho})\\,x_n/x_t`
    (:math:`x_t` the last round's arm's update length): the largest
    :math:`1 - \\rho_n - (1 - \\sqrt{\\rho_n})^2 v_n/s_n`, the default's objective until
    the contraction is known."""

    def tell_signal(self, arms: Any, mean_norm2: Any, persistence: Any = None) -> None:
        super().tell_signal(arms, mean_norm2, persistence)
        self._last_arm = np.asarray(arms).copy()

    def _objective(self, noise: np.ndarray) -> np.ndarray:
        base = super()._objective(noise)
        last = getattr(self, "_last_arm", None)
        if last is None:
            return base
        rho, s = self.contraction(), self.signal()
        x = np.sqrt(np.maximum(s, 0.0))
        x_last = x[self._rows, last][:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.clip((1.0 - np.sqrt(rho))[:, None] * x / x_last, 0.0, 1.0)
            rate = 1.0 - (1.0 - step) ** 2 - step**2 * noise / s
        ok = np.isfinite(rho) & np.all(np.isfinite(rate), axis=1) & (x_last[:, 0] > 0)
        return np.where(ok[:, None], rate, base)


class EndInModel(ProgressThompson):
    """``end-model`` (a total budget): the last round chosen in the rate's own scalar model.
    Where a round could end the run, compare ending it now on the most clients affordable with
    k more rounds of the rate's arm and then the most clients the budget left affords, by the
    excess loss each leaves, :math:`\\rho E_k + q_L` with
    :math:`E_k = \\rho^k + q_r(1-\\rho^k)/(1-\\rho)` (relative to today's excess)."""

    def _select(self, t: int) -> np.ndarray:
        last = self.last_round_arm() if self.last_round else None
        if last is None or not np.any(self._arm_rounds > 0):
            return super()._select(t)
        R, N = self._shape[:2]
        noise = self.predicted()
        rho, injected = self._quadratic_round(noise)
        rate = self._objective(noise)
        arm = N - 1 - np.argmax(rate[:, ::-1], axis=1)
        c, budget = self._costs, float(self._budget_left)
        out = np.full(R, last, dtype=np.int64)
        for i in range(R):
            p, q = float(rho[i, 0]), injected[i]
            if not (np.isfinite(p) and p < 1 and np.all(np.isfinite(q))):
                continue
            cr = c[arm[i]]
            best, best_k = np.inf, 0
            for k in range(int(budget // cr) + 1):
                affordable = np.flatnonzero(c <= budget - k * cr)
                if affordable.size == 0:
                    break
                left = p**k + q[arm[i]] * (1 - p**k) / (1 - p)
                final = p * left + q[affordable.max()]
                if final < best:
                    best, best_k = final, k
            if best_k > 0:
                out[i] = arm[i]
        return out


def _per_round(cls: type[ProgressThompson]) -> Callable[[Any], ProgressThompson]:
    """The candidate as the per-round default is built: K, the arms' per-client spends."""
    return lambda fed: cls(population=fed.K, noise_order=2,
                           spend=np.array([fed.share(n) for n in range(1, fed.N + 1)]))


CANDIDATES: dict[str, Callable[[Any], ProgressThompson]] = {
    "mean-noise": _per_round(MeanNoise),
    "no-one": _per_round(NoOne),
    "mean-for-one": _per_round(MeanForOne),
    "wide": _per_round(Wide),
    "warm-20-6": _per_round(WarmWithoutTwo),
    "nnls": _per_round(NonNegativeFit),
    "signal-spread": _per_round(SignalFromSpread),
    "scalar-rate": _per_round(ScalarRate),
    "end-model": lambda fed: EndInModel(population=fed.K, spend=np.ones(fed.N), noise_order=2,
                                        objective="rate"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--candidates", nargs="+", choices=sorted(CANDIDATES), required=True)
    p.add_argument("--settings", nargs="+", required=True)
    args = p.parse_args()
    candidates = {name: {"selector": CANDIDATES[name]} for name in args.candidates}
    rows, _ = scorecard.run(args.settings, list(range(args.seeds)), jobs=args.jobs,
                            store=args.out / "runs", candidates=candidates)  # fmt: skip
    print("| setting | reading | default / best | candidate | / best | − default |")
    print("|---|---|---|---|---|---|")
    for final in ("window", "model"):
        for setting in args.settings:
            mine = [r for r in rows if r["setting"] == setting]
            base = scorecard.summarise(mine, "default", final=final)
            for name in candidates:
                s = scorecard.summarise(mine, name, final=final)
                d, se = s["versus_default"]
                print(f"| {setting} | {final} | {base['over_best']:.3f} | {name} | "
                      f"{s['over_best']:.3f} | {100 * d:+.1f} % ± {100 * se:.1f} % |")


if __name__ == "__main__":
    main()
