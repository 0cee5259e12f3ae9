"""The Python examples of the README and of the user guide (docs/guide) run as written."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs" / "guide").glob("*.md"))]
BLOCKS = [(f"{page.relative_to(ROOT)} block {i}", code) for page in PAGES
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"),
                                              re.DOTALL))]  # fmt: skip


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_python_blocks_run(where, code, capsys):
    exec(compile(code, where, "exec"), {})  # noqa: S102 - our own documentation
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


def test_readme_is_a_front_door():
    """At most 200 lines, with the install line of the Flower part alone and its quickstart diff."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert 'pip install -e ".[flower]"' in text
    assert "+    strategy = choose_clients(FedAvg(" in text
