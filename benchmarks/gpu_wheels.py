"""The device check's packages (`benchmarks.gpu_check`): what the accelerator machine is
assumed to have, the wheels that bring the rest, and unpacking those it lacks.

`MACHINE_PACKAGES` are the machine's own (jax, flax, optax, ...); `WHEEL_PACKAGES`
(sequence-layers and what it needs beyond them) come as wheels from `.whl/`, fetched by
`make gpu-wheels` at the versions of requirements.lock (`wheel_specs`, printed by
`python -m benchmarks.gpu_check --wheel-specs`). `provide_packages` unpacks into a folder,
which the check puts first on its subprocesses' PYTHONPATH, the wheels whose package is
missing or at another version. Standard library only: the machine has no .venv.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHEEL_DIR = os.path.join(ROOT, ".whl")
LOCK = os.path.join(ROOT, "requirements.lock")
# sequence-layers and its requirements beyond jax, flax, optax, orbax-checkpoint, numpy,
# scikit-learn, pytest and hypothesis (what the accelerator machine has)
WHEEL_PACKAGES = (
    "sequence-layers",
    "recurrentgemma",
    "orbax-export",
    "typeguard",
    "dataclasses-json",
    "marshmallow",
    "typing-inspect",
    "mypy-extensions",
    "jaxtyping",
    "wadler-lindig",
    "einops",
    "sentencepiece",
    "ml-collections",  # experiments' configs, which benchmarks.train reads
    "tqdm",  # speechkit.progress, the training loop's progress bar
)
# What the accelerator machine is assumed to have (with what they require), beside the
# wheels; everything the check imports loads with these alone (test_gpu_check.py).
MACHINE_PACKAGES = (
    "jax",
    "flax",
    "optax",
    "orbax-checkpoint",
    "numpy",
    "scipy",
    "scikit-learn",
    "pytest",
    "hypothesis",
)


def normalise_distribution(name: str) -> str:
    """A distribution name as PEP 503 compares them: 'Sequence_Layers' -> 'sequence-layers'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_specs(lock_text: str, packages=WHEEL_PACKAGES) -> list[str]:
    """'name==version' for each of `packages`, versions from requirements.lock's text."""
    pinned = {}
    for line in lock_text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pinned[normalise_distribution(name)] = version.strip()
    missing = [name for name in packages if normalise_distribution(name) not in pinned]
    if missing:
        raise ValueError(f"requirements.lock pins no version of {missing}")
    return [f"{name}=={pinned[normalise_distribution(name)]}" for name in packages]


def wheel_identity(filename: str) -> tuple[str, str]:
    """'sequence_layers-0.2-py3-none-any.whl' -> ('sequence-layers', '0.2')."""
    name, version = os.path.basename(filename).split("-")[:2]
    return normalise_distribution(name), version


def installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def wheels_to_unpack(wheels: list[str], installed=installed_version) -> list[str]:
    """The wheels whose distribution is not installed, or at another version."""
    return [
        wheel for wheel in wheels if installed(wheel_identity(wheel)[0]) != wheel_identity(wheel)[1]
    ]


def unpack(wheels: list[str], target: str) -> None:
    """Unpacks wheels into `target` (a wheel is a zip of site-packages' contents)."""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)


def provide_packages(wheel_dir: str, target: str) -> dict:
    """Unpacks what is missing from `wheel_dir` into `target`; names what is still
    missing (no wheel for it)."""
    wheels = sorted(
        os.path.join(wheel_dir, name)
        for name in (os.listdir(wheel_dir) if os.path.isdir(wheel_dir) else [])
        if name.endswith(".whl")
    )
    needed = wheels_to_unpack(wheels)
    unpack(needed, target)
    have = {wheel_identity(wheel)[0] for wheel in wheels}
    absent = [
        name
        for name in WHEEL_PACKAGES
        if installed_version(name) is None and normalise_distribution(name) not in have
    ]
    return {
        "wheel_dir": wheel_dir,
        "unpacked": [os.path.basename(wheel) for wheel in needed],
        "target": target,
        "missing_without_wheel": absent,
    }
