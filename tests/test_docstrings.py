"""Every backticked reference to project code in the docstrings and in docs/*.md names
something that exists. Read with `ast`, nothing is imported.

What is checked: a backticked dotted name, optionally called (`a.b.c` or `a.b(x, y)`),
whose first part is

- a project package (`cskws_jax.streaming.StreamDetector`, `metrics.detection_scores`);
- in a module's docstring, also a module of the same package (`decode.peaks` inside
  cskws_jax) or a project module the file imports under that name.

The name must be a module, a top-level name of one (defined or imported there), or a
member of a class defined there (methods, class attributes and dataclass fields,
`self.x` assignments). Anything else is skipped, not guessed: variables (`runner.step`),
third-party names (`jax.jit`), bare names, attributes of functions or values, and members
a class may inherit from a base class.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
TASKS = ("multiqt_jax", "cskws_jax", "ctc_jax")
PACKAGES = ("metrics", "speechkit", *TASKS, "experiments", "benchmarks")
REFERENCE = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`")


class Project:
    """The project's modules under `root`, parsed on demand."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.files: dict[str, pathlib.Path] = {}
        for package in PACKAGES:
            for path in (root / package).rglob("*.py"):
                parts = path.relative_to(root).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                self.files[name] = path

    @functools.cache  # noqa: B019 (one Project per test session)
    def tree(self, module: str) -> ast.Module:
        return ast.parse(self.files[module].read_text(), filename=str(self.files[module]))

    def package_of(self, module: str) -> str:
        is_package = self.files[module].name == "__init__.py"
        return module if is_package else module.rpartition(".")[0]

    def imports(self, module: str) -> dict[str, tuple[str, str | None]]:
        """Top-level bound name -> (module, None) for `import m [as x]`, or (module,
        name) for `from module import name [as x]` (relative imports resolved)."""
        bound = {}
        for node in self.tree(module).body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        bound[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        bound[top] = (top, None)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = self.package_of(module).split(".")
                    package = package[: len(package) - (node.level - 1)]
                    base = ".".join(package + ([node.module] if node.module else []))
                for alias in node.names:
                    bound[alias.asname or alias.name] = (base, alias.name)
        return bound

    def definitions(self, module: str) -> dict[str, ast.AST]:
        """Top-level names a module defines itself (functions, classes, assignments)."""
        found: dict[str, ast.AST] = {}
        for node in self.tree(module).body:
            for target in _defined(node):
                found[target] = node
        return found

    def opaque(self, module: str) -> bool:
        """Whether a module can define names `ast` cannot see (star import, __getattr__)."""
        for node in self.tree(module).body:
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return True
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                return True
        return False

    def resolve(self, parts: list[str]) -> bool | None:
        """True: exists; False: certainly missing; None: not decidable from the source."""
        for split in range(len(parts), 0, -1):
            module = ".".join(parts[:split])
            if module in self.files:
                return self._in_module(module, parts[split:])
        return None

    def _in_module(self, module: str, rest: list[str]) -> bool | None:
        if not rest:
            return True
        name, rest = rest[0], rest[1:]
        if f"{module}.{name}" in self.files:
            return self._in_module(f"{module}.{name}", rest)
        defined = self.definitions(module).get(name)
        if isinstance(defined, ast.ClassDef):
            return _in_class(defined, rest)
        if defined is not None:
            return True if not rest else None  # an attribute of a function or value
        imported = self.imports(module).get(name)
        if imported is not None:
            source, member = imported
            if member is None:
                return self.resolve(source.split(".") + rest)
            return self.resolve(source.split(".") + [member] + rest)
        return None if self.opaque(module) else False


def _defined(node: ast.AST) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.If | ast.Try | ast.With):  # e.g. try: import x except: x = None
        for child in ast.iter_child_nodes(node):
            names += _defined(child)
            if isinstance(child, ast.Import | ast.ImportFrom):
                names += [a.asname or a.name.split(".")[0] for a in child.names]
    if isinstance(node, ast.ExceptHandler):
        for child in node.body:
            names += _defined(child)
    return names


