"""The packages' import layering (docs/architecture.md), read from the source with `ast`:
nothing is imported, so the check costs milliseconds and sees imports inside functions.

    metrics                      imports no other project package
    speechkit                    imports no task package, nor experiments / benchmarks
    ctc_jax                      the CTC recogniser: imports no other task package, save
                                 that its corpora (ctc_jax.datasets) are drawn from
                                 MultiQT's calls and import multiqt_jax.datasets alone
    multiqt_jax                  may import ctc_jax (the text modality reads the
                                 recogniser's outputs), not its corpora nor cskws_jax
    cskws_jax                    imports no other task package
    (the three task packages)    import neither experiments nor benchmarks
    experiments, benchmarks      may import everything below them
    experiments.scoring          imports no runner (experiments.multiqt, .cskws,
                                 .recogniser, .studies, .ship) nor the command line
                                 experiments.evaluate: they all score through it

so the imports between multiqt_jax and ctc_jax close no circle: ctc_jax's corpora read
multiqt_jax's corpora, multiqt_jax reads ctc_jax's recogniser, which reads neither.
Inside each package no modules import each other in a circle, imports inside functions
included: deferring an import hides a cycle from Python, not from readers.
"""

from __future__ import annotations

import ast
import collections
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
TASKS = ("multiqt_jax", "cskws_jax", "ctc_jax")
PACKAGES = ("metrics", "speechkit", *TASKS, "experiments", "benchmarks")
TOP = ("experiments", "benchmarks")
RUNNERS = tuple(
    f"experiments.{name}" for name in ("multiqt", "cskws", "recogniser", "studies", "ship")
)
# part (a package or a subpackage; a module follows the longest part that holds it) ->
# the project modules its modules may not import, each with everything under it
FORBIDDEN: dict[str, frozenset[str]] = {
    "metrics": frozenset(PACKAGES) - {"metrics"},
    "speechkit": frozenset({*TASKS, *TOP}),
    "multiqt_jax": frozenset({"cskws_jax", "ctc_jax.datasets", *TOP}),
    "cskws_jax": frozenset({"multiqt_jax", "ctc_jax", *TOP}),
    "ctc_jax": frozenset({"multiqt_jax", "cskws_jax", *TOP}),
    "ctc_jax.datasets": frozenset({"multiqt_jax", "cskws_jax", *TOP}),
    "experiments": frozenset(),
    "experiments.scoring": frozenset({*RUNNERS, "experiments.evaluate"}),
}
# part -> the modules under a forbidden one that it may import all the same
EXCEPTIONS: dict[str, frozenset[str]] = {"ctc_jax.datasets": frozenset({"multiqt_jax.datasets"})}


