"""The causal minimum-duration rule of `multiqt_jax.decode`: hand-worked cases, two NumPy
references (the frame loop and the window statement of the module docstring), the
declared latency, streaming over random block partitions, jit, config errors, and the
INSTANCE / TIMESTEP effect on fragmented predictions."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics
from multiqt_jax import decode
from multiqt_jax.decode import SmoothingConfig

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMOOTH = jax.jit(decode.smooth, static_argnames="config")
STEP = jax.jit(decode.step, static_argnames="config")
BATCH, FRAMES, CLASSES = 3, 24, 4
CONFIGS = [
    SmoothingConfig(min_frames=k, enter=enter, exit=exit)
    for k in (1, 2, 3, 5)
    for enter, exit in ((None, None), (0.6, 0.3), (0.5, 0.5))
]
STREAMING_CONFIGS = [
    SmoothingConfig(min_frames=2),
    SmoothingConfig(min_frames=3, enter=0.6, exit=0.3),
    SmoothingConfig(min_frames=5),
    SmoothingConfig(min_frames=5, enter=0.5, exit=0.5),
]


def smoothed(labels, config, mask=None):
    return np.asarray(SMOOTH(np.asarray(labels, np.int32)[None], mask, config))[0]


# ------------------------------------------------------------------------ NumPy references


def reference_loop(labels, mask, config, probabilities=None):
    """The rule frame by frame (float64 probabilities for the hysteresis)."""
    k, background = config.min_frames, config.background
    out = np.full(labels.shape, background, np.int64)
    for b in range(labels.shape[0]):
        output, candidate, count = background, background, k
        for t in range(labels.shape[1]):
            if not mask[b, t]:
                continue
            proposal = int(labels[b, t])
            if probabilities is not None:
                p = probabilities[b, t]
                if output != background and p[output] >= config.exit:
                    proposal = output
                elif not (proposal != background and p[proposal] >= config.enter):
                    proposal = background
            count = count + 1 if proposal == candidate else 1
            candidate = proposal
            if count >= k:
                output = candidate
            out[b, t] = output
    return out


def reference_window(labels, mask, k, background=0):
    """The module docstring's statement: the label of the latest valid frame whose k
    latest valid frames all carry it; background if none."""
    out = np.full(labels.shape, background, np.int64)
    for b in range(labels.shape[0]):
        valid = np.flatnonzero(mask[b])
        seq = labels[b, valid]
        for i, t in enumerate(valid):
            for s in range(i, k - 2, -1):
                if np.all(seq[s - k + 1 : s + 1] == seq[s]):
                    out[b, t] = seq[s]
                    break
    return out


def softmax64(logits):
    logits = np.asarray(logits, np.float64)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def random_stream(seed, batch=BATCH, frames=FRAMES, classes=CLASSES):
    """(labels int32 [B, T] made of runs of 1-8 frames, logits float32 [B, T, C] that
    favour them, mask bool [B, T] with ~15% padding)."""
    rng = np.random.default_rng(seed)
    labels = np.zeros((batch, frames), np.int32)
    for b in range(batch):
        t = 0
        while t < frames:
            length = int(rng.integers(1, 9))
            labels[b, t : t + length] = rng.integers(0, classes)
            t += length
    logits = rng.normal(size=(batch, frames, classes)).astype(np.float32)
    logits += 2.0 * np.eye(classes, dtype=np.float32)[labels]
    mask = rng.random((batch, frames)) > 0.15
    return labels, logits, mask


# ---------------------------------------------------------------------- hand-worked cases


def test_blip_is_removed():
    assert smoothed([0, 0, 1, 0, 0, 0], SmoothingConfig(min_frames=3)).tolist() == [0] * 6
    assert (
        smoothed([2, 2, 2, 2, 1, 2, 2], SmoothingConfig(min_frames=3)).tolist() == [0, 0] + [2] * 5
    )


def test_long_run_starts_and_ends_latency_frames_late():
    config = SmoothingConfig(min_frames=3)
    labels = [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    expected = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    assert config.latency_frames == 2
    assert smoothed(labels, config).tolist() == expected


def test_short_gap_inside_a_run_is_bridged():
    labels = [1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0]
    expected = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]
    assert smoothed(labels, SmoothingConfig(min_frames=3)).tolist() == expected


def test_switch_between_classes_waits_for_the_new_one():
    labels = [1, 1, 1, 1, 2, 3, 2, 2, 2, 2]
    expected = [0, 0, 1, 1, 1, 1, 1, 1, 2, 2]
    assert smoothed(labels, SmoothingConfig(min_frames=3)).tolist() == expected


def test_masked_frames_are_skipped_and_output_background():
    labels = np.array([[1, 1, 5, 1, 1, 0, 0, 9, 0]], np.int32)
    mask = np.array([[True, True, False, True, True, True, True, False, True]])
    out = np.asarray(SMOOTH(labels, mask, SmoothingConfig(min_frames=3)))
    # the masked 5 and 9 neither break nor extend a run; masked frames output 0
    assert out.tolist() == [[0, 0, 0, 1, 1, 1, 1, 0, 0]]
    compact = np.asarray(SMOOTH(labels[:, mask[0]], None, SmoothingConfig(min_frames=3)))
    np.testing.assert_array_equal(out[mask], compact[0])


def test_min_frames_one_is_the_identity_on_valid_frames():
    labels, _, mask = random_stream(0)
    out = np.asarray(SMOOTH(labels, mask, SmoothingConfig(min_frames=1)))
    np.testing.assert_array_equal(out, np.where(mask, labels, 0))


def test_other_background_class():
    config = SmoothingConfig(min_frames=2, background=3)
    assert smoothed([1, 1, 3, 2, 3, 3], config).tolist() == [3, 1, 1, 1, 1, 3]
    mask = np.array([[True, False, True]])
    out = SMOOTH(np.array([[1, 1, 1]], np.int32), mask, config)
    assert np.asarray(out).tolist() == [[3, 3, 1]]


def test_hysteresis_holds_the_current_class_until_it_drops_below_exit():
    probabilities = np.array(
        [[0.2, 0.7, 0.1]] * 2 + [[0.5, 0.4, 0.1]] * 3 + [[0.6, 0.25, 0.15]] * 2, np.float32
    )
    logits = np.log(probabilities)[None]
    config = SmoothingConfig(min_frames=2, enter=0.6, exit=0.3)
    assert np.asarray(SMOOTH(logits, None, config)).tolist() == [[0, 1, 1, 1, 1, 1, 0]]
    plain = SmoothingConfig(min_frames=2)  # argmax labels 1 1 0 0 0 0 0
    assert np.asarray(SMOOTH(logits, None, plain)).tolist() == [[0, 1, 1, 0, 0, 0, 0]]


def test_hysteresis_enters_only_at_the_enter_threshold():
    probabilities = np.array([[0.45, 0.05, 0.5]] * 3 + [[0.3, 0.05, 0.65]] * 2, np.float32)
    config = SmoothingConfig(min_frames=1, enter=0.6, exit=0.3)
    out = SMOOTH(np.log(probabilities)[None], None, config)
    assert np.asarray(out).tolist() == [[0, 0, 0, 2, 2]]


def test_hysteresis_thresholds_are_inclusive():
    """Uniform logits give p = 0.25 exactly: enough to enter and to hold at 0.25."""
    uniform, one = [0.0] * 4, [-10.0, 10.0, -10.0, -10.0]
    logits = np.array([[uniform, one, uniform]], np.float32)
    config = SmoothingConfig(min_frames=1, background=3, enter=0.25, exit=0.25)
    assert np.asarray(SMOOTH(logits, None, config)).tolist() == [[0, 1, 1]]


def test_logits_without_hysteresis_are_their_argmax_labels():
    labels, logits, mask = random_stream(1)
    config = SmoothingConfig(min_frames=3)
    np.testing.assert_array_equal(
        SMOOTH(logits, mask, config), SMOOTH(logits.argmax(-1).astype(np.int32), mask, config)
    )


# ----------------------------------------------------------------------------- properties


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), config=st.sampled_from(CONFIGS), use_logits=st.booleans())
def test_matches_the_numpy_loop(seed, config, use_logits):
    labels, logits, mask = random_stream(seed)
    if config.hysteresis or use_logits:
        out = SMOOTH(logits, mask, config)
        probabilities = softmax64(logits) if config.hysteresis else None
        expected = reference_loop(logits.argmax(-1), mask, config, probabilities)
    else:
        out = SMOOTH(labels, mask, config)
        expected = reference_loop(labels, mask, config)
    assert out.dtype == np.int32 and out.shape == (BATCH, FRAMES)
    np.testing.assert_array_equal(out, expected)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), k=st.sampled_from([1, 2, 3, 5]))
def test_matches_the_window_statement(seed, k):
    labels, _, mask = random_stream(seed)
    out = SMOOTH(labels, mask, SmoothingConfig(min_frames=k))
    np.testing.assert_array_equal(out, reference_window(labels, mask, k))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), k=st.sampled_from([1, 2, 3, 5]))
def test_output_runs_last_at_least_min_frames(seed, k):
    labels, _, _ = random_stream(seed, frames=60)
    out = np.asarray(SMOOTH(labels, None, SmoothingConfig(min_frames=k)))
    for row in out:
        starts = np.flatnonzero(np.diff(row) != 0) + 1
        lengths = np.diff(starts)  # runs with both ends inside the stream
        assert np.all(lengths >= k)


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.sampled_from([1, 2, 3, 5]),
    extra=st.integers(0, 4),
)
def test_declared_latency_is_a_pure_delay_on_clean_streams(seed, k, extra):
    """Every run >= k frames: output[t] = input[t - latency_frames], background before."""
    rng = np.random.default_rng(seed)
    runs = [(int(rng.integers(0, CLASSES)), k + int(rng.integers(0, extra + 1))) for _ in range(8)]
    labels = np.concatenate([np.full(length, c, np.int32) for c, length in runs])[None]
    config = SmoothingConfig(min_frames=k)
    out = np.asarray(SMOOTH(labels, None, config))
    lag = config.latency_frames
    delayed = np.concatenate([np.zeros((1, lag), np.int32), labels[:, : labels.shape[1] - lag]], 1)
    np.testing.assert_array_equal(out, delayed)


def test_declared_latency_with_hysteresis_on_confident_logits():
    labels = np.repeat(np.array([0, 2, 0, 1, 3, 0], np.int32), 6)[None]
    logits = np.log(np.where(np.eye(CLASSES)[labels] > 0, 0.9, 0.1 / (CLASSES - 1)))
    config = SmoothingConfig(min_frames=4, enter=0.7, exit=0.4)
    out = np.asarray(SMOOTH(logits.astype(np.float32), None, config))
    lag = config.latency_frames
    np.testing.assert_array_equal(out[:, lag:], labels[:, :-lag])
    assert not out[:, :lag].any()


@settings(SETTINGS, max_examples=15)
@given(
    seed=st.integers(0, 2**32 - 1),
    config=st.sampled_from(STREAMING_CONFIGS),
    sizes=st.lists(st.sampled_from([1, 2, 3, 5]), min_size=1, max_size=FRAMES),
)
def test_streaming_over_any_partition_equals_the_whole_call(seed, config, sizes):
    """Blocks of 1, 2, 3 or 5 frames in random order (few shapes: few compilations),
    the rest of the stream as one last block."""
    _, logits, mask = random_stream(seed)
    stream = logits if config.hysteresis else logits.argmax(-1).astype(np.int32)
    whole = np.asarray(SMOOTH(stream, mask, config))
    edges = [int(edge) for edge in np.cumsum([0, *sizes]) if edge < FRAMES] + [FRAMES]
    state, pieces, masks = decode.initial_state(BATCH, config), [], []
    for start, end in zip(edges[:-1], edges[1:], strict=True):
        labels, out_mask, state = STEP(stream[:, start:end], mask[:, start:end], state, config)
        pieces.append(np.asarray(labels))
        masks.append(np.asarray(out_mask))
    np.testing.assert_array_equal(np.concatenate(pieces, axis=1), whole)
    np.testing.assert_array_equal(np.concatenate(masks, axis=1), mask)


def test_step_without_mask_and_an_empty_block():
    config = SmoothingConfig(min_frames=2)
    state = decode.initial_state(1, config)
    labels, mask, state = decode.step(np.zeros((1, 0), np.int32), None, state, config)
    assert labels.shape == (1, 0) and mask.shape == (1, 0)
    labels, mask, state = decode.step(np.array([[1, 1, 1]], np.int32), None, state, config)
    assert np.asarray(labels).tolist() == [[0, 1, 1]] and bool(np.asarray(mask).all())
    assert np.asarray(state.output).tolist() == [1]


def test_eager_equals_jit():
    labels, logits, mask = random_stream(2)
    config = SmoothingConfig(min_frames=3, enter=0.5, exit=0.3)
    np.testing.assert_array_equal(decode.smooth(logits, mask, config), SMOOTH(logits, mask, config))
    traced = jax.jit(lambda x, m: decode.smooth(x, m, SmoothingConfig(min_frames=3)))
    np.testing.assert_array_equal(traced(labels, mask), SMOOTH(labels, mask, SmoothingConfig()))


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("fields", "error", "named"),
    [
        ({"min_frames": 0}, ValueError, "SmoothingConfig.min_frames"),
        ({"min_frames": 2.0}, TypeError, "SmoothingConfig.min_frames"),
        ({"background": -1}, ValueError, "SmoothingConfig.background"),
        ({"enter": 0.6}, ValueError, "SmoothingConfig.exit"),
        ({"exit": 0.3}, ValueError, "SmoothingConfig.enter"),
        ({"enter": 0.4, "exit": 0.5}, ValueError, "SmoothingConfig.exit"),
        ({"enter": 1.5, "exit": 0.5}, ValueError, "SmoothingConfig.enter"),
        ({"enter": 0.5, "exit": 0.0}, ValueError, "SmoothingConfig.exit"),
    ],
)
def test_bad_config_is_named(fields, error, named):
    with pytest.raises(error, match=named):
        SmoothingConfig(**fields)


def test_bad_inputs_are_named():
    labels, logits, mask = random_stream(3)
    with pytest.raises(ValueError, match="SmoothingConfig.enter"):
        decode.smooth(labels, mask, SmoothingConfig(enter=0.6, exit=0.3))
    with pytest.raises(ValueError, match="SmoothingConfig.background"):
        decode.smooth(logits, mask, SmoothingConfig(background=CLASSES))
    with pytest.raises(TypeError, match="labels"):
        decode.smooth(labels.astype(np.float32), mask, SmoothingConfig())
    with pytest.raises(ValueError, match="mask"):
        decode.smooth(labels, mask[:, 1:], SmoothingConfig())
    with pytest.raises(ValueError, match="state.output"):
        decode.step(
            labels, mask, decode.initial_state(BATCH + 1, SmoothingConfig()), SmoothingConfig()
        )


# ------------------------------------------------------------------- INSTANCE / TIMESTEP


def fragmented_predictions(seed, batch=8, frames=600, classes=7):
    """(pred, gold, mask): gold questions of 25-75 frames (1-3 s at 40 ms) between
    background gaps of 25-75 frames; pred = gold with 10% of question frames dropped to
    background, 5% flipped to another class, and 3% background frames flipped to a class."""
    rng = np.random.default_rng(seed)
    gold = np.zeros((batch, frames), np.int32)
    for b in range(batch):
        t = int(rng.integers(10, 40))
        while t < frames:
            length = int(rng.integers(25, 76))
            gold[b, t : t + length] = rng.integers(1, classes)
            t += length + int(rng.integers(25, 76))
    u, other = rng.random(gold.shape), rng.integers(1, classes, gold.shape).astype(np.int32)
    question = gold > 0
    pred = np.where(question & (u < 0.10), 0, gold)
    pred = np.where(question & (u >= 0.10) & (u < 0.15), other, pred)
    pred = np.where(~question & (u < 0.03), other, pred)
    return pred.astype(np.int32), gold, np.ones(gold.shape, bool)


@jax.jit
def instance_and_timestep(pred, gold, mask):
    """(INSTANCE PRF, TIMESTEP PRF) of 7-class label streams."""
    return (
        metrics.instance_prf(pred, gold, mask, num_classes=7),
        metrics.timestep_prf(pred, gold, mask, num_classes=7),
    )


def test_smoothing_raises_instance_precision_and_keeps_timestep():
    pred, gold, mask = fragmented_predictions(0)
    smooth = SMOOTH(pred, mask, SmoothingConfig(min_frames=3))
    raw_instance, raw_timestep = instance_and_timestep(pred, gold, mask)
    new_instance, new_timestep = instance_and_timestep(smooth, gold, mask)
    # measured: INSTANCE P 0.316 -> 0.979, R 1.000 -> 1.000; TIMESTEP F1 0.886 -> 0.943
    assert float(raw_instance.precision) < 0.4
    assert float(new_instance.precision) > 0.9
    assert float(new_instance.recall) >= float(raw_instance.recall) - 0.02
    assert abs(float(new_timestep.f1) - float(raw_timestep.f1)) < 0.1
