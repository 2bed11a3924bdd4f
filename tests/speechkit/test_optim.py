"""speechkit.optim: the constant-rate configuration is plain AdamW, bit for bit, and a
state built around a shared optimiser keeps one tree structure."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from speechkit.optim import OptimizerConfig, TrainState, make_optimizer


def _params():
    key = jax.random.key(0)
    return {"w": jax.random.normal(key, (4, 3)), "b": jnp.zeros(3)}


def _gradients(step: int):
    key = jax.random.key(step + 1)
    return {"w": jax.random.normal(key, (4, 3)), "b": jnp.full(3, 0.1 * step)}


def _train(tx, steps: int = 30):
    params, state = _params(), tx.init(_params())
    for step in range(steps):
        updates, state = tx.update(_gradients(step), state, params)
        params = optax.apply_updates(params, updates)
    return params


def test_constant_rate_without_clipping_is_plain_adamw():
    config = OptimizerConfig.constant_rate(3e-3, 1e-4, clip_norm=None)
    assert (config.warmup_steps, config.final_fraction) == (0, 1.0)
    ours = _train(make_optimizer(config))  # 30 steps, past total_steps would not matter
    plain = _train(optax.adamw(3e-3, weight_decay=1e-4))
    for leaf, expected in zip(jax.tree.leaves(ours), jax.tree.leaves(plain), strict=True):
        np.testing.assert_array_equal(leaf, expected)


def test_constant_rate_with_clipping_clips():
    clipped = make_optimizer(OptimizerConfig.constant_rate(3e-3, 1e-4, clip_norm=0.01))
    plain = optax.chain(optax.clip_by_global_norm(0.01), optax.adamw(3e-3, weight_decay=1e-4))
    for leaf, expected in zip(
        jax.tree.leaves(_train(clipped)), jax.tree.leaves(_train(plain)), strict=True
    ):
        np.testing.assert_array_equal(leaf, expected)


def test_for_optimizer_shares_one_tree_structure():
    tx = make_optimizer(OptimizerConfig.constant_rate(1e-3, 0.0, clip_norm=None))
    first, second = TrainState.for_optimizer(_params(), tx), TrainState.for_optimizer(_params(), tx)
    assert jax.tree.structure(first) == jax.tree.structure(second)
    assert int(first.step) == 0
    stepped = first.apply_gradients(_gradients(0))
    assert int(stepped.step) == 1 and stepped.tx is tx