def imported_modules(tree: ast.AST, module: str):
    """(line, dotted name as written, absolute dotted name, the absolute names it
    imports) of every import in a module's tree: `import a.b` imports a.b, `from a import
    b, c` a.b and a.c (modules or names in a); relative imports are resolved against
    `module` (its own dotted name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, f"import {alias.name}", alias.name, (alias.name,)
        elif isinstance(node, ast.ImportFrom):
            dots = "." * node.level
            written = f"from {dots}{node.module or ''} import " + ", ".join(
                alias.name for alias in node.names
            )
            if node.level:
                base = module.split(".")[: -node.level]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = tuple(f"{target}.{alias.name}" for alias in node.names)
            yield node.lineno, written, target, names


def module_names(relative: pathlib.Path) -> tuple[str, str]:
    """(dotted module name, the name relative imports resolve against) of a source file
    by its path relative to the root: a package's `__init__.py` is the package, and
    resolves as `package.__init__` so that `from . import x` means `package.x`."""
    parts = relative.with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), ".".join(parts)
    return ".".join(parts), ".".join(parts)


def _under(name: str, prefixes) -> str | None:
    """The first of `prefixes` (by name) that is `name` or a package holding it."""
    return next((p for p in sorted(prefixes) if name == p or name.startswith(p + ".")), None)


def part_of(module: str) -> str:
    """The part of FORBIDDEN whose rules `module` follows: the longest that holds it."""
    return max((p for p in FORBIDDEN if _under(module, (p,))), key=len)


def layering_violations(root: pathlib.Path) -> list[str]:
    """'path:line: `import ...` (part may not import other)' for every import under
    `root` that breaks FORBIDDEN (EXCEPTIONS aside); paths relative to `root`."""
    found = []
    for package in (p for p in FORBIDDEN if "." not in p):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            tree = ast.parse(path.read_text(), filename=str(path))
            module, resolve_as = module_names(relative)
            part = part_of(module)
            forbidden, allowed = FORBIDDEN[part], EXCEPTIONS.get(part, ())
            for line, written, _, names in imported_modules(tree, resolve_as):
                crossed = (_under(n, forbidden) for n in names if not _under(n, allowed))
                other = next((f for f in crossed if f), None)
                if other:
                    found.append(f"{relative}:{line}: `{written}` ({part} may not import {other})")
    return found


def test_the_packages_import_only_the_layers_below_them():
    for part in FORBIDDEN:
        folder = ROOT.joinpath(*part.split("."))
        assert (folder / "__init__.py").exists(), f"{part}: package not found"
    violations = layering_violations(ROOT)
    assert not violations, "imports across the layers:\n" + "\n".join(violations)


def test_a_broken_layer_is_named_with_file_line_and_import(source_tree):
    files = {
        "metrics/bad.py": "import numpy\nfrom speechkit import asr\n",
        "speechkit/bad.py": "def f():\n    import multiqt_jax.model\n    return multiqt_jax\n",
        "cskws_jax/sub/bad.py": (
            "import jax\nfrom multiqt_jax.streaming import StreamRunner\nimport benchmarks\n"
        ),
        "multiqt_jax/fine.py": (
            "from metrics import sequence\nfrom speechkit import asr\nfrom . import labels\n"
        ),
        "experiments/fine.py": "import cskws_jax\nimport multiqt_jax\n",
    }
    tmp_path = source_tree(files, PACKAGES)
    violations = layering_violations(tmp_path)
    assert violations == [
        "metrics/bad.py:2: `from speechkit import asr` (metrics may not import speechkit)",
        "speechkit/bad.py:2: `import multiqt_jax.model` (speechkit may not import multiqt_jax)",
        "cskws_jax/sub/bad.py:2: `from multiqt_jax.streaming import StreamRunner` "
        "(cskws_jax may not import multiqt_jax)",
        "cskws_jax/sub/bad.py:3: `import benchmarks` (cskws_jax may not import benchmarks)",
    ]


def test_scoring_imports_no_runner(source_tree):
    """Imports inside functions count too (ast.walk: the top level first)."""
    files = {
        "experiments/scoring/bundles.py": (
            "from experiments import common\nfrom experiments.scoring import calls\n"
            "def f():\n    from experiments import multiqt\n"
            "import experiments.evaluate\n"
        ),
        "experiments/ship.py": "from experiments import multiqt\nfrom experiments import scoring\n",
    }
    tmp_path = source_tree(files, PACKAGES)
    assert layering_violations(tmp_path) == [
        "experiments/scoring/bundles.py:5: `import experiments.evaluate` "
        "(experiments.scoring may not import experiments.evaluate)",
        "experiments/scoring/bundles.py:4: `from experiments import multiqt` "
        "(experiments.scoring may not import experiments.multiqt)",
    ]


def test_relative_imports_are_resolved(source_tree):
    files = {
        "cskws_jax/__init__.py": "from . import model\n",
        "cskws_jax/datasets/x.py": "from .. import decode\nfrom ...multiqt_jax import model\n",
    }
    tmp_path = source_tree(files, packages=())
    violations = layering_violations(tmp_path)
    assert violations == [
        "cskws_jax/datasets/x.py:2: `from ...multiqt_jax import model` "
        "(cskws_jax may not import multiqt_jax)"
    ]


def test_the_recogniser_and_multiqt_read_each_other_one_part_each_way(source_tree):
    """ctc_jax's corpora may read multiqt_jax's (and nothing else of it), its recogniser
    nothing of multiqt_jax; multiqt_jax may read the recogniser, never its corpora."""
    files = {
        "ctc_jax/datasets/speech.py": (
            "from multiqt_jax.datasets import dialogue, render\n"
            "from multiqt_jax import datasets\n"
            "from ctc_jax import symbols\n"
            "from multiqt_jax import labels\n"
            "import cskws_jax.datasets.text\n"
        ),
        "ctc_jax/model.py": (
            "from speechkit import asr\nfrom multiqt_jax.datasets import dialogue\n"
        ),
        "multiqt_jax/track.py": (
            "from ctc_jax import bundle\nfrom ctc_jax.recognise import Recogniser\n"
            "def f():\n    from ctc_jax import datasets\n"
            "    from ctc_jax.datasets.recogniser_text import transcript\n"
        ),
        "cskws_jax/x.py": "import ctc_jax.decode\n",
        "speechkit/x.py": "from ctc_jax import symbols\n",
    }
    tmp_path = source_tree(files, PACKAGES)
    assert layering_violations(tmp_path) == [
        "speechkit/x.py:1: `from ctc_jax import symbols` (speechkit may not import ctc_jax)",
        "multiqt_jax/track.py:4: `from ctc_jax import datasets` "
        "(multiqt_jax may not import ctc_jax.datasets)",
        "multiqt_jax/track.py:5: `from ctc_jax.datasets.recogniser_text import transcript` "
        "(multiqt_jax may not import ctc_jax.datasets)",
        "cskws_jax/x.py:1: `import ctc_jax.decode` (cskws_jax may not import ctc_jax)",
        "ctc_jax/datasets/speech.py:4: `from multiqt_jax import labels` "
        "(ctc_jax.datasets may not import multiqt_jax)",
        "ctc_jax/datasets/speech.py:5: `import cskws_jax.datasets.text` "
        "(ctc_jax.datasets may not import cskws_jax)",
        "ctc_jax/model.py:2: `from multiqt_jax.datasets import dialogue` "
        "(ctc_jax may not import multiqt_jax)",
    ]


def imported_names(tree: ast.AST, module: str):
    """(line, absolute dotted name) of everything a module's tree imports, inside
    functions too (`imported_modules`' names)."""
    for line, _, _, names in imported_modules(tree, module):
        yield from ((line, name) for name in names)


def import_graph(root: pathlib.Path, package: str) -> dict[str, dict[str, str]]:
    """module -> {module of the same package it imports: 'path:line' of the first such
    import} for every module of `package` under `root`. A name resolves to the longest
    module it starts with (`from speechkit.channel import ChannelConfig`: speechkit.channel);
    the parent packages Python initialises on the way are not counted."""
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        relative = path.relative_to(root)
        files[module_names(relative)[0]] = relative
    graph: dict[str, dict[str, str]] = {}
    for module, relative in files.items():
        tree = ast.parse((root / relative).read_text(), filename=str(relative))
        edges = graph.setdefault(module, {})
        for line, name in sorted(imported_names(tree, module_names(relative)[1])):
            parts = name.split(".")
            prefixes = (".".join(parts[:k]) for k in range(len(parts), 0, -1))
            target = next((p for p in prefixes if p in files), None)
            if target is not None and target != module:
                edges.setdefault(target, f"{relative}:{line}")
    return graph


def _reachable(graph: dict[str, dict[str, str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _shortest_cycle(graph: dict[str, dict[str, str]], start: str, inside: set[str]) -> list[str]:
    """[start, ..., start]: a shortest way back to `start` through the modules `inside`."""
    before: dict[str, str] = {}
    queue = collections.deque([start])
    while queue:
        module = queue.popleft()
        for target in sorted(graph[module]):
            if target == start:
                path = [module]
                while path[-1] != start:
                    path.append(before[path[-1]])
                return [*reversed(path), start]
            if target in inside and target not in before:
                before[target] = module
                queue.append(target)
    raise AssertionError(f"{start}: no cycle through it")


def import_cycles(graph: dict[str, dict[str, str]]) -> list[str]:
    """'a -> b -> a (path:line, path:line)': one shortest cycle of each group of modules
    that import each other in a circle (a strongly connected group), from the group's
    first module by name."""
    reach = {module: _reachable(graph, module) for module in graph}
    found, covered = [], set()
    for module in sorted(graph):
        if module in covered or module not in reach[module]:
            continue
        group = {other for other in reach[module] if module in reach[other]}
        covered |= group
        cycle = _shortest_cycle(graph, module, group)
        where = ", ".join(graph[a][b] for a, b in zip(cycle, cycle[1:], strict=False))
        found.append(f"{' -> '.join(cycle)} ({where})")
    return found


def test_no_package_imports_itself_in_a_circle():
    cycles = []
    for package in PACKAGES:
        cycles += import_cycles(import_graph(ROOT, package))
    assert not cycles, "modules that import each other in a circle:\n" + "\n".join(cycles)


def test_a_cycle_is_named_with_each_import_even_inside_functions(source_tree):
    files = {
        "speechkit/a.py": "import numpy\nfrom speechkit.b import thing\n",
        "speechkit/b.py": "def f():\n    from . import c\n    return c\n",
        "speechkit/c.py": "from speechkit import a, d\n",
        "speechkit/d.py": "import speechkit.sub.e\n",
        "speechkit/sub/__init__.py": "from speechkit.sub import e\nfrom . import f\n",
        "speechkit/sub/e.py": "from speechkit.sub import f\n",
        "speechkit/sub/f.py": "from .. import d\nimport os\n",
    }
    tmp_path = source_tree(files, PACKAGES)
    assert import_cycles(import_graph(tmp_path, "speechkit")) == [
        "speechkit.a -> speechkit.b -> speechkit.c -> speechkit.a "
        "(speechkit/a.py:2, speechkit/b.py:2, speechkit/c.py:1)",
        "speechkit.d -> speechkit.sub.e -> speechkit.sub.f -> speechkit.d "
        "(speechkit/d.py:1, speechkit/sub/e.py:1, speechkit/sub/f.py:1)",
    ]
    assert import_cycles(import_graph(tmp_path, "metrics")) == []
