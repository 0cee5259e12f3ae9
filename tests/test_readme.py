"""The README's quick start runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quick_start_runs(capsys):
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    exec(compile(code, "README quick start", "exec"), {})  # noqa: S102 - the README is ours
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "7 4"  # arms.N, arms.n_star of the cost model in the README


def test_readme_opens_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    first = blocks[0]
    assert "eegrad reproduce figure1" in first
    assert "python -m pytest" in first
