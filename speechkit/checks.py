"""Argument checks with errors that name what is wrong, for configs and functions.

    def __post_init__(self):  # of a frozen dataclass BaselineConfig
        checks.require_number("BaselineConfig.window_s", self.window_s, above=0)
    # ValueError: BaselineConfig.window_s: expected > 0, got -1.0

Each check takes `name` for the error, raises TypeError for a value of the wrong kind
and ValueError for one out of range, and returns the value in a plain form. The array
checks read only shapes and dtypes, so they also run on traced arrays. Size fields are
bounded by what they imply (`MAX_CONTEXT_S` of audio, `require_memory`), so a crafted
config is refused in microseconds. Specification: docs/speechkit.md, "checks".
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import numbers
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

# ------------------------------------------------------------------------------ numbers


@dataclasses.dataclass(frozen=True)
class _Bounds:
    """At most one lower bound (strict `above` or inclusive `at_least`) and one upper."""

    above: float | None = None
    at_least: float | None = None
    below: float | None = None
    at_most: float | None = None

    def contain(self, value) -> bool:
        return not (
            (self.above is not None and not value > self.above)
            or (self.at_least is not None and not value >= self.at_least)
            or (self.below is not None and not value < self.below)
            or (self.at_most is not None and not value <= self.at_most)
        )

    def text(self, noun: str) -> str:
        """The bounds in words after `noun`: "> 0", "an int >= 1", "a value in (0, 1]"."""
        low = self.above if self.above is not None else self.at_least
        high = self.below if self.below is not None else self.at_most
        if low is not None and high is not None:
            left = "(" if self.above is not None else "["
            right = ")" if self.below is not None else "]"
            return f"{noun or 'a value'} in {left}{low}, {high}{right}"
        if low is not None:
            return f"{noun} {'>' if self.above is not None else '>='} {low}".lstrip()
        if high is not None:
            return f"{noun} {'<' if self.below is not None else '<='} {high}".lstrip()
        return noun or "a finite number"


def require_number(name: str, value, *, above=None, at_least=None, below=None, at_most=None):
    """A finite real number (not a bool) within the given bounds; returns it unchanged.

    `above` / `below` are strict bounds, `at_least` / `at_most` inclusive ones.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    bounds = _Bounds(above, at_least, below, at_most)
    if not bounds.contain(value):
        raise ValueError(f"{name}: expected {bounds.text('')}, got {value!r}")
    return value


def require_int(name: str, value, *, at_least=None, at_most=None) -> int:
    """An integer (Python or NumPy, not a bool) within inclusive bounds, as a Python int.

    A traced value is not an int: this also checks that an argument is static.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {value!r}")
    bounds = _Bounds(at_least=at_least, at_most=at_most)
    if not bounds.contain(value):
        raise ValueError(f"{name}: expected {bounds.text('an int')}, got {value!r}")
    return int(value)


def require_frames(name: str, seconds, frame_s: float) -> int:
    """A duration in seconds that is a positive whole number of frames of `frame_s`
    seconds (within 1e-6 of a frame); returns the frame count, round(seconds / frame_s)."""
    require_number(name, seconds, above=0)
    frames = round(seconds / frame_s)
    if frames < 1 or abs(seconds / frame_s - frames) > 1e-6:
        raise ValueError(
            f"{name}: expected a positive whole number of {frame_s * 1000:g} ms frames, "
            f"got {seconds!r} s"
        )
    return int(frames)


def require_at_most(name: str, value, bound_name: str, bound) -> None:
    """value <= bound, where bound is another setting (named in the error)."""
    if not value <= bound:
        raise ValueError(f"{name}: expected <= {bound_name} ({bound!r}), got {value!r}")


def require_interval(name: str, pair) -> tuple:
    """A (low, high) pair of finite numbers with low <= high; returns it as a tuple."""
    if isinstance(pair, (str, bytes)) or not isinstance(pair, Iterable):
        raise TypeError(f"{name}: expected a (low, high) pair, got {pair!r}")
    pair = tuple(pair)
    if len(pair) != 2:
        raise ValueError(f"{name}: expected a (low, high) pair, got {pair!r}")
    for value in pair:
        require_number(name, value)
    if pair[0] > pair[1]:
        raise ValueError(f"{name}: expected (low, high) with low <= high, got {pair!r}")
    return pair


def require_ints(name: str, values, *, at_least=None, non_empty: bool = False) -> tuple[int, ...]:
    """A sequence of ints (e.g. layer widths), each >= at_least; returns a tuple of ints."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{name}: expected a tuple of ints, got {values!r}")
    values = tuple(values)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        raise TypeError(f"{name}: expected a tuple of ints, got {values!r}")
    bounds = _Bounds(at_least=at_least)
    if (non_empty and not values) or not all(bounds.contain(v) for v in values):
        count = "one or more" if non_empty else "a tuple of"
        raise ValueError(f"{name}: expected {count} {bounds.text('ints')}, got {values!r}")
    return tuple(int(v) for v in values)


