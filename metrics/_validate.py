"""Trace-time argument checks shared by the metrics.

Everything here inspects shapes, dtypes and static Python values only, so it runs
while a metric is traced under `jax.jit` and costs nothing at run time. Values inside
arrays (label ranges, NaN scores) cannot be checked without a host sync; see
`metrics.checked` for the opt-in run-time check.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np


def shape_and_dtype(name: str, array) -> tuple[tuple[int, ...], np.dtype]:
    """Returns `(shape, dtype)` of an array-like, naming `name` if it is not one."""
    try:
        return tuple(jnp.shape(array)), jnp.result_type(array)
    except TypeError as err:
        raise TypeError(f"{name}: expected an array, got {type(array).__name__}") from err


def require_dtype(name: str, array, kind: str) -> None:
    """Checks the dtype kind: 'int' (any integer), 'bool' or 'float' (any floating)."""
    _, dtype = shape_and_dtype(name, array)
    ok = {
        "int": jnp.issubdtype(dtype, jnp.integer),
        "bool": dtype == jnp.bool_,
        "float": jnp.issubdtype(dtype, jnp.floating),
    }[kind]
    if not ok:
        expected = {"int": "an integer dtype", "bool": "bool", "float": "a floating dtype"}
        raise TypeError(f"{name}: expected {expected[kind]}, got dtype {dtype}")


def require_same_shape(named_arrays: Mapping[str, object], rank: int) -> tuple[int, ...]:
    """Checks that all arrays share one shape of the given rank; returns it."""
    shapes = {name: shape_and_dtype(name, a)[0] for name, a in named_arrays.items()}
    first_name, first = next(iter(shapes.items()))
    for name, shape in shapes.items():
        if len(shape) != rank:
            raise ValueError(f"{name}: expected rank {rank} [B, T], got shape {shape}")
        if shape != first:
            raise ValueError(f"{name}: shape {shape} does not match {first_name} shape {first}")
    return first


def require_int_at_least(name: str, value, minimum: int) -> int:
    """Checks a static integer argument (not a traced value)."""
    if isinstance(value, jax.core.Tracer) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected a static Python int, got {value!r}")
    if isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")
    return int(value)


def require_class_index(name: str, value, num_classes: int) -> int:
    """Checks a static class id in [0, num_classes)."""
    value = require_int_at_least(name, value, 0)
    if value >= num_classes:
        raise ValueError(f"{name}: expected a class id in [0, {num_classes}), got {value}")
    return value


def require_thresholds(name: str, values: Sequence[float]) -> tuple[float, ...]:
    """Checks a non-empty static sequence of IoU thresholds in (0, 1]."""
    if isinstance(values, (jax.Array, str, bytes)):
        raise TypeError(f"{name}: expected a static sequence of floats, got {values!r}")
    values = tuple(float(v) for v in np.atleast_1d(np.asarray(values, dtype=np.float64)))
    if not values:
        raise ValueError(f"{name}: expected at least one threshold, got none")
    for v in values:
        if not 0.0 < v <= 1.0:
            raise ValueError(f"{name}: thresholds must lie in (0, 1], got {v}")
    return values


def require_seconds(name: str, value, *, positive: bool) -> float:
    """Checks a static, finite duration in seconds: > 0 if `positive`, else >= 0."""
    if isinstance(value, (jax.core.Tracer, bool)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected static seconds (a Python float), got {value!r}")
    value = float(value)
    low_ok = value > 0 if positive else value >= 0
    if not (math.isfinite(value) and low_ok):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name}: expected finite seconds {bound}, got {value!r}")
    return value
