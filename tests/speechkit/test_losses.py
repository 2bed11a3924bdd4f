"""speechkit.losses.cross_entropy against a NumPy weighted mean of -log softmax."""

import jax
import numpy as np

from speechkit.losses import cross_entropy


def _numpy_cross_entropy(logits, labels, weights):
    logits = logits.astype(np.float64)
    log_softmax = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_softmax, labels[..., None], -1)[..., 0]
    return -np.sum(picked * weights) / max(np.sum(weights), 1e-9)


def test_masked_and_class_weighted_mean():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 7, 5)).astype(np.float32)
    labels = rng.integers(0, 5, size=(3, 7))
    mask = rng.random((3, 7)) < 0.6
    class_weights = np.array([1.0, 0.5, 2.0, 0.0, 3.0], np.float32)
    np.testing.assert_allclose(
        cross_entropy(logits, labels, mask), _numpy_cross_entropy(logits, labels, mask), rtol=1e-5
    )
    weighted = mask * class_weights[labels]
    np.testing.assert_allclose(
        cross_entropy(logits, labels, mask, class_weights),
        _numpy_cross_entropy(logits, labels, weighted),
        rtol=1e-5,
    )
    # Masked rows do not count, whatever their logits; float weights act like the mask.
    noisy = np.where(mask[..., None], logits, 1e3).astype(np.float32)
    np.testing.assert_array_equal(
        cross_entropy(noisy, labels, mask), cross_entropy(logits, labels, mask.astype(np.float32))
    )


def test_nothing_valid_is_zero_and_jit_matches():
    logits = np.ones((2, 3), np.float32)
    labels = np.array([0, 2])
    assert float(cross_entropy(logits, labels, np.zeros(2, bool))) == 0.0
    mask = np.array([True, False])
    np.testing.assert_array_equal(
        jax.jit(cross_entropy)(logits, labels, mask), cross_entropy(logits, labels, mask)
    )
    np.testing.assert_allclose(cross_entropy(logits, labels, mask), np.log(3.0), rtol=1e-6)
