import pytest

from eegrad.config import ConfigError, preset_names
from eegrad.experiment import build_arms, build_selector
from eegrad.studies import config_from_dict, load_config, load_preset, run_study


def test_presets_load_and_match_the_paper():
    assert {"figure1", "theorem1", "theorem2"} <= set(preset_names())
    cfg = load_preset("figure1")
    assert cfg.T == [50, 200, 3000]
    assert (cfg.K, cfg.eta, cfg.realizations) == (5, [0.85], 2000)
    assert cfg.objective.d == 2
    assert build_arms(cfg, 200).sigma2.tolist() == pytest.approx([200.0, 104.0, 66.8])
    sel = build_selector(cfg.selector)
    assert (sel.alpha, sel.beta, sel.P, sel.c) == (2.5, "oracle", "oracle", 1.0)


def test_overrides_use_dotted_keys():
    cfg = load_preset("figure1", {"selector.c": 10.0, "realizations": 7})
    assert cfg.selector.c == 10.0
    assert cfg.realizations == 7


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"realisations": 10}, r"Unknown key 'realisations' in t.toml\. Expected one of: study"),
        ({"selector": {"gamma": 1}}, r"Unknown key 'selector.gamma' in t.toml"),
        ({"K": "five"}, r"Key 'K' in t.toml must be integer\. Got 'five' \(str\)"),
        ({"K": 2.5}, r"Key 'K' in t.toml must be integer"),
        ({"T": ["a"]}, r"Key 'T' in t.toml must be a list of integers"),
        ({"selector": {"c": "big"}}, r"Key 'selector.c' in t.toml must be float"),
        ({"selector": 3}, r"Key 'selector' in t.toml must be a table"),
        ({"baselines": 1}, r"Key 'baselines' in t.toml must be boolean"),
        ({"study": "lemma9"}, r"Key 'study' in t.toml must be one of 'sgd'"),
        ({"noise": "cauchy"}, r"Key 'noise'.*one of"),
        ({"realizations": 0}, r"Key 'realizations'.*>= 1"),
        ({"eta": [0.5, -1.0]}, r"Key 'eta'.*positive"),
        ({"eta": [0.5, 0.6]}, r"Key 'eta'.*one step size for study 'sgd'"),
        ({"arms": {}}, r"Key 'arms'.*exactly one of 'sigma2' and 'costs'"),
    ],
)
def test_config_errors_name_key_file_and_type(data, match):
    data = {"arms": {"sigma2": [1.0, 2.0]}} | data
    with pytest.raises(ConfigError, match=match):
        config_from_dict(data, where="t.toml")


def test_toml_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("K = [\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="Unknown preset 'figure9'"):
        load_preset("figure9")


def test_costs_config_builds_arms(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text(
        "[arms.costs]\nkind = 'power'\nc_min = 0.1\na = 1.0\np = 2.0\n"
        "aggregation = 'linear'\nb = 0.04\nbudget = 1.0\n"
    )
    cfg = load_config(f)
    assert cfg.name == "c"
    arms = build_arms(cfg, 50)
    assert (arms.N, arms.n_star) == (7, 4)


def test_config_is_data_not_code(tmp_path):
    f = tmp_path / "x.toml"
    f.write_text("name = \"__import__('os').system('false')\"\n[arms]\nsigma2 = [1.0]\n")
    cfg = load_config(f)
    assert cfg.name.startswith("__import__")  # kept as a string, never evaluated


@pytest.mark.parametrize(
    ("preset", "overrides", "key"),
    [
        ("rules", {"K": 3}, "'K' in .* is not read by study 'rules'"),
        ("theorem1", {"profiles": [{"name": "p", "sigma2": [1.0]}]}, "'profiles' in"),
        ("figure1", {"w": [1.0, 1.0]}, "'w' in .* is not read by study 'sgd'"),
        ("rules", {"T": [4, 50]}, r"'T' in .* must be >= 2N = 6 for profile 'paper'"),
        ("rules", {"w": [1.0]}, "'w' in .* must be a list of d = 2 floats"),
        ("rules", {"rules": [{"rule": "memory_kl_lcb", "horizon": "KT"}]}, "'horizon' in"),
        ("memory", {"noise": "uniform"}, "'noise' in .* must be 'gaussian' for study 'memory'"),
        ("memory", {"realizations": 3}, "'realizations' in .* must be >= 4"),
        ("memory", {"objective.kind": "diagonal_quadratic", "objective.h": [1.0, 2.0]},
         "'objective.kind' in .* must be 'quadratic'"),
        ("theorem1", {"selector": {"rule": "kl_lcb"}}, "'selector.rule' in .* must be 'eegrad'"),
        ("theorem1", {"w": [0.0, 0.0]}, r"'w' in .* S\(w\) > 0"),
        ("theorem2", {"selector": {"rule": "thompson"}}, "'selector.rule' in .* must be 'eegrad'"),
        ("figure1", {"objective.kind": "diagonal_quadratic"}, "'objective.h' in"),
    ],
)
def test_a_study_s_own_keys_are_checked_when_read(preset, overrides, key):
    """Each study declares the keys it reads and checks them, alone and together, when the
    configuration is read: a file that loads is one that runs."""
    with pytest.raises(ConfigError, match=key):
        load_preset(preset, overrides)


def test_run_study_checks_a_configuration_built_in_code():
    import dataclasses

    cfg = dataclasses.replace(load_preset("memory"), noise="uniform")
    with pytest.raises(ConfigError, match="'noise' in the configuration"):
        run_study(cfg)
