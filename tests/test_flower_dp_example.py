"""eegrad example flower-dp: DP-FedAvg in Flower's own wrapper at a calibrated z, and the
summary's comparison."""

import logging

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("dp_accounting")
pytest.importorskip("sklearn")

from eegrad.examples import flower_dp


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def test_dp_fedavg_rows_spend_the_target_over_the_planned_rounds():
    """A fixed n in Flower's DifferentialPrivacyServerSideFixedClipping, z_n calibrated: the
    noise SD is z_n C/n, ε after R rounds is the target (calibrated to 0.1% on z, so ε within
    1% below it), and the gap falls from its start (ε = 16: at the release's true sensitivity,
    2C under replace-one neighbours, ε = 8 over 10 rounds of 5 of 200 buries the signal)."""
    rounds, target = 10, 16.0
    rows = flower_dp.run_one("dp-fedavg-5", 0, rounds, target)
    assert [r["step"] for r in rows] == list(range(1, rounds + 1))
    assert set(rows[0]) == set(flower_dp.COLUMNS)
    z = rows[0]["noise_std"] * 5 / flower_dp.CLIP
    assert all(r["clients"] == 5 and r["noise_std"] == pytest.approx(z * flower_dp.CLIP / 5)
               for r in rows)  # fmt: skip
    assert target * 0.99 <= rows[-1]["epsilon"] <= target
    assert rows[-1]["objective_gap"] < rows[0]["objective_gap"]
    assert np.isfinite([r["objective_gap"] for r in rows]).all()


def test_summary_compares_the_default_with_the_best_and_median_fixed_n():
    rows = [{"method": m, "seed": s, "step": t, "objective_gap": g + 0.01 * s}
            for s in range(2) for t in range(1, 11)
            for m, g in (("default", 0.5), ("dp-fedavg-1", 0.9), ("dp-fedavg-2", 0.4),
                         ("dp-fedavg-3", 0.6))]  # fmt: skip
    s = flower_dp.summarise(rows)
    assert s["best_fixed"] == "dp-fedavg-2"
    assert s["median_fixed_gap"] == pytest.approx(0.605)
    assert s["default_over_best"] == pytest.approx(0.505 / 0.405)
    assert s["default_below_median"]
