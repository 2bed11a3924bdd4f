"""The optimiser and train state both tasks use: AdamW, warm-up + cosine, clipping.

    state = TrainState.create(params, OptimizerConfig(learning_rate=1e-3, total_steps=2000))
    state = state.apply_gradients(grads)

`OptimizerConfig.constant_rate` is AdamW at a constant rate (the baselines); with
`clip_norm=None` it is exactly `optax.adamw(learning_rate, weight_decay=...)`.

A `TrainState` is a pytree (step, params, opt_state) whose optimiser is static, so
states stack along a leading axis and a `vmap`-ed step trains several folds at once.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from speechkit import checks


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    learning_rate: float = 1e-3  # peak
    warmup_steps: int = 50
    total_steps: int = 1000  # cosine decay to `final_fraction` of the peak by then
    final_fraction: float = 0.05
    weight_decay: float = 1e-4
    clip_norm: float | None = 1.0  # global gradient norm; None: no clipping

    def __post_init__(self):
        checks.require_number("OptimizerConfig.learning_rate", self.learning_rate, above=0)
        checks.require_int("OptimizerConfig.warmup_steps", self.warmup_steps, at_least=0)
        checks.require_int("OptimizerConfig.total_steps", self.total_steps, at_least=1)

    @classmethod
    def constant_rate(
        cls, learning_rate: float, weight_decay: float, clip_norm: float | None
    ) -> OptimizerConfig:
        """AdamW at a constant `learning_rate`: no warm-up, and a cosine "decay" to
        final_fraction = 1 of the peak, which multiplies the rate by exactly 1."""
        return cls(
            learning_rate=learning_rate,
            warmup_steps=0,
            final_fraction=1.0,
            weight_decay=weight_decay,
            clip_norm=clip_norm,
        )


@functools.cache
def make_optimizer(config: OptimizerConfig) -> optax.GradientTransformation:
    """AdamW with linear warm-up, cosine decay and global-norm gradient clipping; one
    object per config, so train states of one config share a tree structure (a jitted
    step traced for one serves all)."""
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=config.learning_rate,
        warmup_steps=config.warmup_steps,
        decay_steps=max(config.total_steps, config.warmup_steps + 1),
        end_value=config.learning_rate * config.final_fraction,
    )
    adamw = optax.adamw(schedule, weight_decay=config.weight_decay)
    if config.clip_norm is None:
        return adamw
    return optax.chain(optax.clip_by_global_norm(config.clip_norm), adamw)


def parameter_count(params) -> int:
    """Number of scalars in a parameter pytree."""
    return sum(int(jnp.size(leaf)) for leaf in jax.tree_util.tree_leaves(params))


class TrainState(flax.struct.PyTreeNode):
    step: jax.Array
    params: Any
    opt_state: Any
    tx: optax.GradientTransformation = flax.struct.field(pytree_node=False)

    @classmethod
    def create(cls, params, config: OptimizerConfig) -> TrainState:
        return cls.for_optimizer(params, make_optimizer(config))

    @classmethod
    def for_optimizer(cls, params, tx: optax.GradientTransformation) -> TrainState:
        """A step-0 state around an optimiser built once (`make_optimizer`): states that
        share one `tx` object have one tree structure, so a jitted step compiles once."""
        return cls(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params), tx=tx)

    def apply_gradients(self, grads) -> TrainState:
        updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
        return self.replace(
            step=self.step + 1,
            params=optax.apply_updates(self.params, updates),
            opt_state=opt_state,
        )
