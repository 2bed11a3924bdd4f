"""Installed size and import time of the light (`infer`) and the full install.

    python -m benchmarks.installs --json benchmarks/results/installs.json

For each extra, a fresh virtual environment in a temporary folder gets the project (a
copy of its source) with that extra, at the versions of requirements.lock, from the
package registry (pip's cache when it has them): its size on disk, the packages in it
and the largest of them, and the median wall time of importing what detect and track
import, each in a fresh process (`--repeats` of them). The full environment also times
`cskws_jax.bundle` (the model code a bundle needs, which detect imported at the top
before the light install). Needs the registry (or pip's cache) and about 3 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common
from speechkit import files

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("infer", "full")
IMPORTS = {
    "infer": ("cskws_jax.detect", "multiqt_jax.track"),
    "full": ("cskws_jax.detect", "multiqt_jax.track", "cskws_jax.bundle"),
}
SOURCE_PARTS = (
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "requirements.lock",
    "speechkit",
    "cskws_jax",
    "ctc_jax",
    "multiqt_jax",
    "metrics",
    "experiments",
    "benchmarks",
)
_log = common.logger("installs")


def _tree_mb(path: Path) -> float:
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            file = Path(folder) / name
            if not file.is_symlink():
                total += file.stat().st_size
    return total / 2**20


def _largest(site: Path, count: int = 6) -> dict[str, float]:
    """{top-level folder of site-packages: MB}, the `count` largest."""
    sizes = {p.name: _tree_mb(p) for p in site.iterdir() if p.is_dir() and "-info" not in p.name}
    top = sorted(sizes.items(), key=lambda item: -item[1])[:count]
    return {name: round(mb, 1) for name, mb in top}


def _import_s(python: Path, module: str, repeats: int) -> float:
    """Median seconds to import `module` in a fresh process (the interpreter's own start
    not counted)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times = [
        float(
            subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
        )
        for _ in range(repeats)
    ]
    return statistics.median(times)


def measure(extra: str, workdir: Path, repeats: int) -> dict:
    """The project's source copied into `workdir`, installed with `extra` into a fresh
    environment there -> its install time, size, packages, largest packages and import
    times (`repeats` fresh processes per module)."""
    source = workdir / "source"
    source.mkdir()
    for part in SOURCE_PARTS:
        path = ROOT / part
        if path.is_dir():
            shutil.copytree(path, source / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / part)
    venv = workdir / f"venv-{extra}"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = venv / "bin" / "python"
    _log(f"{extra}: installing into {venv}")
    start = time.perf_counter()
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-c",
            source / "requirements.lock",
            f"{source}[{extra}]",
        ],
        check=True,
    )
    install_s = time.perf_counter() - start
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (site,) = (venv / "lib").glob("python*/site-packages")
    result = {
        "install_s": round(install_s, 1),
        "size_mb": round(_tree_mb(venv), 1),
        "packages": len([p for p in json.loads(listed) if p["name"] not in ("pip", "setuptools")]),
        "largest_mb": _largest(site),
        "import_s": {m: round(_import_s(python, m, repeats), 3) for m in IMPORTS[extra]},
    }
    _log(f"{extra}: {result}")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/installs.json")
    parser.add_argument("--repeats", type=int, default=5, help="imports timed per module")
    args = parser.parse_args(argv)
    results = {
        "machine": common.machine(),
        "python": sys.version.split()[0],
        "repeats": args.repeats,
    }
    for extra in EXTRAS:
        with tempfile.TemporaryDirectory(prefix=f"installs-{extra}-") as workdir:
            results[extra] = measure(extra, Path(workdir), args.repeats)
    files.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
