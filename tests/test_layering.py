"""The packages' import layering (docs/architecture.md), read from the source with `ast`:
nothing is imported, so the check costs milliseconds and sees imports inside functions.

    metrics                      imports no other project package
    speechkit                    imports neither task package, nor experiments / benchmarks
    multiqt_jax, cskws_jax       never import each other, nor experiments / benchmarks
    experiments, benchmarks      may import everything below them
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("metrics", "speechkit", "multiqt_jax", "cskws_jax", "experiments", "benchmarks")
TOP = ("experiments", "benchmarks")
# package -> the project packages its modules may not import
FORBIDDEN: dict[str, frozenset[str]] = {
    "metrics": frozenset(PACKAGES) - {"metrics"},
    "speechkit": frozenset({"multiqt_jax", "cskws_jax", *TOP}),
    "multiqt_jax": frozenset({"cskws_jax", *TOP}),
    "cskws_jax": frozenset({"multiqt_jax", *TOP}),
}


def imported_modules(tree: ast.AST, module: str):
    """(line, dotted name as written, absolute dotted name) of every import in a module's
    tree; relative imports are resolved against `module` (its own dotted name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, f"import {alias.name}", alias.name
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
            yield node.lineno, written, target


def layering_violations(root: pathlib.Path) -> list[str]:
    """'path:line: `import ...` (package may not import other)' for every import under
    `root` that breaks FORBIDDEN; paths relative to `root`."""
    found = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            parts = relative.with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if parts[-1] == "__init__":
                module += ".__init__"  # so that `from . import x` resolves to the package
            tree = ast.parse(path.read_text(), filename=str(path))
            for line, written, target in imported_modules(tree, module):
                top = target.split(".")[0]
                if top in forbidden:
                    found.append(f"{relative}:{line}: `{written}` ({package} may not import {top})")
    return found


def test_the_packages_import_only_the_layers_below_them():
    for package in FORBIDDEN:
        assert (ROOT / package / "__init__.py").exists(), f"{package}: package not found"
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
