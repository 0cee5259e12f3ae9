"""The core install needs NumPy and SciPy only: with the 'cli' extra's modules missing, the
library proper imports and runs (estimate_gradient, GradientEstimator, eegrad.flower), and the
command line and the figures stop with an error that names the extra."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys
    for name in ("matplotlib", "tqdm", "joblib", "markdown_it"):  # as if not installed
        sys.modules[name] = None
    import numpy as np
    import eegrad
    from eegrad import Arms, GaussianOracle, GradientEstimator, Quadratic, default_selector
    from eegrad import estimate_gradient

    oracle = GaussianOracle(Quadratic(2), Arms([3.0, 1.0, 2.0]))
    out = estimate_gradient(oracle, default_selector(), np.ones((4, 2)), 12, rng=0)
    est = GradientEstimator(default_selector(), 3, T=12, dim=2, rng=0)
    while not est.done:
        n = est.ask()
        est.tell(np.ones(2) / n)
    print("core ok", out.gradient.shape, est.result().shape)
    if {flower}:
        from flwr.app import Array, ArrayRecord
        from eegrad.flower import EEGradStrategy
        print("flower ok")
    try:
        import eegrad.plots
    except ModuleNotFoundError as exc:
        print("plots:", exc)
    from eegrad.cli import main
    print("cli returns", main(["reproduce", "figure1", "--quiet"]))
""")


def test_the_core_runs_without_the_cli_extra():
    try:
        import flwr  # noqa: F401

        flower = True
    except ImportError:
        flower = False
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(flower=flower)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "core ok (4, 2) (2,)" in out
    if flower:
        assert "flower ok" in out
    assert "plots: eegrad.plots needs matplotlib" in out
    assert "install the 'cli' extra" in out
    assert "cli returns 2" in out
    assert "eegrad's command line needs matplotlib" in proc.stderr
