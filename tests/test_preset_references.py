"""Every preset, reduced, gives the same bytes as the tables kept in tests/data/presets."""

import pytest
from preset_references import HERE, REDUCED, write_reduced


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(REDUCED))
def test_reduced_preset_tables_are_unchanged(preset, tmp_path):
    for path in write_reduced(preset, tmp_path):
        kept = HERE / path.name
        assert path.read_bytes() == kept.read_bytes(), f"{path.name} differs from {kept}"
