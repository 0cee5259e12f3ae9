"""
Figure 1, quickly
=================

The paper's Figure 1 (Section 6: F(w) = ½‖w‖², d = 2, σ² = (50, 26, 16.7) at T = 50) on 200
realizations instead of 2000: EE-Grad's expected gap against every fixed mini-batch oracle and
their closed form. ``eegrad reproduce figure1`` runs the full version.
"""

from eegrad.plots import plot_study
from eegrad.studies import load_preset, run_study

cfg = load_preset("figure1", {"realizations": 200, "T": [50, 200]})
study = run_study(cfg)
fig = plot_study(study)
fig  # noqa: B018 - the gallery shows the last expression

# %%
# The final expected gaps, EE-Grad against the best fixed oracle:
for T in cfg.T:
    ee = study.column("gap_mean", T=T, method="eegrad")[-1]
    best = min(study.column("gap_mean", T=T, method=f"mbo{n}")[-1] for n in (1, 2, 3))
    print(f"T = {T}: EE-Grad {ee:.3g}, best fixed oracle {best:.3g}, ratio {ee / best:.2f}")
