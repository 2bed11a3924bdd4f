"""The recogniser's training pieces, as pure functions: CTC loss, train step, predict.

    net = model.CtcRecogniser(model.CtcConfig())
    state = create_train_state(net, OptimizerConfig(), jax.random.key(0), batch)
    state, loss = jax.jit(functools.partial(train_step, net, masks=MaskConfig(...)))(
        state, batch, jax.random.key(1))
    emit, symbol, mask = jax.jit(functools.partial(predict, net))(state.params, batch)

Batches are `ctc_jax.input_pipeline` batches: audio float32 [B, T, 40],
audio_mask bool [B, T], labels int32 [B, N] symbol ids, label_mask bool [B, N],
example_mask bool [B]. The loss is `optax.ctc_loss` summed over the batch's examples and
divided by their characters (nats per character), with SpecAugment-style masks on the
features (`speechkit.augment`) and the model's dropout when training.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from ctc_jax import decode, symbols
from speechkit import accelerator
from speechkit.augment import MaskConfig, spec_augment
from speechkit.optim import OptimizerConfig, TrainState


def create_train_state(net, config: OptimizerConfig, rng, batch) -> TrainState:
    """Initial parameters (shapes from one row of `batch`) and optimiser state."""
    return TrainState.create(net.init(rng, {"audio": batch["audio"][:1]}), config)


def loss(net, params, batch, rng, masks: MaskConfig | None = None) -> jax.Array:
    """Mean CTC loss per target character of the batch's real examples (float32 scalar)."""
    audio = batch["audio"]
    if masks is not None:
        audio = spec_augment(audio, batch["audio_mask"], jax.random.fold_in(rng, 1), masks)
    outputs, out_mask = net.apply(
        params,
        {"audio": audio},
        {"audio": batch["audio_mask"]},
        training=True,
        rngs={"dropout": rng},
    )
    with accelerator.precision_scope(net.config.precision):  # its label gathers are matmuls
        per_example = optax.ctc_loss(
            outputs["logits"],
            1.0 - out_mask.astype(jnp.float32),
            batch["labels"],
            1.0 - batch["label_mask"].astype(jnp.float32),
            blank_id=symbols.BLANK,
        )
    real = batch["example_mask"]
    characters = jnp.sum(batch["label_mask"] & real[:, None])
    return jnp.sum(jnp.where(real, per_example, 0.0)) / jnp.maximum(characters, 1)


def train_step(net, state: TrainState, batch, rng, masks: MaskConfig | None = None):
    """One optimiser step -> (new state, loss)."""
    value, grads = jax.value_and_grad(lambda p: loss(net, p, batch, rng, masks))(state.params)
    return state.apply_gradients(grads), value


def predict(net, params, batch):
    """Greedy causal decoding of a batch -> (emit bool [B, To], symbol int32 [B, To],
    out_mask bool [B, To]), out_mask False on filler rows."""
    return predict_with_logits(net, params, batch)[:3]


def predict_with_logits(net, params, batch):
    """`predict`'s outputs and the logits they were decoded from: (emit, symbol,
    out_mask, logits float [B, To, V])."""
    outputs, out_mask = net.apply(params, {"audio": batch["audio"]}, {"audio": batch["audio_mask"]})
    out_mask = out_mask & batch["example_mask"][:, None]
    emit, symbol = decode.greedy(outputs["logits"], out_mask)
    return emit, symbol, out_mask, outputs["logits"]
