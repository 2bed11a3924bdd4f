"""Compiling less: JAX's persistent compilation cache for every entry point, and a count
of what a run compiled.

`enable_cache()`, called by every command before its first jitted call, lets later runs
read back a program compiled once on this machine (a cached executable is the one XLA
would build again). `Counter` counts the programs compiled, or read from the cache:

    compilation.enable_cache()
    with compilation.Counter() as counted:
        train_and_score()
    print(counted.summary())   # "12 programs in 48.0 s (3 from the cache); slowest: ..."

Where the cache lives, what is written, how to turn it off or clear it:
docs/architecture.md, "How a run flows" ("Compiling once").
"""

from __future__ import annotations

import os
from collections import Counter as _Tally

import jax

MIN_COMPILE_SECONDS = 0.5
_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # includes cache reads
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"
_FALSE = ("0", "false", "no", "off")


def default_cache_dir(environ=None) -> str:
    """`$XDG_CACHE_HOME/speech-tracking-jax/jax` (default `~/.cache/...`)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "speech-tracking-jax", "jax")


def cache_dir(environ=None) -> str | None:
    """The folder `enable_cache` uses: `$JAX_COMPILATION_CACHE_DIR`, else
    `default_cache_dir()`; None when `JAX_ENABLE_COMPILATION_CACHE` is false."""
    environ = os.environ if environ is None else environ
    if environ.get("JAX_ENABLE_COMPILATION_CACHE", "").strip().lower() in _FALSE:
        return None
    return environ.get("JAX_COMPILATION_CACHE_DIR") or default_cache_dir(environ)


def enable_cache(environ=None) -> str | None:
    """Turns on jax's persistent compilation cache in `cache_dir()` (created if missing)
    and returns the folder (None: turned off by the environment). A cache folder set in
    jax's config already (`jax.config.update`) is kept."""
    folder = jax.config.jax_compilation_cache_dir or cache_dir(environ)
    if folder is None:
        return None
    os.makedirs(folder, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", folder)
    environ = os.environ if environ is None else environ
    minimum = environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(minimum))
    return folder


class Counter:
    """Programs compiled while open (a context manager): `programs` (backend compilations,
    cache reads included), `cache_hits`, `compile_seconds` (XLA, or reading the cache),
    `trace_seconds` and `lower_seconds` (jaxpr tracing and lowering to StableHLO),
    `seconds_by_name` and `programs_by_name` (compile seconds and programs per function
    name)."""

    def __init__(self):
        self.programs = self.cache_hits = 0
        self.compile_seconds = self.trace_seconds = self.lower_seconds = 0.0
        self.seconds_by_name: _Tally = _Tally()
        self.programs_by_name: _Tally = _Tally()

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        if event == _BACKEND_COMPILE:
            self.programs += 1
            self.compile_seconds += duration
            name = str(kwargs.get("fun_name", "?"))
            self.seconds_by_name[name] += duration
            self.programs_by_name[name] += 1
        elif event == _TRACE:
            self.trace_seconds += duration
        elif event == _LOWER:
            self.lower_seconds += duration

    def _on_event(self, event: str, **kwargs) -> None:
        if event == _CACHE_HIT:
            self.cache_hits += 1

    def __enter__(self) -> Counter:
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        jax.monitoring.register_event_listener(self._on_event)
        return self

    def __exit__(self, *exc) -> None:
        jax.monitoring.unregister_event_duration_listener(self._on_duration)
        jax.monitoring.unregister_event_listener(self._on_event)

    def record(self, slowest: int = 5) -> dict:
        """The counts as a JSON-ready dict, with the `slowest` functions' compile seconds
        and programs."""
        return {
            "programs": self.programs,
            "cache_hits": self.cache_hits,
            "compile_seconds": round(self.compile_seconds, 3),
            "trace_seconds": round(self.trace_seconds, 3),
            "lower_seconds": round(self.lower_seconds, 3),
            "slowest": {
                name: {"seconds": round(seconds, 3), "programs": self.programs_by_name[name]}
                for name, seconds in self.seconds_by_name.most_common(slowest)
            },
        }

    def summary(self, slowest: int = 3) -> str:
        """One line: programs, seconds, cache hits and the slowest functions."""
        names = ", ".join(
            f"{name} {seconds:.1f} s ({self.programs_by_name[name]})"
            for name, seconds in self.seconds_by_name.most_common(slowest)
        )
        return (
            f"{self.programs} programs compiled in {self.compile_seconds:.1f} s "
            f"({self.cache_hits} from the cache; tracing {self.trace_seconds:.1f} s, "
            f"lowering {self.lower_seconds:.1f} s)" + (f"; slowest: {names}" if names else "")
        )
