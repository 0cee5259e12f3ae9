"""The study registry: every study rebuilt from its results folder alone gives the same figure
data and report paragraph as the live run; a toy study registered in one place runs through
the pipeline, the sweeps' checks and the report."""

import numpy as np
import pytest

from eegrad.cli import main as cli
from eegrad.config import ConfigError
from eegrad.pipeline import run_to_folder
from eegrad.report import claims, report_from_results
from eegrad.results import format_value
from eegrad.studies import (
    Section,
    Study,
    StudyKind,
    all_studies,
    config_from_dict,
    load_preset,
    load_study,
    register_study,
    study_kind,
    unregister_study,
)

#: Small versions of the presets (each study's own ``small``; as tests/preset_references.py).
SMALL = {kind.preset: kind.small for kind in all_studies()}


def test_every_study_is_registered_with_its_preset():
    """The package's studies are found by walking the package (no list to edit), in the
    report's order, each with its preset, a quick configuration and a summary for the help."""
    assert [k.preset for k in all_studies()] == ["figure1", "theorem1", "theorem2", "rules",
                                                 "memory"]  # fmt: skip
    from eegrad.cli import reproduce_help

    help_text = reproduce_help()
    for kind in all_studies():
        assert kind.small
        assert f"{kind.preset}: {kind.summary}" in help_text
        assert study_kind(kind.preset) is kind
        assert load_preset(kind.preset).study == kind.name
    with pytest.raises(ConfigError, match="Key 'study' in t.toml must be one of"):
        config_from_dict({"study": "nope", "arms": {"sigma2": [1.0]}}, "t.toml")


@pytest.mark.slow
def test_a_report_rebuilt_from_results_alone_is_the_same(tmp_path):
    live = {}
    for preset, small in SMALL.items():
        cfg = load_preset(preset, {**small, "engine": "numpy"})
        study = run_to_folder(cfg, tmp_path / preset, quiet=True)
        live[preset] = (study, f"{preset}/{cfg.name}.png")
        loaded = load_study(tmp_path / preset)
        assert _cells(loaded.rows) == _cells(study.rows)
        assert set(loaded.tables) == set(study.tables)
        for key, value in study.extra.items():  # the facts the figure and paragraph need
            assert repr(loaded.extra[key]) == repr(value), key
    sections = report_from_results(tmp_path, "cmd")
    assert [(s.title, s.paragraphs, s.table) for s in sections] == [
        (s.title, s.paragraphs, s.table) for s in claims(live)]  # fmt: skip
    html = (tmp_path / "report.html").read_text()
    assert "<table>" in html
    assert html.count("data:image/png;base64,") == len(SMALL)
    assert "<strong>Claim (Theorem 1).</strong>" in html


def _cells(rows):
    """Rows as the CSV writes them (NaN equal to NaN, NumPy and Python floats alike)."""
    return [{k: format_value(v) for k, v in r.items()} for r in rows]


def test_cli_rebuilds_a_figure_and_the_report_from_results(tmp_path, capsys):
    cfg = load_preset("theorem2", {"realizations": 20, "eta": [0.5], "engine": "numpy"})
    run_to_folder(cfg, tmp_path / "theorem2", quiet=True)
    (tmp_path / "theorem2" / "theorem2.png").unlink()
    assert cli(["report", str(tmp_path / "theorem2"), "--figure"]) == 0
    assert (tmp_path / "theorem2" / "theorem2.png").stat().st_size > 0
    assert cli(["report", str(tmp_path)]) == 0
    assert "Theorem 2" in (tmp_path / "report.md").read_text()


@pytest.fixture
def toy_study():
    def run(cfg, tick):
        study = Study(cfg, ("T", "mean", "mean_se", "realizations"))
        for T in cfg.T:
            x = np.random.default_rng([cfg.seed, T]).standard_normal(cfg.realizations) / T
            study.rows.append({"T": T, "mean": float(x.mean()),
                               "mean_se": float(x.std(ddof=1) / np.sqrt(x.size)),
                               "realizations": cfg.realizations})  # fmt: skip
            tick(cfg.realizations)
        return study

    def plot(study):
        from matplotlib.figure import Figure

        fig = Figure()
        fig.add_subplot().plot(study.column("T"), study.column("mean"))
        return fig

    def section(study, image):
        return Section("Toy", [f"{len(study.rows)} rows"], image)

    kind = register_study(StudyKind(
        name="toy", preset="toy", columns=("T", "mean", "mean_se", "realizations"), run=run,
        work=lambda cfg: cfg.realizations * len(cfg.T), plot=plot, section=section,
        merge=(("T",), (("mean", "mean_se"),), ()),
    ))  # fmt: skip
    yield kind
    unregister_study("toy")


def test_a_toy_study_is_one_module(toy_study, tmp_path):
    cfg = config_from_dict({"study": "toy", "name": "toy", "T": [10, 20], "realizations": 5,
                            "arms": {"sigma2": [1.0]}})  # fmt: skip
    study = run_to_folder(cfg, tmp_path / "toy", quiet=True)
    assert [r["T"] for r in study.rows] == [10, 20]
    assert (tmp_path / "toy" / "toy.png").exists()
    assert load_study(tmp_path / "toy").rows == study.rows
    sections = report_from_results(tmp_path)
    assert [s.paragraphs for s in sections] == [["2 rows"]]


TOY_STUDY_MODULE = '''
"""A toy study: the mean of R standard normals per T (one module, found by discovery)."""
import numpy as np

from eegrad.studies.base import Section, Study, StudyKind, register_study


def run(cfg, tick):
    study = Study(cfg, ("T", "mean"))
    for T in cfg.T:
        x = np.random.default_rng([cfg.seed, T]).standard_normal(cfg.realizations)
        study.rows.append({"T": T, "mean": float(x.mean())})
        tick(cfg.realizations)
    return study


KIND = register_study(StudyKind(
    name="toy_found", preset="toy_found", columns=("T", "mean"), run=run,
    work=lambda cfg: cfg.realizations * len(cfg.T), plot=lambda study: None,
    section=lambda study, image: Section("Toy", [], image), summary="a toy.",
    small={"realizations": 3},
))
'''


def test_a_study_module_placed_in_the_package_is_found(tmp_path, monkeypatch):
    """Registration by discovery: a module in the studies package (here a folder added to its
    path) is found by the registry with no list to edit, runs, and sorts after the package's
    own studies (default rank)."""
    import sys

    import eegrad.studies
    from eegrad.studies import run_study

    (tmp_path / "toy_found_study.py").write_text(TOY_STUDY_MODULE)
    monkeypatch.setattr(eegrad.studies, "__path__", [*eegrad.studies.__path__, str(tmp_path)])
    try:
        kinds = all_studies()
        assert kinds[-1].name == "toy_found"
        cfg = config_from_dict({"study": "toy_found", "name": "t", "T": [5, 7],
                                "realizations": 4, "arms": {"sigma2": [1.0]}})  # fmt: skip
        assert [r["T"] for r in run_study(cfg).rows] == [5, 7]
    finally:
        unregister_study("toy_found")
        sys.modules.pop("eegrad.studies.toy_found_study", None)
