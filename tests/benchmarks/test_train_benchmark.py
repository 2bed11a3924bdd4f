"""benchmarks.train's training-loop measurement (`loop` in its JSON), on toy steps: both
ways run through experiments.training.run_loop and write the same curves; and its fold
forms (`fold_forms`) at the smoke preset."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import train as train_benchmark
from experiments import folds

LOOP = types.SimpleNamespace(steps=4, log_every=2, rounds=2)


def _toy_step(state, batch, rng):
    noise = jax.random.uniform(jax.random.wrap_key_data(rng), batch.shape)
    state = {"w": state["w"] * np.float32(0.9) + batch * noise}
    return state, {"loss": jnp.sum(state["w"] ** 2)}


def _check(result: dict) -> None:
    assert result["same_curves"]
    assert result["steps"] == LOOP.steps and result["log_every"] == LOOP.log_every
    for way in ("host_sync", "device_metrics"):
        assert result[f"{way}_steps_per_s"] > 0
        assert len(result["rounds_steps_per_s"][way]) == LOOP.rounds
    ratio = result["device_metrics_steps_per_s"] / result["host_sync_steps_per_s"]
    assert result["ratio"] == ratio


def test_the_multiqt_loop_both_ways():
    mesh = folds.fold_mesh()
    slots = folds.fold_slots(train_benchmark.FOLDS, mesh)
    setup = {
        "mesh": mesh,
        "slots": slots,
        "one_fold": _toy_step,
        "kept": {
            form: folds.fold_parallel(_toy_step, mesh, form=form, donate_state=False)
            for form in folds.FORMS
        },
        "host_states": {"w": np.ones((slots, 3), np.float32)},
        "batch": np.arange(3, dtype=np.float32),
    }
    result = train_benchmark.loop_multiqt(setup, LOOP)
    assert result["folds"] == train_benchmark.FOLDS
    assert result["fold_form"] == folds.default_form()
    _check(result)


def test_the_afkws_loop_both_ways():
    def train_step(state, batch, key):
        return _toy_step(state, batch, jax.random.key_data(key))

    setup = {
        "state": {"w": jnp.ones(3, jnp.float32)},
        "batch": np.arange(3, dtype=np.float32),
        "train_step": train_step,
        "step": jax.jit(train_step),
    }
    _check(train_benchmark.loop_afkws(setup, LOOP))


def test_fold_forms_time_each_form_and_name_the_fastest():
    result = train_benchmark.fold_forms("smoke", 1.0, repeats=1, skip=("vmap", "unroll"))
    assert set(result["forms"]) == {"sequential", "scan"}
    assert result["skipped"] == ["unroll", "vmap"]
    for entry in result["forms"].values():
        assert entry["compile_seconds"] >= 0 and entry["step_seconds"] > 0
        assert entry["total_seconds"] == pytest.approx(
            entry["compile_seconds"] + result["steps"] * entry["step_seconds"]
        )
    totals = {form: entry["total_seconds"] for form, entry in result["forms"].items()}
    assert result["winner"] == min(totals, key=totals.get)
    assert result["default"] == folds.default_form() and result["steps"] == 30
