"""The README's Python examples run as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_python_blocks_run(index, capsys):
    exec(compile(BLOCKS[index], f"README block {index}", "exec"), {})  # noqa: S102 - our README
    assert capsys.readouterr().out  # every example prints what it computes


def test_quick_start_output(capsys):
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    exec(compile(code, "README quick start", "exec"), {})  # noqa: S102 - our README
    assert capsys.readouterr().out.splitlines()[0] == "7 4"  # arms.N, arms.n_star


def test_readme_opens_with_the_two_commands():
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    first = blocks[0]
    assert "eegrad reproduce figure1" in first
    assert "python -m pytest" in first
