"""metrics.detection._tree_scan makes `jax.lax.associative_scan`'s very combinations:
float sums bit for bit equal (up to the sign of zero), for any length and pytree."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from metrics import detection

LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 10_240]


def _add(left, right):
    return left + right


def _segmented_add(left, right):
    (value_l, start_l), (value_r, start_r) = left, right
    return jnp.where(start_r, value_r, value_l + value_r), start_l | start_r


@pytest.mark.parametrize("length", LENGTHS)
def test_a_sum_equals_associative_scan_bit_for_bit(length):
    values = np.random.default_rng(length).normal(size=(length, 3)).astype(np.float32)
    ours = np.asarray(jax.jit(lambda v: detection._tree_scan(_add, v))(values))
    theirs = np.asarray(jax.jit(lambda v: jax.lax.associative_scan(_add, v))(values))
    np.testing.assert_array_equal(ours + 0.0, theirs + 0.0)  # +0.0: -0.0 and 0.0 alike


@pytest.mark.parametrize("length", [1, 6, 33, 257])
def test_a_segmented_pytree_scan_equals_associative_scan(length):
    rng = np.random.default_rng(length)
    values = rng.normal(size=length).astype(np.float32)
    starts = rng.random(length) < 0.2
    elems = (values, starts)
    ours = jax.jit(lambda e: detection._tree_scan(_segmented_add, e))(elems)
    theirs = jax.jit(lambda e: jax.lax.associative_scan(_segmented_add, e))(elems)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(np.asarray(a) + 0, np.asarray(b) + 0)
