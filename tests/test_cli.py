"""The command line end to end, with small R in temporary folders."""

import json

import numpy as np
import pytest
from conftest import preset_copy

from eegrad.cli import main
from eegrad.results import read_table
from eegrad.theory import fixed_oracle_rate

SGD_TOML = """
study = "sgd"
name = "small"
seed = 11
realizations = {R}
T = [50]
K = 4
eta = 0.85

[arms]
sigma2 = [50.0, 26.0, 16.7]

[selector]
rule = "eegrad"
c = 1.0
"""


def test_figure1_end_to_end(tmp_path):
    out = tmp_path / "fig"
    assert main(["reproduce", "figure1", "--realizations", "8", "--out", str(out), "-q"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "figure1.csv", "figure1.pdf", "figure1.png", "metadata.json"
    ]  # fmt: skip
    header = (out / "figure1.csv").read_text().splitlines()[0]
    assert header == "T,method,k,gap_mean,gap_se,realizations"
    rows = read_table(out / "figure1.csv")
    assert len(rows) == 3 * 4 * 6
    assert {r["method"] for r in rows} == {"eegrad", "mbo1", "mbo2", "mbo3"}
    assert {r["T"] for r in rows} == {"50", "200", "3000"}
    assert sorted({int(r["k"]) for r in rows}) == [1, 2, 3, 4, 5, 6]
    assert all(r["realizations"] == "8" for r in rows)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["seed"] == 2024
    sel = meta["config"]["selector"]
    assert {k: sel[k] for k in ("rule", "alpha", "beta", "P", "c")} == {
        "rule": "eegrad", "alpha": 2.5, "beta": "oracle", "P": "oracle", "c": 1.0
    }  # fmt: skip
    assert "numpy" in meta["environment"]["versions"]
    assert meta["wall_time_s"] >= 0
    assert (out / "figure1.png").read_bytes()[:4] == b"\x89PNG"


def test_fixed_oracle_rows_agree_with_closed_form(tmp_path):
    """gap_mean of MBO(n) at k equals J_1 ρ_n^{k−1} (J_1 the measured mean at k = 1, shared by
    all methods through common initial iterates) within 3 of the row's standard errors."""
    cfg = tmp_path / "small.toml"
    cfg.write_text(SGD_TOML.format(R=3000))
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "-q"]) == 0
    rows = read_table(tmp_path / "o" / "small.csv")
    for n, s2 in enumerate([50.0, 26.0, 16.7], start=1):
        r = [x for x in rows if x["method"] == f"mbo{n}"]
        mean = np.array([float(x["gap_mean"]) for x in r])
        se = np.array([float(x["gap_se"]) for x in r])
        J = mean[0] * fixed_oracle_rate(0.85, s2, 50) ** np.arange(len(r))
        assert np.all(np.abs(mean - J) <= 3 * se), (n, (mean - J) / se)


def test_same_seed_gives_byte_identical_csv(tmp_path):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SGD_TOML.format(R=64))
    for d in ("a", "b"):
        assert main(["run", str(cfg), "--out", str(tmp_path / d), "-q"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "c"), "-q", "--seed", "12"]) == 0
    a = (tmp_path / "a" / "small.csv").read_bytes()
    assert a == (tmp_path / "b" / "small.csv").read_bytes()
    assert a != (tmp_path / "c" / "small.csv").read_bytes()


def test_theorem_studies_run(tmp_path):
    for name, replace in (("theorem1", {"T": "[10, 40]"}), ("theorem2", {"eta": "[0.2, 0.85]"})):
        f = preset_copy(tmp_path, name, replace)
        out = tmp_path / name
        assert main(["run", str(f), "--out", str(out), "-R", "30", "-q"]) == 0
        rows = read_table(out / f"{name}.csv")
        assert rows
        if name == "theorem1":
            ee = [r for r in rows if r["method"] == "eegrad"]
            assert len(ee) == 2 * 3  # two T, three c
            assert all(float(r["Z_T"]) > float(r["sigma2_star_over_T"]) for r in ee)
        else:
            assert {r["method"] for r in rows} == {"optimal", "eegrad"}


def test_reproduce_all_writes_report(tmp_path):
    out = tmp_path / "all"
    assert main(["reproduce", "all", "-R", "6", "--out", str(out), "-q"]) == 0
    md = (out / "report.md").read_text()
    for claim in ("Claim (Section 6, Figure 1)", "Claim (Theorem 1)", "Claim (Theorem 2)",
                  "Claim (ours, not the paper's)", "Claim (ours)."):  # fmt: skip
        assert claim in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5