def _in_class(node: ast.ClassDef, rest: list[str]) -> bool | None:
    if not rest:
        return True
    members = set()
    for child in ast.walk(node):
        members.update(_defined(child) if child is not node else [])
        if (
            isinstance(child, ast.Attribute)
            and isinstance(child.ctx, ast.Store)
            and isinstance(child.value, ast.Name)
            and child.value.id == "self"
        ):
            members.add(child.attr)
    if rest[0] in members:
        return True if len(rest) == 1 else None
    return None if node.bases else False  # a base class may provide it


def _docstrings(tree: ast.Module):
    """(line, text) of the module's, its classes' and its functions' docstrings."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield node.body[0].lineno, text


def _local_modules(project: Project, module: str) -> dict[str, str]:
    """Names under which a module's docstrings may refer to other project modules."""
    package = project.package_of(module)
    names = {
        name.rpartition(".")[2]: name
        for name in project.files
        if name.rpartition(".")[0] == package and name != package
    }
    for bound, (source, member) in project.imports(module).items():
        target = source if member is None else f"{source}.{member}"
        if target in project.files:
            names[bound] = target
    return names


def broken_references(root: pathlib.Path, docs=("docs",)) -> list[str]:
    """'path:line: `reference`' for every reference under `root` that does not resolve."""
    project = Project(root)
    broken = []
    for module, path in sorted(project.files.items()):
        local = _local_modules(project, module)
        for line, text in _docstrings(project.tree(module)):
            for match in REFERENCE.finditer(text):
                parts = match.group(1).split(".")
                if parts[0] in PACKAGES:
                    found = project.resolve(parts)
                elif parts[0] in local:
                    found = project.resolve(local[parts[0]].split(".") + parts[1:])
                else:
                    continue
                if found is False:
                    where = line + text[: match.start()].count("\n")
                    broken.append(f"{path.relative_to(root)}:{where}: `{match.group(0)[1:-1]}`")
    for folder in docs:
        for path in sorted((root / folder).glob("*.md")):
            for number, text in enumerate(path.read_text().splitlines(), start=1):
                for match in REFERENCE.finditer(text):
                    parts = match.group(1).split(".")
                    if parts[0] in PACKAGES and project.resolve(parts) is False:
                        broken.append(f"{path.relative_to(root)}:{number}: `{match.group(1)}`")
    return broken


def test_docstring_and_docs_references_name_existing_code():
    broken = broken_references(ROOT)
    assert not broken, "references to code that does not exist:\n" + "\n".join(broken)


def test_a_missing_name_is_reported_and_undecidable_ones_are_not(source_tree):
    files = {
        "cskws_jax/decode.py": (
            "import dataclasses\n\n\ndef peaks():\n    pass\n\n\n"
            "@dataclasses.dataclass\nclass Config:\n    radius: int = 1\n\n"
            "    def window(self):\n        self.cached = 1\n"
        ),
        "cskws_jax/streaming.py": (
            '"""Uses `decode.peaks`, `cskws_jax.decode.Config.radius`, `decode.Config.window()`,\n'
            "`decode.Config.cached`, `detector.flush(state)`, `jax.jit`, `StreamDetector`.\n\n"
            "Broken: `decode.stream_detections(x)` and\n"
            '`cskws_jax.decode.Config.flush`."""\n'
            "from cskws_jax import decode as decode_lib\n"
        ),
        "metrics/__init__.py": (
            '"""`metrics.detection_scores` and `metrics.sequence.prf`."""\n'
            "from metrics.detection import detection_scores\n"
        ),
        "metrics/detection.py": "def detection_scores():\n    pass\n",
        "docs/a.md": (
            "Run `cskws_jax.decode.peaks(x)`.\n\nNot `cskws_jax.decode.decode`, fine `np.pad`.\n"
        ),
    }
    tmp_path = source_tree(files, PACKAGES)
    assert broken_references(tmp_path) == [
        "cskws_jax/streaming.py:4: `decode.stream_detections(x)`",
        "cskws_jax/streaming.py:5: `cskws_jax.decode.Config.flush`",
        "metrics/__init__.py:1: `metrics.sequence.prf`",
        "docs/a.md:3: `cskws_jax.decode.decode`",
    ]
