"""AF-KWS training pieces: augmentation, evaluation, and learning on `smoke` data."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_datasets as tfds

from cskws_jax import baselines, input_pipeline, model, train
from experiments.scoring.evaluators import detection

SMALL = model.AfKwsConfig(
    num_keywords=20,
    stem_channels=32,
    stages=(
        model.Stage(32, 2, 1),
        model.Stage(48, 2, 1),
        model.Stage(64, 1, 1, dilation=2),
        model.Stage(64, 1, 1, dilation=4),
    ),
    head_channels=32,
    delay=6,
)


def test_augmentation_keeps_padding_and_shifts_gain():
    features = jnp.asarray(np.random.default_rng(0).normal(size=(2, 50, 64)), jnp.float32)
    mask = jnp.ones((2, 50), bool).at[1, 30:].set(False)
    quiet = train.AugmentConfig(gain_db=(10.0, 10.0), noise_probability=0.0)
    out = train.augment(features, mask, jax.random.key(0), quiet)
    np.testing.assert_allclose(out[0], features[0] + np.log(10.0), atol=1e-5)
    assert not np.asarray(out[1, 30:]).any()
    noisy = train.AugmentConfig(gain_db=(0.0, 0.0), noise_probability=1.0, snr_db=(0.0, 0.0))
    out = train.augment(features, mask, jax.random.key(0), noisy)
    assert np.all(np.asarray(out[0]) > np.asarray(features[0]))  # energy only ever added
    with pytest.raises(ValueError, match="noise_probability"):
        train.AugmentConfig(noise_probability=2.0)


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (
            dict(max_detections=0),
            ValueError,
            r"PeakDecodingConfig.max_detections: expected an int >= 1",
        ),
        (dict(max_detections=8.0), TypeError, "PeakDecodingConfig.max_detections: expected an int"),
        (dict(radius=-1), ValueError, r"PeakDecodingConfig.radius: expected an int >= 0"),
        (
            dict(min_score=1.5),
            ValueError,
            r"PeakDecodingConfig.min_score: expected a value in \[0, 1\]",
        ),
    ],
)
def test_bad_decode_settings_are_named(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        train.PeakDecodingConfig(**kwargs)


@pytest.mark.parametrize("unknown_class", [True, False])
def test_the_unknown_class_ablation_trains_on_keywords_only(unknown_class):
    config = model.AfKwsConfig(
        num_keywords=2,
        unknown_class=unknown_class,
        stem_channels=8,
        stages=(model.Stage(8, 2, 1), model.Stage(8, 2, 1)),
        head_channels=8,
        delay=1,
    )
    net = model.AfKws(config)
    batch = {
        "audio": np.zeros((1, 200, 64), np.float32),
        "audio_mask": np.ones((1, 200), bool),
        "example_mask": np.ones(1, bool),
        "start": np.array([[0.2, 0.8, 1.2]], np.float32),
        "end": np.array([[0.6, 1.0, 1.6]], np.float32),
        "label": np.array([[0, 2, 1]], np.int32),  # 2 = the unknown class
        "valid": np.ones((1, 3), bool),
    }
    state = train.create_train_state(net, train.OptimizerConfig(), jax.random.key(0), batch)
    # Jitted: run op by op, the model and its step compile some 400 one-op programs.
    outputs, out_mask = jax.jit(net.apply)(state.params, {"audio": batch["audio"]})
    assert outputs["heatmap"].shape[-1] == 2 + unknown_class
    centres = train._targets(net, batch, out_mask.shape[1])
    assert int(centres["count"][0]) == 2 + unknown_class
    step = jax.jit(functools.partial(train.train_step, net, None))
    _, stats = step(state, batch, jax.random.key(1))
    assert np.isfinite(float(stats["loss"]))


def smoke_detector(data_dir, steps=300):
    """(train source, trained net, params, losses) on the smoke corpus."""
    source = tfds.data_source("synthetic_kws/smoke", data_dir=str(data_dir))["train"]
    config = input_pipeline.PipelineConfig(batch_size=8, crop_s=4.0, num_epochs=steps + 1)
    batches = iter(input_pipeline.training_batches(source, config, num_keywords=20, seed=0))
    batch = next(batches)
    net = model.AfKws(SMALL)
    optimizer = train.OptimizerConfig(learning_rate=3e-3, warmup_steps=20, total_steps=steps)
    state = train.create_train_state(net, optimizer, jax.random.key(0), batch)
    step = jax.jit(functools.partial(train.train_step, net, train.AugmentConfig()))
    losses = []
    for i in range(steps):
        state, stats = step(state, batch, jax.random.key(i))
        losses.append(float(stats["loss"]))
        batch = next(batches)
    return source, net, state.params, losses


def sliding_window_baseline(source, steps=300):
    """The window classifier trained on the same crops for as many steps."""
    config = baselines.WindowConfig()
    state = baselines.create_train_state(config, 20, jax.random.key(0))
    step = jax.jit(functools.partial(baselines.train_step, config=config, num_keywords=20))
    crops = input_pipeline.PipelineConfig(batch_size=8, crop_s=4.0, num_epochs=steps)
    for batch in input_pipeline.training_batches(source, crops, num_keywords=20, seed=0):
        state, _ = step(state, batch)
    return jax.jit(
        functools.partial(baselines.detections, config=config, num_keywords=20, max_detections=64)
    ), state.params


@pytest.mark.slow
def test_training_on_smoke_data_learns_and_beats_the_sliding_window(smoke_build):
    """Scored on the (few) smoke training utterances: it shows learning, not generalisation
    (the experiments score held-out voices)."""
    data_dir, _ = smoke_build
    source, net, params, losses = smoke_detector(data_dir)
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20]), losses[::30]
    config = input_pipeline.PipelineConfig(batch_size=8, unknown_class=False)
    batches = list(input_pipeline.evaluation_batches(source, config, num_keywords=20))
    detect = jax.jit(functools.partial(train.detect, net))
    scores = detection.evaluate(
        lambda batch: detect(params, batch), batches, num_keywords=20, timed=False
    )["scores"]
    window_detect, window_params = sliding_window_baseline(source)
    window_scores = detection.evaluate(
        lambda batch: window_detect(window_params, batch), batches, num_keywords=20, timed=False
    )["scores"]
    # Measured: AF-KWS mAP 0.82, the window classifier 0.29.
    assert scores["mAP"] > window_scores["mAP"] + 0.2, (scores, window_scores)