# -------------------------------------------------------------------------------- sizes

MAX_CONTEXT_S = 60.0
"""The most audio, in seconds, that one output of a model or front end may depend on: a
receptive field, a look-ahead, a decoding window, one analysis window or FFT, one output
hop. The project's models see about a second (the `full` presets: AF-KWS 2.57 s of
receptive field and 0.32 s of look-ahead, MultiQT 1.13 s of audio and 1.14 s of text);
a minute leaves room for any model of these tasks, and refuses sizes (a dilation of a
million frames, a delay of 1e9 output frames) that would make one streaming step hold
hours of audio in its buffers and spend minutes on each block."""


def available_memory() -> int:
    """Bytes of memory this process can still take: /proc/meminfo's MemAvailable, or
    less where a cgroup (a container) limits memory (its memory.max less its
    memory.current); the machine's physical memory where neither can be read."""
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as source:
            for line in source:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as source:
            limit = source.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as source:
            used = int(source.read().strip())
        if limit != "max":
            found.append(max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    if not found:
        try:
            found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (OSError, ValueError, AttributeError):
            return 1 << 62  # unknown: nothing is refused for memory
    return min(found)


def byte_text(nbytes) -> str:
    """A byte count in words ("3.4 GB"), also for integers too large for a float."""
    value = decimal.Decimal(int(nbytes))
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} {unit}" if unit == "bytes" else f"{_number(value)} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


_FITS_ANYWHERE = 64 << 20  # bytes: estimates below this are not compared (no /proc read)


def require_memory(name: str, nbytes: int, what: str) -> None:
    """`nbytes`, an estimate of the memory `what` takes (e.g. "the parameters as
    float32"), fits in `available_memory()`: a ValueError naming `name` otherwise.
    Estimates under 64 MiB pass without reading /proc, so configs stay cheap to build."""
    if nbytes <= _FITS_ANYWHERE:
        return
    available = available_memory()
    if nbytes > available:
        raise ValueError(
            f"{name}: {what} would take {byte_text(nbytes)}; {byte_text(available)} of memory "
            "is available"
        )


def require_parameter_memory(
    field: Callable[[str], str], parts: Mapping[str, tuple[int, int]]
) -> None:
    """A model's parameters as float32 fit in memory (`require_memory`). `parts` is its
    config's `parameter_parts()`: {the field that sizes a part of the model: (arrays,
    scalars)}; the error names `field(part)` (e.g. "AfKwsConfig.stages[2]") of the part
    with the most scalars."""
    total = sum(scalars for _, scalars in parts.values())
    largest = max(parts, key=lambda part: parts[part][1])
    require_memory(
        field(largest),
        4 * total,
        f"the model's {count_text(total)} parameters as float32 "
        f"({count_text(parts[largest][1])} of them in {largest})",
    )


def max_frames(hop_s: float) -> int:
    """The most frames of `hop_s` seconds that fit in `MAX_CONTEXT_S`."""
    return int(MAX_CONTEXT_S / hop_s + 1e-9)


def require_context(name: str, frames: int, hop_s: float, what: str, unit="frames") -> None:
    """`frames` frames (`unit`) of `hop_s` seconds (what one output depends on: `what`,
    e.g. "the receptive field") are at most `MAX_CONTEXT_S`: a ValueError naming `name`
    otherwise. `frames` may be any integer (exact arithmetic, no overflow)."""
    if frames > max_frames(hop_s):
        seconds = decimal.Decimal(int(frames)) * decimal.Decimal(repr(hop_s))
        raise ValueError(
            f"{name}: {what} spans {_number(seconds, 4)} s of audio ({count_text(frames)} {unit} "
            f"of {hop_s * 1000:g} ms); at most {MAX_CONTEXT_S:g} s "
            "(speechkit.checks.MAX_CONTEXT_S)"
        )


def _number(value: decimal.Decimal, digits: int = 3) -> str:
    """`digits` significant digits, as a float's "%.3g" where it fits in one."""
    if abs(value) < decimal.Decimal("1e300"):
        return f"{float(value):.{digits}g}"
    return f"{value:.{digits - 1}e}"


