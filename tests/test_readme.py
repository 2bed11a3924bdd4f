"""The Python examples of the README and docs/architecture.md run as written (except
those that say they need the user's own data on their first line: `# needs: ...`)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


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


def test_architecture_streaming_examples_run(capsys):
    """Both models streamed block by block equal their whole-sequence call."""
    blocks = re.findall(r"```python\n(.*?)```", ARCHITECTURE.read_text(), flags=re.DOTALL)
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, str(ARCHITECTURE), "exec"), {})
    printed = capsys.readouterr().out.split()
    assert printed == ["True", "True", "0.4"]
