"""What the benchmark scripts share: the machine description and atomic JSON output."""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile

import jax


def logger(name: str):
    def log(message: str) -> None:
        print(f"[benchmarks.{name}] {message}", file=sys.stderr, flush=True)

    return log


def machine() -> dict:
    """CPU model, core count, Python, jax and backend of this run."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line)
    except (OSError, StopIteration):
        pass
    return {
        "cpu": model,
        "cpu_count": os.cpu_count(),
        "cores_used": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
    }


def write_json(path: str, payload: dict) -> None:
    """Writes atomically: a killed run leaves the old file or none, never half of one."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False) as out:
        json.dump(payload, out, indent=2)
        out.write("\n")
    os.replace(out.name, path)
