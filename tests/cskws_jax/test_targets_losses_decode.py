"""AF-KWS targets, losses and decoding: hand-computed cases, jit/vmap, edge cases."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cskws_jax import decode, losses, targets

HOP = 0.04


def _words(*rows, pad=4):
    """rows of (start, end, label) -> padded start, end, label, valid."""
    start = np.zeros(pad, np.float32)
    end = np.zeros(pad, np.float32)
    label = np.zeros(pad, np.int32)
    valid = np.zeros(pad, bool)
    for i, (s, e, c) in enumerate(rows):
        start[i], end[i], label[i], valid[i] = s, e, c, True
    return start, end, label, valid


def test_centre_targets_by_hand():
    # Word of class 1 from 0.40 to 0.90 s: centre 0.65 s = frame 16.25, length 12.5 frames.
    out = targets.centre_targets(
        *_words((0.40, 0.90, 1), (0.0, 0.2, 7)), num_frames=30, num_classes=3, hop_s=HOP
    )
    assert int(out["count"]) == 1  # class 7 is outside the 3 heatmap classes
    assert out["heatmap"][16, 1] == 1.0 and out["heatmap"][:, [0, 2]].max() == 0.0
    sigma = 12.5 / 6
    expected = np.exp(-((np.arange(30) - 16) ** 2) / (2 * sigma**2))
    np.testing.assert_allclose(out["heatmap"][:, 1], expected, rtol=1e-5)
    assert np.flatnonzero(out["centre_mask"]).tolist() == [16]
    assert out["length"][16] == pytest.approx(12.5, rel=1e-5)
    assert out["offset"][16] == pytest.approx(0.25, abs=1e-5)


def test_shared_centres_and_out_of_range_words():
    rows = ((0.10, 0.30, 0), (0.12, 0.28, 2), (5.0, 6.0, 1), (0.3, 0.3, 1))
    out = jax.jit(lambda *a: targets.centre_targets(*a, num_frames=20, num_classes=3, hop_s=HOP))(
        *_words(*rows)
    )
    # Both words centre on frame 5 and peak there; the later one's length is kept.
    assert out["heatmap"][5, 0] == 1.0 and out["heatmap"][5, 2] == 1.0
    assert out["length"][5] == pytest.approx(0.16 / HOP, rel=1e-5)
    assert int(out["count"]) == 2  # the word past the frames and the empty one are dropped
    assert out["centre_mask"].sum() == 1


def test_focal_loss_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 6, 3)).astype(np.float32)
    target = rng.random((2, 6, 3)).astype(np.float32)
    target[0, 2, 1] = 1.0
    mask = np.ones((2, 6), bool)
    mask[1, 4:] = False
    p = 1 / (1 + np.exp(-logits.astype(np.float64)))
    per_cell = np.where(
        target >= 1, -((1 - p) ** 2) * np.log(p), -((1 - target) ** 4) * p**2 * np.log(1 - p)
    )
    expected = (per_cell * mask[..., None]).sum()
    assert float(losses.focal_loss(logits, target, mask)) == pytest.approx(expected, rel=1e-5)


def test_detection_loss_is_small_for_a_perfect_prediction():
    words = _words((0.40, 0.90, 1))
    target = targets.centre_targets(*words, num_frames=30, num_classes=3, hop_s=HOP)
    target = jax.tree_util.tree_map(lambda a: a[None], target)
    mask = jnp.ones((1, 30), bool)
    perfect = {
        "heatmap": jnp.where(target["heatmap"] >= 1, 20.0, -20.0),
        "length": target["length"],
        "offset": target["offset"],
    }
    wrong = {**perfect, "heatmap": -perfect["heatmap"], "length": perfect["length"] + 2.0}
    total, parts = losses.detection_loss(perfect, mask, target)
    assert float(total) < 1e-6
    bad_total, bad_parts = losses.detection_loss(wrong, mask, target)
    assert float(bad_parts["length"]) == pytest.approx(2.0, rel=1e-5)
    assert float(bad_total) > 10


def test_the_unknown_class_can_be_weighted_and_left_out_of_the_count():
    """Class 2 is the unknown class of a 2-keyword model: one keyword and two other words."""
    words = _words((0.40, 0.90, 1), (1.20, 1.50, 2), (1.80, 2.10, 2))
    target = targets.centre_targets(*words, num_frames=60, num_classes=3, hop_s=HOP)
    target = jax.tree_util.tree_map(lambda a: a[None], target)
    mask = jnp.ones((1, 60), bool)
    heads = {
        "heatmap": jnp.zeros((1, 60, 3)),
        "length": jnp.zeros((1, 60)),
        "offset": jnp.zeros((1, 60)),
    }
    plain = losses.focal_loss(heads["heatmap"], target["heatmap"], mask)
    unknown = losses.focal_loss(heads["heatmap"][..., 2:], target["heatmap"][..., 2:], mask)
    _, parts = losses.detection_loss(heads, mask, target, losses.LossConfig(), 2)
    assert float(parts["heatmap"]) == pytest.approx(float(plain) / 3, rel=1e-5)
    config = losses.LossConfig(unknown_weight=0.25, count="keywords")
    _, parts = losses.detection_loss(heads, mask, target, config, 2)
    expected = float(plain) - 0.75 * float(unknown)  # divided by 1 keyword centre
    assert float(parts["heatmap"]) == pytest.approx(expected, rel=1e-5)
    assert float(parts["length"]) == pytest.approx(float(target["length"].sum()), rel=1e-5)
    with pytest.raises(ValueError, match="LossConfig.count"):
        losses.LossConfig(count="words")


def test_decode_by_hand():
    logits = np.full((1, 10, 3), -10.0, np.float32)
    logits[0, 3, 0] = 2.0  # peak, keyword 0
    logits[0, 4, 0] = 1.0  # suppressed by its neighbour
    logits[0, 7, 1] = 0.5  # peak, keyword 1
    logits[0, 5, 2] = 5.0  # the unknown class (index 2 with 2 keywords): never a detection
    outputs = {
        "heatmap": logits,
        "length": np.full((1, 10), 5.0, np.float32),
        "offset": np.full((1, 10), 0.5, np.float32),
    }
    found = jax.jit(lambda o, m: decode.decode(o, m, num_keywords=2, hop_s=HOP, max_detections=4))(
        outputs, np.ones((1, 10), bool)
    )
    assert found["valid"].tolist() == [[True, True, False, False]]
    assert found["label"][0, :2].tolist() == [0, 1]
    np.testing.assert_allclose(found["start"][0, :2], [3.5 * HOP - 0.1, 7.5 * HOP - 0.1], atol=1e-6)
    np.testing.assert_allclose(found["end"][0, :2], [3.5 * HOP + 0.1, 7.5 * HOP + 0.1], atol=1e-6)
    np.testing.assert_allclose(
        found["score"][0, :2], 1 / (1 + np.exp(-np.array([2.0, 0.5]))), rtol=1e-6
    )
    assert not found["start"][0, 2:].any()  # padding slots hold zeros
    # Masked frames are neither peaks nor suppressors.
    masked = np.arange(10)[None] != 3
    again = decode.decode(outputs, masked, num_keywords=2, hop_s=HOP, max_detections=4)
    assert again["label"][0, :2].tolist() == [0, 1]
    assert again["start"][0, 0] == pytest.approx(4.5 * HOP - 0.1, abs=1e-6)


def test_equal_scores_keep_position_then_class_order():
    logits = np.full((1, 9, 2), -10.0, np.float32)
    logits[0, [6, 2], 1] = 1.0
    logits[0, 2, 0] = 1.0
    outputs = {
        "heatmap": logits,
        "length": np.ones((1, 9), np.float32),
        "offset": np.zeros((1, 9), np.float32),
    }
    found = decode.decode(
        outputs, np.ones((1, 9), bool), num_keywords=2, hop_s=HOP, max_detections=3
    )
    assert found["label"][0].tolist() == [0, 1, 1]
    np.testing.assert_allclose(
        found["start"][0], [2 * HOP - HOP / 2, 2 * HOP - HOP / 2, 6 * HOP - HOP / 2], atol=1e-6
    )
