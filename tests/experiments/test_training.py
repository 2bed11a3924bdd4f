"""experiments.training.run_loop: losses kept on the device and fetched at log time, the
same means as a host read every step, checkpoints and resuming; and the fold-parallel
step's donated state (experiments.folds)."""

from __future__ import annotations

import json
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.train import Batches
from experiments import checkpoints, folds, training

FOLDS = 3


class Counting(Batches):
    """Batch i is a float32 [FOLDS] from i (i restored from a checkpoint)."""

    def batch_at(self, count: int):
        return np.float32(0.37) * np.arange(1, FOLDS + 1, dtype=np.float32) * count


class Config:
    def to_json(self) -> str:
        return "{}"


@jax.jit
def _fake_step(state, batch):
    """Float32 losses whose float32 mean over steps is not their float64 mean."""
    w = state["w"] * np.float32(0.9) + jnp.sin(batch) / np.float32(3)
    return {"w": w}, w**2 + np.float32(1 / 7)


def _run(workdir, steps, *, log_every=10, checkpoint_every=10, state=None, **options):
    """run_loop of `_fake_step` (losses per fold, or their mean with scalar=True); returns
    (state, the losses the steps returned, log lines, fetch calls as (step, count))."""
    scalar = options.pop("scalar", False)
    to_host = options.pop("to_host", None)  # an old call site: the step reads its loss
    seen, lines, calls, at = [], [], [], [0]

    def step(state, batches, index):
        at[0] = index + 1
        state, loss = _fake_step(state, batches[0])
        loss = jnp.mean(loss) if scalar else loss
        loss = loss if to_host is None else to_host(loss)
        seen.append(loss)
        return state, loss

    def fetch(values):
        calls.append((at[0], len(values)))
        return training.fetch_losses(values)

    loop = types.SimpleNamespace(
        steps=steps, log_every=log_every, checkpoint_every=checkpoint_every, keep_checkpoints=2
    )
    state = training.run_loop(
        name="fake",
        workdir=str(workdir),
        loop=loop,
        config=Config(),
        state={"w": jnp.zeros(FOLDS, jnp.float32)} if state is None else state,
        iterators=[Counting()],
        step=step,
        log=lines.append,
        fetch=options.pop("fetch", fetch),
        **options,
    )
    return state, seen, lines, calls


def _curves(workdir) -> list[dict]:
    return [json.loads(line) for line in (workdir / "curves.jsonl").read_text().splitlines()]


def _old_means(seen, ends) -> list:
    """What the loop logged when it read every loss with np.asarray: np.mean over a list
    of the host arrays since the last log."""
    means, begin = [], 0
    for end in ends:
        mean = np.mean([np.asarray(loss) for loss in seen[begin:end]], axis=0)
        means.append(float(mean) if mean.ndim == 0 else mean.tolist())
        begin = end
    return means


@pytest.mark.parametrize("scalar", [False, True])
def test_logged_means_are_the_host_means_and_fetched_only_at_log_steps(tmp_path, scalar):
    saved = []
    original = checkpoints.save

    def save(mgr, step, state, extra, loss):
        saved.append((step, loss))
        original(mgr, step, state, extra, loss)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoints, "save", save)
        _, seen, lines, calls = _run(tmp_path, 25, scalar=scalar)
    assert all(isinstance(loss, jax.Array) for loss in seen)
    assert calls == [(10, 10), (20, 10), (25, 5)]
    curves = _curves(tmp_path)
    assert [c["step"] for c in curves] == [10, 20, 25]
    expected = _old_means(seen, [10, 20, 25])
    assert [c["loss"] for c in curves] == expected  # bit for bit, through JSON
    float32 = np.asarray([np.asarray(loss) for loss in seen[:10]])
    assert np.mean(float32, axis=0).dtype == np.float32  # float32 means, as before
    assert "step 25/25" in lines[-1]
    last = [float(np.mean(np.asarray(seen[s - 1]))) for s in (10, 20, 25)]
    assert saved == list(zip([10, 20, 25], last, strict=True))


def test_checkpoints_between_logs_fetch_the_last_loss(tmp_path):
    _, seen, _, calls = _run(tmp_path, 20, log_every=10, checkpoint_every=5)
    assert calls == [(5, 1), (10, 10), (15, 1), (20, 10)]
    mgr = checkpoints.manager(str(tmp_path / "checkpoints"), 2)
    assert mgr.best_step() == min((5, 10, 15, 20), key=lambda s: np.mean(np.asarray(seen[s - 1])))


