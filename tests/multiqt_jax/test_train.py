"""MultiQT training pieces: the loss, label alignment, and learning on `smoke` data."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_datasets as tfds

import metrics
from multiqt_jax import input_pipeline, labels, model, train


def test_output_labels_take_the_frame_each_output_sees_last():
    frame_labels = jnp.arange(10)[None]
    picked, mask = train.output_labels(frame_labels, frame_labels < 7, 4, 4)
    assert picked.tolist() == [[0, 4, 8, 0]] and mask.tolist() == [[True, True, False, False]]


def test_class_weights():
    weights = train.class_weights_from_counts(jnp.array([90.0, 10.0, 0.0]), power=1.0)
    np.testing.assert_allclose(weights, [0.2, 1.8, 0.0], rtol=1e-6)


@pytest.mark.slow
def test_training_on_smoke_data_learns(smoke_build):
    data_dir, _ = smoke_build
    source = tfds.data_source("synthetic_calls/questions-smoke", data_dir=str(data_dir))["train"]
    config = input_pipeline.PipelineConfig(batch_size=5, shuffle=False, num_epochs=1)
    batch = next(iter(input_pipeline.batches(source, config, indices=np.arange(len(source)))))
    num_classes = len(labels.QUESTION_CLASSES)
    net = model.MultiQT(
        model.MultiQTConfig(
            num_classes=num_classes,
            audio_channels=(32, 32, 32),
            audio_kernels=(5, 5, 5),
            audio_strides=(1, 2, 2),
            audio_dilations=(1, 2, 4),
            text_channels=(32, 32),
            text_kernels=(5, 5),
            text_strides=(2, 1),
            text_dilations=(1, 4),
            dense=(64,),
        )
    )
    optimizer = train.OptimizerConfig(learning_rate=3e-3, warmup_steps=10, total_steps=150)
    state = train.create_train_state(net, optimizer, jax.random.key(0), batch)
    step = jax.jit(functools.partial(train.train_step, net))
    losses = []
    for i in range(150):
        state, stats = step(state, batch, jax.random.key(i))
        losses.append(float(stats["loss"]))
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10]), losses[::15]
    pred, gold, mask = jax.jit(functools.partial(train.predict, net))(state.params, batch)
    learnt = metrics.timestep_prf(pred, gold, mask, num_classes=num_classes).f1
    majority = metrics.timestep_prf(jnp.zeros_like(gold), gold, mask, num_classes=num_classes).f1
    assert learnt > majority + 0.2, (learnt, majority)
