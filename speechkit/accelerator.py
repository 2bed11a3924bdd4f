"""Accelerator settings the project makes for its users: numerics and run-to-run determinism.

- Precision policy: the `precision` field of `MultiQTConfig` and `AfKwsConfig`, one of
  `PRECISIONS` ("highest", the default: exact float32 matmuls, so streamed and offline
  runs agree on every backend). `lax_precision` maps it to a layer's `precision`
  argument; `precision_scope` also sets `jax.default_matmul_precision` while a model
  traces, for operations that take no precision argument.
- Determinism: `configure()`, called by the entry points before jax initialises its
  backends, adds `--xla_gpu_deterministic_ops=true` to `XLA_FLAGS` unless the user set
  that flag. `describe()` names the machine for benchmark JSON.

    accelerator.configure()          # first thing in main(), before any jax computation

Specification: docs/gpu.md, "Numerics and determinism", and docs/architecture.md,
"Precision policy".
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import pkgutil
import platform
import sys

import jax

from speechkit import checks

PRECISIONS = ("highest", "high", "default")
DETERMINISTIC_FLAGS = ("--xla_gpu_deterministic_ops=true",)
_LAX_PRECISION = {
    "highest": jax.lax.Precision.HIGHEST,
    "high": jax.lax.Precision.HIGH,
    "default": None,
}


# -- precision policy ---------------------------------------------------------------------


def check_precision(name: str, field: str = "precision") -> str:
    """`name` if it is one of `PRECISIONS` ("highest": float32 matmuls and convolutions,
    needed for stream == offline on GPU/TPU), else a ValueError naming `field` and the
    choices."""
    return checks.require_choice(field, name, PRECISIONS)


def lax_precision(name: str) -> jax.lax.Precision | None:
    """The `precision` argument for a layer: Precision.HIGHEST / HIGH, or None
    ("default": whatever `jax_default_matmul_precision` says)."""
    return _LAX_PRECISION[check_precision(name)]


def precision_scope(name: str):
    """A context in which operations without a precision argument trace at `name`
    (`jax.default_matmul_precision`); no change for "default". Active at trace time,
    so it works inside `jit`, `scan` and `grad` (the precision is stored in each op)."""
    if check_precision(name) == "default":
        return contextlib.nullcontext()
    return jax.default_matmul_precision(name)


def at_config_precision(method):
    """Decorates a module method to run inside `precision_scope(self.config.precision)`."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with precision_scope(self.config.precision):
            return method(self, *args, **kwargs)

    return run


MATMULS = ("dot_general", "conv_general_dilated")


def matmul_precisions(jaxpr) -> list[tuple[str, object]]:
    """(primitive, precision) of every dot_general and conv_general_dilated in a (closed)
    jaxpr, nested jaxprs (jit, scan, cond, custom_jvp, ...) included: what XLA is asked
    for. `precision` is None (the backend's default) or a pair of lax.Precision."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in MATMULS:
            found.append((eqn.primitive.name, eqn.params["precision"]))
        for value in eqn.params.values():
            for item in value if isinstance(value, tuple | list) else (value,):
                if hasattr(item, "eqns") or hasattr(getattr(item, "jaxpr", None), "eqns"):
                    found += matmul_precisions(item)
    return found


# -- XLA flags ----------------------------------------------------------------------------


def flag_name(token: str) -> str:
    """'--xla_foo=1' -> 'xla_foo' (also for a bare '--xla_foo')."""
    return token.lstrip("-").split("=", 1)[0]


def with_flags(existing: str, flags=DETERMINISTIC_FLAGS) -> str:
    """`existing` (an XLA_FLAGS string) plus each of `flags` whose name it does not set
    yet; a value the user chose is kept."""
    tokens = existing.split()
    present = {flag_name(token) for token in tokens}
    tokens += [flag for flag in flags if flag_name(flag) not in present]
    return " ".join(tokens)


def backends_initialised() -> bool:
    """Whether jax has created its backends (after which XLA_FLAGS is not read again)."""
    from jax._src import xla_bridge  # private, but the only way to ask without initialising

    return xla_bridge.backends_are_initialized()


def configure(deterministic: bool = True, environ=None) -> dict:
    """Sets this project's XLA flags in `environ` (default os.environ) before jax starts.

    Returns {"xla_flags": the resulting XLA_FLAGS, "applied": False when jax had
    already initialised its backends (then nothing is changed: call it earlier)}."""
    environ = os.environ if environ is None else environ
    existing = environ.get("XLA_FLAGS", "")
    if backends_initialised():
        return {"xla_flags": existing, "applied": False}
    if deterministic:
        environ["XLA_FLAGS"] = with_flags(existing)
    return {"xla_flags": environ.get("XLA_FLAGS", ""), "applied": True}


def accelerator_expected(environ=None) -> bool:
    """Whether jax will pick a GPU or TPU, decided without initialising it: JAX_PLATFORMS
    names a non-CPU platform first, or (unset) a jax GPU plugin or libtpu is installed."""
    environ = os.environ if environ is None else environ
    platforms = environ.get("JAX_PLATFORMS", "").strip()
    if platforms:
        return platforms.split(",")[0].strip() not in ("cpu", "")
    try:
        import jax_plugins

        plugins = [module.name for module in pkgutil.iter_modules(jax_plugins.__path__)]
    except ImportError:
        plugins = []
    if any("cuda" in name or "rocm" in name for name in plugins):
        return True
    return importlib.util.find_spec("libtpu") is not None


def describe() -> dict:
    """The machine of this run (initialises jax): backend, device kind and count,
    accelerator memory, host CPU, Python, jax / jaxlib, XLA_FLAGS, matmul precision."""
    devices = jax.devices()
    memory = None
    try:
        stats = devices[0].memory_stats() or {}
        memory = stats.get("bytes_limit")
    except Exception:  # CPU devices and some plugins have no memory stats
        memory = None
    import jaxlib

    return {
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
        "process_count": jax.process_count(),
        "device_memory_bytes": memory,
        "platform_version": _platform_version(),
        "host_cpu": _cpu_model(),
        "host_cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "jax_default_matmul_precision": jax.config.jax_default_matmul_precision,
    }


def device_slug(machine: dict) -> str:
    """'NVIDIA H200' -> 'nvidia-h200' (for file names)."""
    kind = machine.get("device_kind") or machine.get("backend") or "unknown"
    cleaned = "".join(c.lower() if c.isalnum() else "-" for c in kind)
    return "-".join(part for part in cleaned.split("-") if part) or "unknown"


def _platform_version() -> str | None:
    try:
        from jax.extend import backend

        return backend.get_backend().platform_version
    except Exception:  # an optional detail: never fail a benchmark for it
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line)
    except (OSError, StopIteration):
        return platform.processor() or sys.platform