@pytest.mark.parametrize("to_host", [float, np.asarray], ids=["python float", "numpy array"])
def test_a_step_reading_its_loss_on_the_host_logs_as_before(tmp_path, to_host):
    scalar = to_host is float  # float() of a [folds] array is an error
    _, seen, _, _ = _run(tmp_path, 12, scalar=scalar, to_host=to_host)
    assert [c["loss"] for c in _curves(tmp_path)] == _old_means(seen, [10, 12])


def test_float64_fetch_keeps_the_means_of_float_losses(tmp_path):
    """A step that returned float(loss) now returns the device loss: fetching as
    float64 keeps its curves."""
    old, new = tmp_path / "old", tmp_path / "new"
    _run(old, 12, scalar=True, to_host=float)
    _run(new, 12, scalar=True, fetch=lambda v: training.fetch_losses(v, np.float64))
    assert _curves(new) == _curves(old)
    _run(tmp_path / "float32", 12, scalar=True)  # the default fetch: float32 means
    assert _curves(tmp_path / "float32") != _curves(old)


def test_a_rerun_resumes_from_the_checkpoint_with_the_same_batches(tmp_path):
    whole = tmp_path / "whole"
    expected, _, _, _ = _run(whole, 30)
    parts = tmp_path / "parts"
    _run(parts, 20)
    other_start = {"w": jnp.full(FOLDS, 5.0, jnp.float32)}  # replaced by the checkpoint's
    state, seen, lines, calls = _run(parts, 30, state=other_start)
    assert lines[0] == "fake: resumed at step 20"
    assert len(seen) == 10 and calls == [(30, 10)]
    np.testing.assert_array_equal(np.asarray(state["w"]), np.asarray(expected["w"]))
    assert _curves(parts) == _curves(whole)


def test_a_fetch_giving_other_rows_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="fetch: expected 10 rows"):
        _run(tmp_path, 10, fetch=lambda values: np.zeros((1, FOLDS)))


def _toy_fold_step(state, batch):
    return state + batch, {"loss": jnp.sum(state * batch)}


@pytest.mark.parametrize("form", folds.FORMS)
def test_every_fold_form_computes_each_fold_alone(form):
    mesh = folds.fold_mesh()
    slots = folds.fold_slots(FOLDS, mesh)
    rng = np.random.default_rng(0)
    state, batch = (rng.normal(size=(slots, 3, 4)).astype(np.float32) for _ in range(2))

    def fold(state, batch):
        new = jnp.tanh(state @ batch.T) @ batch
        return new, {"loss": jnp.sum(new**2), "rows": new[:, 0]}

    step = folds.fold_parallel(fold, mesh, form=form)
    new, stats = step(folds.to_global(state, mesh), folds.to_global(batch, mesh))
    expected = [jax.jit(fold)(state[s], batch[s]) for s in range(slots)]
    np.testing.assert_allclose(folds.gather(new), np.stack([e[0] for e in expected]), rtol=1e-6)
    for name in ("loss", "rows"):
        np.testing.assert_allclose(
            folds.gather(stats[name]), np.stack([e[1][name] for e in expected]), rtol=1e-6
        )


def test_an_unknown_fold_form_is_refused():
    with pytest.raises(ValueError, match="form: expected one of"):
        folds.fold_parallel(_toy_fold_step, folds.fold_mesh(), form="pmap")


@pytest.mark.parametrize("form", folds.FORMS)
def test_the_fold_parallel_step_donates_its_state_unless_told_not_to(form):
    mesh = folds.fold_mesh()
    slots = folds.fold_slots(FOLDS, mesh)
    state = folds.to_global(np.arange(slots * 4, dtype=np.float32).reshape(slots, 4), mesh)
    batch = folds.to_global(np.ones((slots, 4), np.float32), mesh)
    kept = folds.fold_parallel(_toy_fold_step, mesh, form=form, donate_state=False)
    again, _ = kept(state, batch)
    assert not state.is_deleted()
    step = folds.fold_parallel(_toy_fold_step, mesh, form=form)
    losses = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Some donated buffers were not usable" included
        for _ in range(3):
            new, stats = step(state, batch)
            assert state.is_deleted()
            state = new
            losses.append(stats["loss"])
    rows = folds.gather_rows(losses)
    assert rows.shape == (3, slots) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, np.stack([folds.gather(loss) for loss in losses]))
    np.testing.assert_array_equal(folds.gather(again) + 2, folds.gather(state))
