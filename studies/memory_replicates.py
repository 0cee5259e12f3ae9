"""Independent replicates of the memory study's estimate (run by hand, ≈ 5 min).

Two questions the single run of ``eegrad reproduce memory`` cannot answer about itself:

1. Is the control-variate estimate's jackknife standard error honest? For each rule, 16
   independent replicates of R = 2000 (the study's size) on the Figure 1 setting at T = 50: the
   spread of the 16 estimates against the average jackknife SE and against the naive residual
   SE s(X − β̂Y)/√R.
2. Does the rule told the horizon beat the anytime rule? The same replicates pooled
   (R = 32000 per rule) give estimates with a few-times smaller error than one study run.

Usage: ``python studies/memory_replicates.py``
"""

from __future__ import annotations

import numpy as np

from eegrad import Arms, GaussianOracle, MemoryKLLCB, MemoryThompson, Quadratic, run_sgd
from eegrad.estimators import control_variate_mean, quadratic_final_gaps
from eegrad.theory import fixed_oracle_gaps

K, ETA, T, R, REPLICATES = 5, 0.85, 50, 2000, 16
RULES = {
    "memory_kl_lcb": MemoryKLLCB,
    "memory_kl_lcb-hKT": lambda: MemoryKLLCB(horizon=K * T),
    "memory_thompson": MemoryThompson,
}


def main() -> None:
    arms = Arms(np.array([50.0, 26.0, 16.7]) * T / 50)
    oracle = GaussianOracle(Quadratic(2), arms)
    star = float(arms.sigma2.min())
    optimal = float(fixed_oracle_gaps(1.0, ETA, star, T, K)[-1])  # E F(w_1) = d/2 = 1
    seeds = np.random.SeedSequence(2029).spawn(REPLICATES)
    print(f"Figure 1 setting, T = {T}: {REPLICATES} replicates of R = {R}\n")
    print("| rule | mean of estimates | spread (SD) | mean jackknife SE | mean naive SE "
          "| pooled estimate ± jackknife SE |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, make in RULES.items():
        est, jack, naive, Xs, Ys = [], [], [], [], []
        for ss in seeds:
            init_seed, run_seed = ss.spawn(2)
            w0 = np.random.default_rng(init_seed).standard_normal((R, 2))
            out = run_sgd(oracle, make(), w0, K, T, ETA, rng=np.random.default_rng(run_seed))
            X, Y = quadratic_final_gaps(out.w, out.counts, arms.sigma2, T, ETA, star)
            e, se, beta = control_variate_mean(X, Y, optimal)
            est.append(e / optimal)
            jack.append(se / optimal)
            naive.append((X - beta * Y).std(ddof=2) / np.sqrt(R) / optimal)
            Xs.append(X)
            Ys.append(Y)
        pooled, pooled_se, _ = control_variate_mean(np.concatenate(Xs), np.concatenate(Ys),
                                                    optimal)  # fmt: skip
        print(f"| {name} | {np.mean(est):.3f} | {np.std(est, ddof=1):.3f} | {np.mean(jack):.3f} "
              f"| {np.mean(naive):.3f} | {pooled / optimal:.3f} ± {pooled_se / optimal:.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
