"""A method's identity is a value (eegrad.config.SelectorConfig): its names in tables and figures
derive from the rule and its parameters, as each rule's class says, and nothing parses them
back."""

import pytest

from eegrad.config import ConfigError, SelectorConfig
from eegrad.experiment import methods_of
from eegrad.selectors import FixedArm, MemoryKLLCB
from eegrad.studies import load_preset
from eegrad.studies.figures import legends


@pytest.mark.parametrize(
    ("method", "name", "legend"),
    [
        (SelectorConfig("fixed", params={"n": 3}), "mbo3", "MBO(3)"),
        (SelectorConfig("eegrad"), "eegrad", "EE-Grad"),
        (SelectorConfig("eegrad", params={"c": 1.0}), "eegrad", "EE-Grad"),
        (SelectorConfig("eegrad", params={"c": 10.0}), "eegrad-c10", "EE-Grad, c = 10"),
        (SelectorConfig("memory_kl_lcb"), "memory_kl_lcb", "kl-LCB with memory"),
        (SelectorConfig("memory_kl_lcb", params={"horizon": "KT"}), "memory_kl_lcb-hKT",
         "kl-LCB with memory, told K·T"),
        (SelectorConfig("memory_kl_lcb", params={"horizon": 500}), "memory_kl_lcb-h500",
         "kl-LCB with memory, told 500"),
        (SelectorConfig("thompson", "mine", {}), "mine", "Thompson (variance)"),
    ],
)
def test_names_and_legends_derive_from_the_value(method, name, legend):
    assert method.name == name
    assert method.legend == legend


def test_the_value_says_what_a_method_is():
    told = SelectorConfig(rule="memory_kl_lcb", params={"horizon": "KT"})
    assert told.keeps_memory
    assert told.value("horizon") == "KT"
    assert told.told_run_rounds == ("horizon",)  # MemoryKLLCB.run_rounds_params
    assert SelectorConfig("memory_kl_lcb", params={"horizon": 500}).told_run_rounds == ()
    assert not SelectorConfig("kl_lcb").keeps_memory
    assert SelectorConfig("eegrad").value("c") == 1.0  # the class's default
    assert isinstance(told.build(rounds=250), MemoryKLLCB)
    assert told.build(rounds=250).horizon == 250
    with pytest.raises(ConfigError, match="'horizon' = 'KT'"):
        told.build()
    assert isinstance(SelectorConfig("fixed", params={"n": 2}).build(), FixedArm)


def test_legends_fall_back_to_names_where_two_would_share_one():
    a = SelectorConfig("eegrad", "eegrad-a2", {"alpha": 2.0})
    b = SelectorConfig("eegrad", "eegrad-a3", {"alpha": 3.0})
    c = SelectorConfig("eegrad", params={"c": 10.0})
    assert legends([a, b, c]) == {"eegrad-a2": "eegrad-a2", "eegrad-a3": "eegrad-a3",
                                  "eegrad-c10": "EE-Grad, c = 10"}  # fmt: skip


def test_a_study_s_methods_from_its_configuration():
    names = [m.name for m in methods_of(load_preset("rules"))]
    assert names[:3] == ["eegrad-c1", "eegrad-c10", "eegrad-c100"]
    memory = methods_of(load_preset("memory"))
    assert [m.name for m in memory if m.keeps_memory] == [
        "memory_kl_lcb", "memory_kl_lcb-hKT", "memory_thompson"]  # fmt: skip
    fixed = [SelectorConfig("fixed", params={"n": n}) for n in (1, 2)]
    extra = methods_of(load_preset("figure1", {"rules": [{"rule": "fixed", "n": 1}]}), fixed)
    assert [m.name for m in extra] == ["eegrad", "mbo1", "mbo2"]  # mbo1 once: the rules' own
    with pytest.raises(ConfigError, match="Two methods are named 'mbo1'"):
        methods_of(load_preset("figure1", {"rules": [{"rule": "fixed", "n": 1}] * 2}))
