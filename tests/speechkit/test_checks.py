"""speechkit.checks: each check accepts good values (returning them in plain form) and
rejects bad ones with the right error type and a message that names the value."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from speechkit import checks

NAME = "Config.field"


def _fails(error, pattern, check, *args, **kwargs):
    with pytest.raises(error, match=pattern) as caught:
        check(NAME, *args, **kwargs)
    assert str(caught.value).strip("'\"").startswith(f"{NAME}: "), caught.value


def test_require_number():
    assert checks.require_number(NAME, 0.5, above=0, at_most=1) == 0.5
    assert checks.require_number(NAME, np.float32(2), at_least=2) == 2
    assert checks.require_number(NAME, -3) == -3
    _fails(ValueError, r"expected > 0, got -1.0", checks.require_number, -1.0, above=0)
    _fails(ValueError, r"expected > 0, got 0", checks.require_number, 0, above=0)
    _fails(ValueError, r"expected >= 0, got -1e-09", checks.require_number, -1e-9, at_least=0)
    _fails(ValueError, r"expected < 1, got 1", checks.require_number, 1, below=1)
    _fails(ValueError, r"expected <= 1, got 1.5", checks.require_number, 1.5, at_most=1)
    _fails(
        ValueError,
        r"expected a value in \(0, 1\], got 0.0",
        checks.require_number,
        0.0,
        above=0,
        at_most=1,
    )
    _fails(ValueError, r"in \[0, 1\), got 1", checks.require_number, 1, at_least=0, below=1)
    for bad in (float("nan"), float("inf")):
        _fails(ValueError, "expected a finite number", checks.require_number, bad)
    for bad in ("1", True, None, [1.0]):
        _fails(TypeError, "expected a number", checks.require_number, bad)


def test_require_int():
    assert checks.require_int(NAME, 3, at_least=1) == 3
    value = checks.require_int(NAME, np.int64(0), at_least=0, at_most=0)
    assert value == 0 and type(value) is int
    assert checks.require_int(NAME, -7) == -7
    _fails(ValueError, r"expected an int >= 1, got 0", checks.require_int, 0, at_least=1)
    _fails(ValueError, r"expected an int <= 3, got 4", checks.require_int, 4, at_most=3)
    _fails(ValueError, r"an int in \[0, 3\], got -1", checks.require_int, -1, at_least=0, at_most=3)
    for bad in (1.0, True, "1", None):
        _fails(TypeError, "expected an int", checks.require_int, bad)


def test_require_int_rejects_traced_values():
    @jax.jit
    def f(x):
        checks.require_int("size", x, at_least=1)
        return x

    with pytest.raises(TypeError, match="size: expected an int"):
        f(3)


def test_require_frames():
    assert checks.require_frames(NAME, 0.8, 0.01) == 80
    assert checks.require_frames(NAME, 0.3, 0.01) == 30  # 0.3 / 0.01 = 29.999999999999996
    assert checks.require_frames(NAME, 2, 0.02) == 100
    _fails(
        ValueError, r"whole number of 10 ms frames, got 0.015 s", checks.require_frames, 0.015, 0.01
    )
    _fails(
        ValueError, r"whole number of 10 ms frames, got 0.004 s", checks.require_frames, 0.004, 0.01
    )
    _fails(ValueError, r"expected > 0, got 0.0", checks.require_frames, 0.0, 0.01)
    _fails(ValueError, r"expected > 0, got -0.5", checks.require_frames, -0.5, 0.01)
    _fails(TypeError, "expected a number", checks.require_frames, "0.8", 0.01)


def test_require_at_most():
    checks.require_at_most(NAME, 0.5, "Config.high", 0.5)
    checks.require_at_most(NAME, 1, "Config.high", 2)
    _fails(
        ValueError,
        r"expected <= Config.high \(0.8\), got 0.9",
        checks.require_at_most,
        0.9,
        "Config.high",
        0.8,
    )


def test_require_interval():
    assert checks.require_interval(NAME, [5.0, 30]) == (5.0, 30)
    assert checks.require_interval(NAME, (2, 2)) == (2, 2)
    _fails(ValueError, r"low <= high, got \(30.0, 5.0\)", checks.require_interval, (30.0, 5.0))
    _fails(ValueError, r"a \(low, high\) pair, got \(1, 2, 3\)", checks.require_interval, (1, 2, 3))
    _fails(ValueError, "expected a finite number", checks.require_interval, (0, float("inf")))
    _fails(TypeError, "expected a number", checks.require_interval, ("a", "b"))
    _fails(TypeError, r"a \(low, high\) pair", checks.require_interval, 5.0)
    _fails(TypeError, r"a \(low, high\) pair", checks.require_interval, "ab")


def test_require_ints():
    widths = checks.require_ints(NAME, [8, np.int64(4)], at_least=1)
    assert widths == (8, 4) and all(type(w) is int for w in widths)
    assert checks.require_ints(NAME, (), at_least=1) == ()
    assert checks.require_ints(NAME, (0, -2)) == (0, -2)
    _fails(
        ValueError, r"a tuple of ints >= 1, got \(32, 0\)", checks.require_ints, (32, 0), at_least=1
    )
    _fails(
        ValueError,
        r"one or more ints >= 1, got \(\)",
        checks.require_ints,
        (),
        at_least=1,
        non_empty=True,
    )
    _fails(ValueError, r"one or more ints, got \(\)", checks.require_ints, [], non_empty=True)
    for bad in (16, "16", (16, 2.0), (16, True), None):
        _fails(TypeError, "expected a tuple of ints", checks.require_ints, bad, at_least=1)


def test_require_choice_and_subset():
    assert checks.require_choice(NAME, "b", ("a", "b")) == "b"
    _fails(ValueError, r"one of \('a', 'b'\), got 'c'", checks.require_choice, "c", ("a", "b"))
    kinds = ("pink", "white", "babble")
    assert checks.require_subset(NAME, ["white", "pink"], kinds) == ("white", "pink")
    _fails(
        ValueError,
        r"some of \('pink', 'white', 'babble'\), got \('brown',\)",
        checks.require_subset,
        ("brown",),
        kinds,
    )
    _fails(ValueError, r"got \(\)", checks.require_subset, (), kinds)
    _fails(TypeError, "expected a tuple of", checks.require_subset, "pink", kinds)


def test_require_keys():
    checks.require_keys(NAME, {"audio": 1, "text": 2}, ("audio",))
    _fails(
        KeyError,
        r"missing \['text'\]; has \['audio'\]",
        checks.require_keys,
        {"audio": 1},
        ("audio", "text"),
    )
    _fails(TypeError, "expected a dict, got list", checks.require_keys, [], ("audio",))


def test_as_array():
    array = checks.as_array(NAME, [1, 2], np.float32)
    assert array.dtype == np.float32 and array.tolist() == [1.0, 2.0]
    _fails(TypeError, "expected an array, got object", checks.as_array, object(), np.float32)
    _fails(TypeError, "expected an array, got list", checks.as_array, [[1], [2, 3]])


def test_require_shape():
    audio = np.zeros((8, 600, 40), np.float32)
    assert checks.require_shape(NAME, audio, ("B", "T", 40)) == (8, 600, 40)
    assert checks.require_shape(NAME, [[1, 2, 3]], (1, 3)) == (1, 3)
    assert checks.require_shape(NAME, np.float32(1), ()) == ()
    _fails(
        ValueError,
        r"shape \(8, 600, 40\); expected \[B, T, 64\] \(log-mel\)$",
        checks.require_shape,
        audio,
        ("B", "T", 64),
        "log-mel",
    )
    _fails(
        ValueError,
        r"shape \(8, 600, 40\); expected \[B, T\]$",
        checks.require_shape,
        audio,
        ("B", "T"),
    )
    _fails(
        ValueError,
        r"shape \(8, 600\); expected \[8, 500\]",
        checks.require_shape,
        audio[..., 0],
        (8, 500),
    )


def test_require_dtype():
    checks.require_dtype(NAME, np.zeros(3, bool), "bool")
    checks.require_dtype(NAME, np.zeros(3, np.int8), "int")
    checks.require_dtype(NAME, [1.5], "float")
    checks.require_dtype(NAME, jnp.zeros(3, jnp.bfloat16), "float")
    _fails(
        TypeError,
        "expected dtype bool, got int64",
        checks.require_dtype,
        np.zeros(3, np.int64),
        "bool",
    )
    _fails(
        TypeError,
        "expected an integer dtype, got float32",
        checks.require_dtype,
        np.zeros(3, np.float32),
        "int",
    )
    _fails(
        TypeError,
        "expected a floating dtype, got int32",
        checks.require_dtype,
        np.zeros(3, np.int32),
        "float",
    )
    _fails(
        TypeError,
        "expected an integer dtype, got bool",
        checks.require_dtype,
        np.zeros(3, bool),
        "int",
    )


def test_require_mask():
    assert checks.require_mask(NAME, np.ones((2, 5), bool), (2, "T")) == (2, 5)
    _fails(
        ValueError,
        r"shape \(2, 4\); expected \[2, 5\]",
        checks.require_mask,
        np.ones((2, 4), bool),
        (2, 5),
    )
    _fails(
        TypeError,
        "expected dtype bool, got float32",
        checks.require_mask,
        np.ones((2, 5), np.float32),
        (2, 5),
    )


def test_array_checks_run_on_traced_arrays():
    @jax.jit
    def f(audio, mask):
        batch, frames, _ = checks.require_shape("audio", audio, ("B", "T", 4))
        checks.require_dtype("audio", audio, "float")
        checks.require_mask("mask", mask, (batch, frames))
        return audio.sum()

    f(np.zeros((2, 3, 4), np.float32), np.ones((2, 3), bool))
    with pytest.raises(ValueError, match=r"mask: shape \(2, 2\); expected \[2, 3\]"):
        f(np.zeros((2, 3, 4), np.float32), np.ones((2, 2), bool))
    with pytest.raises(TypeError, match="audio: expected a floating dtype, got int32"):
        f(np.zeros((2, 3, 4), np.int32), np.ones((2, 3), bool))
