"""The README's Python examples run as written (except those that say they need the
user's own data on their first line: `# needs: ...`)."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README.md has no python example"
    for block in blocks:
        if block.startswith("# needs:"):
            compile(block, str(README), "exec")  # at least it parses
            continue
        exec(compile(block, str(README), "exec"), {})
    printed = capsys.readouterr().out
    assert "PRF(precision=" in printed and "'mAP'" in printed
