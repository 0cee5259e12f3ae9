"""Reduced runs of every shipped preset, whose CSVs are kept in ``tests/data/presets``.

The tables a refactoring must leave byte for byte as they were: ``python
tests/preset_references.py`` writes them (run it only when a change of results is intended, and
say why in the commit); ``tests/test_preset_references.py`` compares a fresh run with them.
"""

from __future__ import annotations

from pathlib import Path

from eegrad.results import write_table
from eegrad.studies import load_preset, run_study

HERE = Path(__file__).parent / "data" / "presets"

#: Per preset: the overrides that make it small (the NumPy engine: the same bytes everywhere).
REDUCED = {
    "figure1": {"realizations": 16},
    "theorem1": {"realizations": 16, "T": [10, 100, 1000]},
    "theorem2": {"realizations": 200},
    "rules": {"realizations": 8, "T": [50, 200, 1000]},
    "memory": {"realizations": 8, "T": [50, 200]},
}


def write_reduced(name: str, out: Path) -> list[Path]:
    """Run the reduced preset and write its tables into ``out``; returns their paths."""
    cfg = load_preset(name, {**REDUCED[name], "engine": "numpy"})
    study = run_study(cfg)
    paths = [out / f"{cfg.name}.csv"]
    write_table(paths[0], study.rows, study.columns)
    for stem, (rows, columns) in study.tables.items():
        paths.append(out / f"{stem}.csv")
        write_table(paths[-1], rows, columns)
    return paths


if __name__ == "__main__":
    HERE.mkdir(parents=True, exist_ok=True)
    for preset in REDUCED:
        for path in write_reduced(preset, HERE):
            print(f"wrote {path}")
