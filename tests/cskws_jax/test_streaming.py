"""Streaming detection equals offline detection on the same audio, with emission times."""

import jax
import numpy as np
import pytest

from cskws_jax import decode, model
from cskws_jax.streaming import StreamDetector

CONFIG = model.AfKwsConfig(
    num_keywords=3,
    stem_channels=8,
    stages=(model.Stage(8, 2, 1), model.Stage(8, 2, 1, dilation=2)),
    head_channels=8,
    delay=2,
)


@pytest.mark.parametrize("block_outputs", [1, 3, 8])
def test_streamed_detections_equal_offline_detections(block_outputs):
    net = model.AfKws(CONFIG)
    rng = np.random.default_rng(block_outputs)
    features = rng.normal(size=(2, 203, 64)).astype(np.float32)
    mask = np.ones((2, 203), bool)
    mask[1, 150:] = False
    params = net.init(jax.random.key(1), {"audio": features})
    params = jax.tree_util.tree_map(lambda a: 1.5 * a, params)  # livelier heatmaps
    offline = decode.decode(
        *net.apply(params, {"audio": features}, {"audio": mask}),
        num_keywords=3,
        hop_s=0.04,
        max_detections=200,
        min_score=0.05,
    )
    detector = StreamDetector(net, params, block_outputs=block_outputs, min_score=0.05)
    streamed, emitted = detector.detect(features, mask, max_detections=200)
    assert int(offline["valid"].sum()) > 20  # the comparison is not vacuous
    for key in offline:
        np.testing.assert_allclose(
            np.asarray(streamed[key], float), np.asarray(offline[key], float), atol=1e-5
        )
    # A detection is emitted once its position and `delay + radius` more have arrived
    # (latency_s after the start of its position's frame), plus the wait for the block.
    valid = np.asarray(streamed["valid"])
    centre = np.asarray(streamed["start"] + streamed["end"]) / 2
    wait = (np.asarray(emitted) - centre)[valid]
    assert wait.min() >= detector.latency_s - 0.04 - 1e-5
    assert wait.max() <= detector.latency_s + (block_outputs - 1) * 0.04 + 1e-5
