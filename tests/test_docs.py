"""The documentation: every docstring example runs (doctest), and the Sphinx site builds with
warnings as errors (broken references, bad docstrings, bad math, a failing gallery script)."""

import doctest
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import eegrad

ROOT = Path(__file__).resolve().parents[1]
#: Modules whose import needs an optional extra, and the compiled kernels (Numba objects).
SKIP = ("eegrad.engines.numba_kernels", "eegrad.__main__")


def _modules():
    for info in pkgutil.walk_packages(eegrad.__path__, "eegrad."):
        if info.name not in SKIP:
            yield info.name


@pytest.mark.parametrize("name", sorted(_modules()))
def test_docstring_examples_run(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra (flwr, torch, scikit-learn) is missing
        pytest.skip(f"{name} needs an extra: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


@pytest.mark.slow
def test_site_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx", reason="the 'docs' extra")
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    html = tmp_path / "html"
    for page in ("index.html", "api.html", "guide/federated.html", "gallery/index.html",
                 "reference/configuration.html", "reference/cli.html", "report.html"):  # fmt: skip
        assert (html / page).exists(), page
    assert "memory_thompson" in (html / "reference/configuration.html").read_text()
    assert (html / "generated" / "eegrad.flower.EEGradStrategy.html").exists()
