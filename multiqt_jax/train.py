"""MultiQT training pieces, as pure functions: inputs, targets, loss, train step, predict.

    net = model.MultiQT(model_config)
    state = create_train_state(net, OptimizerConfig(), jax.random.key(0), batch)
    step = jax.jit(functools.partial(train_step, net))
    state, stats = step(state, batch, jax.random.key(1))           # stats["loss"]
    pred, gold, mask = jax.jit(functools.partial(predict, net))(state.params, batch)

Batches are `multiqt_jax.input_pipeline` batches (labels at 10 ms). The model emits one
frame per `audio_stride` 10 ms frames; output frame t sees audio up to frame
t * audio_stride, so its target is the label of that frame (`output_labels`).
`train_step` and `predict` have no Python side effects, so they can be `vmap`-ed over
stacked fold states and sharded (experiments); `experiments.scoring.evaluators.tracking` scores
`predict`'s labels.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from speechkit.augment import spec_augment
from speechkit.losses import cross_entropy
from speechkit.optim import OptimizerConfig, TrainState


def create_train_state(net, config: OptimizerConfig, rng, batch) -> TrainState:
    """Initial parameters (shapes from `batch`) and optimiser state."""
    return TrainState.create(net.init(rng, model_inputs(batch, rows=1)), config)


def model_inputs(batch, rows: int | None = None) -> dict:
    """The model's inputs {"audio", "text"} of a pipeline batch (the first `rows` rows)."""
    return {name: batch[name][:rows] for name in ("audio", "text")}


def model_masks(batch) -> dict:
    """The inputs' frame masks {"audio", "text"} of a pipeline batch."""
    return {name: batch[f"{name}_mask"] for name in ("audio", "text")}


def output_labels(labels, mask, audio_stride: int, frames: int):
    """10 ms labels int [B, Ta] and mask bool [B, Ta] -> the model's output clock:
    int32 [B, frames] and bool [B, frames] (the label of frame t * audio_stride)."""
    picked = labels[:, ::audio_stride][:, :frames]
    picked_mask = mask[:, ::audio_stride][:, :frames]
    missing = frames - picked.shape[1]
    if missing > 0:  # the model's output may reach one frame past the labels
        picked = jnp.pad(picked, ((0, 0), (0, missing)))
        picked_mask = jnp.pad(picked_mask, ((0, 0), (0, missing)))
    return picked.astype(jnp.int32), picked_mask


def _targets(net, batch, logits_mask):
    labels, mask = output_labels(
        batch["labels"], batch["audio_mask"], net.config.audio_stride, logits_mask.shape[1]
    )
    return labels, mask & logits_mask & batch["example_mask"][:, None]


def loss(net, params, batch, rng, class_weights=None, masks=None) -> jax.Array:
    """The training loss of a batch: masked, class-weighted cross-entropy at the output
    clock, with dropout from `rng` (a PRNG key) and, with `masks` (a
    `speechkit.augment.MaskConfig`), SpecAugment-style masks on the audio features."""
    if masks is not None:
        audio = spec_augment(batch["audio"], batch["audio_mask"], jax.random.fold_in(rng, 1), masks)
        batch = {**batch, "audio": audio}
    outputs, logits_mask = net.apply(
        params,
        model_inputs(batch),
        model_masks(batch),
        training=True,
        rngs={"dropout": rng},
    )
    labels, mask = _targets(net, batch, logits_mask)
    return cross_entropy(outputs["logits"], labels, mask, class_weights)


def train_step(net, state: TrainState, batch, rng, class_weights=None, masks=None):
    """One optimiser step on a batch -> (new state, {"loss", "grad_norm"}); `masks` as
    in `loss`."""
    value, grads = jax.value_and_grad(loss, argnums=1)(
        net, state.params, batch, rng, class_weights, masks
    )
    return state.apply_gradients(grads), {"loss": value, "grad_norm": optax.tree.norm(grads)}


def predict(net, params, batch, present=None):
    """(predicted labels int32 [B, To], gold labels int32 [B, To], mask bool [B, To])."""
    outputs, logits_mask = net.apply(params, model_inputs(batch), model_masks(batch), present)
    labels, mask = _targets(net, batch, logits_mask)
    return jnp.argmax(outputs["logits"], axis=-1).astype(jnp.int32), labels, mask


def class_weights_from_counts(frame_counts, power: float = 0.5):
    """float32 [C] weights ~ (1 / frequency) ** power, mean 1 over present classes."""
    counts = jnp.asarray(frame_counts, jnp.float32)
    weights = jnp.where(counts > 0, (counts.sum() / jnp.maximum(counts, 1.0)) ** power, 0.0)
    return weights / jnp.maximum(weights[counts > 0].mean(), 1e-9)
