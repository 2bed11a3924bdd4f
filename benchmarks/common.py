"""What the benchmark scripts share: the machine description and the logger. (Each script
writes its --json results with `speechkit.files.write_json`, atomically.)"""

from __future__ import annotations

import os
import platform
import sys

import jax

from speechkit import accelerator


def logger(name: str):
    def log(message: str) -> None:
        print(f"[benchmarks.{name}] {message}", file=sys.stderr, flush=True)

    return log


def machine() -> dict:
    """The run's machine: host CPU model and cores (all, and those this process may use),
    Python, jax / jaxlib, backend, and the devices (`speechkit.accelerator.describe`:
    kind, count, memory, XLA_FLAGS, default matmul precision). Initialises jax."""
    described = accelerator.describe()
    return {
        "cpu": described["host_cpu"],
        "cpu_count": os.cpu_count(),
        "cores_used": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        **{key: described[key] for key in _DEVICE_KEYS},
    }


_DEVICE_KEYS = (
    "device_kind",
    "device_count",
    "device_memory_bytes",
    "platform_version",
    "jaxlib",
    "xla_flags",
    "jax_default_matmul_precision",
)
