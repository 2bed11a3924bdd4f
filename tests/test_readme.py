"""README.md and docs/*.md stay true to the code, cheaply (no training, no corpora):

- their Python examples run as written (those that say they need the user's own data on
  their first line, `# needs: ...`, are only compiled); docs/architecture.md's two
  streaming examples have their own test, docs/metrics.md's worked examples theirs
  (tests/metrics/test_docs_examples.py);
- every relative link points to an existing file, and every anchor to a heading of it;
- every `make X` in a code block is a target of the Makefile;
- every `python -m module` in a code block imports, and its command line knows the flags
  used: argparse commands by their `--help`, the experiments' absl commands by their
  defined flags and, for `--config.a.b=...`, by the field in the config file named by
  `--config=FILE:PRESET`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import pathlib
import re
import shlex

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
OWN_EXAMPLE_TESTS = {ARCHITECTURE.name, "metrics.md"}


def _blocks(path: pathlib.Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), flags=re.DOTALL)


def _name(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


def test_python_examples_run(capsys):
    ran = []
    for path in DOCS:
        if path.name in OWN_EXAMPLE_TESTS:
            continue
        for block in _blocks(path, "python"):
            code = compile(block, str(path), "exec")  # at least it parses
            if not block.startswith("# needs:"):
                exec(code, {})
                ran.append(_name(path))
    assert ran, "no runnable python example in README.md or docs/"
    printed = capsys.readouterr().out
    assert "PRF(precision=" in printed and "'mAP'" in printed  # docs/usage.md's metrics


def test_architecture_streaming_examples_run(capsys):
    """Both models streamed block by block equal their whole-sequence call."""
    blocks = _blocks(ARCHITECTURE, "python")
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, str(ARCHITECTURE), "exec"), {})
    printed = capsys.readouterr().out.split()
    assert printed == ["True", "True", "0.4"]


# ---------------------------------------------------------------- links and anchors


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"[`*]|\[|\]\([^)]*\)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: pathlib.Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _links(path: pathlib.Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_relative_links_and_anchors_exist():
    broken = []
    for path in DOCS:
        for link in _links(path):
            if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
                continue
            target, _, anchor = link.partition("#")
            file = (path.parent / target).resolve() if target else path
            if not file.exists():
                broken.append(f"{_name(path)}: {link}: no such file")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{_name(path)}: {link}: no heading with that anchor")
    assert not broken, "\n".join(broken)


def test_slug_follows_github():
    assert _slug("CS-KWS, `synthetic_kws/quick`") == "cs-kws-synthetic_kwsquick"
    assert _slug("The main job (`make demo`)") == "the-main-job-make-demo"
    assert _slug("INSTANCE precision / recall / F1") == "instance-precision--recall--f1"


# ---------------------------------------------------------------- commands


def _commands(path: pathlib.Path) -> list[list[str]]:
    """Each shell command of the document's bash blocks as tokens (continuations joined,
    comments dropped, pipelines and `&&` split)."""
    commands = []
    for block in _blocks(path, "bash"):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            tokens = shlex.split(line, comments=True)
            current: list[str] = []
            for token in tokens + ["|"]:
                if token in ("|", "&&", ";", "||"):
                    if current:
                        commands.append(current)
                    current = []
                else:
                    current.append(token)
    return commands


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^([A-Z_]+)\s*[:?]?=\s*(\S+)\s*$", text, flags=re.MULTILINE))
    targets = set()
    for names in re.findall(r"^([^\s#=:][^=:]*?):(?!=)", text, flags=re.MULTILINE):
        for name in names.split():
            for _ in range(3):  # $(A) inside $(B)
                name = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), ""), name)
            targets.add(name)
    return targets


def test_make_targets_exist():
    targets = _make_targets()
    assert {"demo", "test"} <= targets
    missing = [
        f"{_name(path)}: make {command[1]}"
        for path in DOCS
        for command in _commands(path)
        if command[0] == "make" and len(command) > 1 and "=" not in command[1]
        if command[1] not in targets
    ]
    assert not missing, "\n".join(missing)


def _module_commands() -> list[tuple[str, str, list[str]]]:
    """(document, module, arguments) of every `python -m module ...` in a bash block, and
    of every `stj-...` command (experiments.commands; stj-export as cskws_jax.export,
    flags spelled with - as the module spells them)."""
    from experiments import commands

    modules = {**commands.COMMANDS, "stj-export": "cskws_jax.export"}
    found = []
    for path in DOCS:
        for command in _commands(path):
            for i, token in enumerate(command[:-1]):
                if token == "-m" and re.search(r"python[\d.]*$", command[max(i - 1, 0)]):
                    found.append((_name(path), command[i + 1], command[i + 2 :]))
                    break
                if token in modules:
                    module = modules[token]
                    arguments = command[i + 1 :]
                    if module.startswith("experiments."):
                        arguments = commands.snake_flags(arguments)
                    found.append((_name(path), module, arguments))
                    break
    return found


def _flags(arguments: list[str]) -> list[tuple[str, str | None]]:
    flags = []
    for argument in arguments:
        if argument.startswith("--"):
            name, equals, value = argument.partition("=")
            flags.append((name, value if equals else None))
    return flags


def _argparse_help(module) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        module.main(["--help"])
    return out.getvalue()


def _config_fields(spec: str) -> object:
    path, _, preset = spec.partition(":")
    loader = importlib.util.spec_from_file_location("_doc_config", ROOT / path)
    config_module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(config_module)
    return config_module.get_config(preset) if preset else config_module.get_config()


def _has_field(config, dotted: str) -> bool:
    node = config
    for part in dotted.split("."):
        try:
            node = node[part]
        except (KeyError, TypeError, AttributeError):
            return False
    return True


MODULE_COMMANDS = _module_commands()


def test_documents_have_module_commands():
    modules = {module for _, module, _ in MODULE_COMMANDS}
    assert {"cskws_jax.detect", "multiqt_jax.track", "experiments.evaluate"} <= modules


@pytest.mark.parametrize(
    "module", sorted({module for _, module, _ in MODULE_COMMANDS}), ids=lambda m: m
)
def test_module_commands_import_and_know_their_flags(module):
    imported = importlib.import_module(module)
    source = pathlib.Path(imported.__file__).read_text()
    uses = [(doc, args) for doc, name, args in MODULE_COMMANDS if name == module]
    absl = "common.main(" in source or "app.run(" in source
    if absl:
        from absl import flags

        known = set(flags.FLAGS)
    else:
        assert hasattr(imported, "main"), f"{module} has no main()"
        help_text = _argparse_help(imported)
    unknown = []
    for doc, arguments in uses:
        flags_used = _flags(arguments)
        config = dict(flags_used).get("--config")
        for name, _value in flags_used:
            if absl and name.startswith("--config."):
                if not config or not _has_field(_config_fields(config), name[len("--config.") :]):
                    unknown.append(f"{doc}: {module} {name}: no such config field")
            elif absl:
                if name[2:] not in known:
                    unknown.append(f"{doc}: {module} {name}: no such flag")
            elif not re.search(rf"{re.escape(name)}\b", help_text):
                unknown.append(f"{doc}: {module} {name}: not in its --help")
    assert not unknown, "\n".join(unknown)