def test_config_error_writes_nothing(tmp_path, capsys):
    f = tmp_path / "bad.toml"
    f.write_text("K = 'five'\n[arms]\nsigma2 = [1.0]\n")
    out = tmp_path / "out"
    assert main(["run", str(f), "--out", str(out), "-q"]) == 2
    assert "Key 'K' in" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(SystemExit) as exc:  # a bad flag: argparse's exit 2, naming the flag
        main(["reproduce", "figure1", "--alpha", "2", "--out", str(out), "-q"])
    assert exc.value.code == 2
    assert "--alpha" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("argv", [["--help"], ["reproduce", "--help"], ["run", "--help"]])
def test_help(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "usage: eegrad" in text
    if argv[0] == "reproduce":
        assert "alpha = 2.5" in text
        assert "c = 1" in text
        assert "--realizations" in text


def test_rules_study_and_overlay(tmp_path):
    f = preset_copy(tmp_path, "rules", {"T": "[20, 60]"})
    out = tmp_path / "rules"
    assert main(["run", str(f), "--out", str(out), "-R", "20", "-q"]) == 0
    rows = read_table(out / "rules.csv")
    assert rows[0].keys() == {"profile", "T", "method", "regret", "regret_se", "lai_robbins",
                              "lock_in", "realizations"}  # fmt: skip
    assert {r["profile"] for r in rows} == {"paper", "middle", "near-tie"}
    assert {r["method"] for r in rows} >= {"eegrad-c1", "kl_lcb", "chi2_lcb", "thompson"}
    pulls = read_table(out / "rules_pulls.csv")
    for prof in ("paper", "middle"):
        for T in ("20", "60"):
            total = sum(
                float(p["pulls_mean"])
                for p in pulls
                if p["profile"] == prof and p["T"] == T and p["method"] == "thompson"
            )
            assert total == pytest.approx(float(T))  # mean pulls sum to T
    # figure1 with an overlaid rule: the other methods' numbers do not change.
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["reproduce", "figure1", "-R", "30", "--out", str(a), "-q"]) == 0
    assert main(["reproduce", "figure1", "-R", "30", "--out", str(b), "-q", "--rule",
                 "thompson"]) == 0  # fmt: skip
    ra, rb = read_table(a / "figure1.csv"), read_table(b / "figure1.csv")
    assert {r["method"] for r in rb} == {"eegrad", "thompson", "mbo1", "mbo2", "mbo3"}
    assert ra == [r for r in rb if r["method"] != "thompson"]


def test_rule_aliases_name_the_classes_the_rules_build():
    """--rule accepts class names; each must build that very class (no stale alias)."""
    from eegrad.cli import _overlay_rules, _registered_rule
    from eegrad.config import SelectorConfig
    from eegrad.experiment import build_selector

    for info in _overlay_rules():
        rule = _registered_rule(info.cls.__name__)
        assert rule == info.name
        assert type(build_selector(SelectorConfig(rule=rule))).__name__ == info.cls.__name__


@pytest.mark.parametrize(("argv", "flag", "rule"), [
    (["reproduce", "figure1", "--realizations", "-5"], "--realizations", "an integer >= 1"),
    (["reproduce", "figure1", "--seed", "-1"], "--seed", "an integer >= 0"),
    (["reproduce", "figure1", "--alpha", "2"], "--alpha", "a finite number > 2"),
    (["reproduce", "theorem1", "--c", "0"], "--c", "a finite number > 0"),
    (["reproduce", "figure1", "--beta", "-3"], "--beta", "a finite number > 0 or 'oracle'"),
    (["example", "flower", "--jobs", "0"], "--jobs", "or -1 for every core"),
])  # fmt: skip
def test_bad_flags_are_named_as_typed(argv, flag, rule, capsys):
    # The user typed a flag: the error names the flag and the rule, not a preset's file.
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err
    assert rule in err
    assert ".toml" not in err


def test_python_m_eegrad_runs_the_command():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "eegrad", "--help"], capture_output=True,
                         text=True, check=False)  # fmt: skip
    assert out.returncode == 0
    assert "reproduce" in out.stdout


def test_output_files_keep_the_umask_permissions(tmp_path):
    # Atomic writes go through a private temporary file (0600); the result must have what a
    # plain open(..., "w") gives, so that a colleague in the group can read the results.
    import os

    from eegrad.results import write_json, write_table

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    write_table(tmp_path / "t.csv", [{"a": 1}], ("a",))
    write_json(tmp_path / "m.json", {"a": 1})
    expected = os.stat(plain).st_mode & 0o777
    for name in ("t.csv", "m.json"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == expected