def count_text(frames: int) -> str:
    """An integer in words: exact up to 1e12, else in scientific notation."""
    return f"{frames:,}" if abs(frames) < 10**12 else f"{decimal.Decimal(int(frames)):.3e}"


def receptive_field(layers: Iterable[tuple[int, int, int, int]]) -> int:
    """Input frames one output of a stack of causal 1-D convolutions depends on.

    `layers` are (kernel, stride, dilation, repeats) in input order: `repeats` layers of
    that kernel and dilation, of which only the first has the stride (0 repeats: none),
    so a stage of a million blocks is one entry and costs nothing. Exact integer
    arithmetic: 1 + the sum over layers of (kernel - 1) * dilation * (the product of the
    strides before it).
    """
    frames, stride_before = 1, 1
    for kernel, stride, dilation, repeats in layers:
        if repeats > 0:
            frames += (kernel - 1) * dilation * stride_before
            stride_before *= stride
            frames += (kernel - 1) * dilation * stride_before * (repeats - 1)
    return frames


# ------------------------------------------------------------------------------ choices


def require_choice(name: str, value, choices: Collection):
    """One of `choices`; returns it unchanged."""
    if value not in choices:
        raise ValueError(f"{name}: expected one of {tuple(choices)!r}, got {value!r}")
    return value


def require_subset(name: str, values, choices: Collection) -> tuple:
    """A non-empty sequence of items of `choices` (e.g. the noise kinds to mix); returns
    it as a tuple."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{name}: expected a tuple of {tuple(choices)!r}, got {values!r}")
    values = tuple(values)
    if not values or any(v not in choices for v in values):
        raise ValueError(f"{name}: expected some of {tuple(choices)!r}, got {values!r}")
    return values


def require_keys(name: str, mapping, keys: Iterable[str]) -> None:
    """A mapping (a dict of arrays, a batch) holding every key of `keys`."""
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{name}: expected a dict, got {type(mapping).__name__}")
    missing = [k for k in keys if k not in mapping]
    if missing:
        raise KeyError(f"{name}: missing {missing}; has {sorted(mapping)}")


# ------------------------------------------------------------------------------- arrays


def as_array(name: str, value, dtype=None) -> np.ndarray:
    """np.asarray(value, dtype), with a TypeError naming `name` if that fails."""
    try:
        return np.asarray(value) if dtype is None else np.asarray(value, dtype)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name}: expected an array, got {type(value).__name__}") from err


def _layout(expected: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(size) for size in expected) + "]"


def require_shape(name: str, value, expected: Sequence[int | str], note: str = "") -> tuple:
    """An array (or a traced one) of shape `expected`, one entry per axis: an int is that
    exact size, a str names a size that may be anything ("B", "T"). Returns the shape.

    `note` (e.g. "log-mel bands at 10 ms") is added to the error, which reads
    "audio: shape (8, 600, 41); expected [B, T, 40] (log-mel bands at 10 ms)".
    """
    shape = tuple(np.shape(value))
    fits = len(shape) == len(expected) and all(
        isinstance(want, str) or size == want for size, want in zip(shape, expected, strict=True)
    )
    if not fits:
        suffix = f" ({note})" if note else ""
        raise ValueError(f"{name}: shape {shape}; expected {_layout(expected)}{suffix}")
    return shape


_DTYPE_KINDS = {  # kind -> (its name in errors, the dtype class)
    "bool": ("dtype bool", np.bool_),
    "int": ("an integer dtype", np.integer),
    "float": ("a floating dtype", np.floating),
}


def require_dtype(name: str, value, kind: str) -> None:
    """An array whose dtype is of `kind`: "bool", "int" (any integer) or "float" (any
    floating, bfloat16 included)."""
    dtype = value.dtype if hasattr(value, "dtype") else as_array(name, value).dtype
    wanted, dtype_class = _DTYPE_KINDS[kind]
    import jax.numpy as jnp  # here, not at the top: the config checks stay free of jax

    if not jnp.issubdtype(dtype, dtype_class):  # jnp knows bfloat16 is a floating dtype
        raise TypeError(f"{name}: expected {wanted}, got {dtype}")


def require_mask(name: str, value, shape: Sequence[int | str], note: str = "") -> tuple:
    """A bool array of shape `shape` (`require_shape`); returns its shape."""
    shape = require_shape(name, value, shape, note)
    require_dtype(name, value, "bool")
    return shape
