"""eegrad example wall-clock: the real client path under a time budget, alone and together."""

import pytest

pytest.importorskip("flwr")  # the 'flower' extra
pytest.importorskip("sklearn")  # the 'examples' extra

from eegrad import InvalidParameterError
from eegrad.examples.wall_clock import COLUMNS, MODES, measure, summarise


def test_every_client_spends_its_time_share_and_reports_whole_chunks():
    spu, chunk = 1e-4, 8
    rows = measure((1, 3), reps=2, seconds_per_unit=spu, chunk=chunk)
    assert all(set(r) == set(COLUMNS) for r in rows)
    assert len(rows) == 2 * (1 + 3) * len(MODES)
    for r in rows:
        assert r["share"] == pytest.approx((100.0 - 0.5 * (r["n"] - 1)) / r["n"])
        assert r["samples"] >= chunk
        assert r["samples"] % chunk == 0
        assert r["seconds"] >= r["share"] * spu  # it computes until its share is spent
    summary = summarise(rows)
    assert [(s["n"], s["mode"]) for s in summary] == [(n, m) for n in (1, 3) for m in MODES]
    for s in summary:
        assert s["samples_mean"] > 0
        assert s["samples_per_second"] > 0


@pytest.mark.parametrize(("kw", "name"), [({"ns": (0,)}, "ns"), ({"reps": 0}, "reps"),
                                          ({"ns": (300,)}, "ns"),
                                          ({"seconds_per_unit": 0.0}, "seconds_per_unit")])  # fmt: skip
def test_bad_input_names_the_parameter(kw, name):
    with pytest.raises(InvalidParameterError, match=repr(name)):
        measure(**kw)
