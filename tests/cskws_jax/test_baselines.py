"""cskws_jax.baselines: the sliding-window keyword classifier (labels by hand, training on
synthetic log-mel, detections format and mAP against random detections, jit, errors)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import metrics
from cskws_jax import baselines

K = 3  # keywords; unknown = 3, silence = 4
HOP = 0.01
CONFIG = baselines.WindowConfig(
    window_s=0.8, hop_s=0.1, channels=(16, 32), kernel=5, hidden=32, learning_rate=3e-3
)


def _events(*rows, pad=6):
    """rows of (start, end, label) -> padded start, end, label, valid [pad]."""
    start, end = np.zeros(pad, np.float32), np.zeros(pad, np.float32)
    label, valid = np.zeros(pad, np.int32), np.zeros(pad, bool)
    for i, (s, e, c) in enumerate(rows):
        start[i], end[i], label[i], valid[i] = s, e, c, True
    return start, end, label, valid


# ----------------------------------------------------------------------------- synthetic data


def _utterance(rng, frames, max_events):
    """Noise log-mel [frames, 64] with words: keyword k raises bands 12k+4 .. 12k+11 by 3,
    an other word (unknown) raises bands 44 .. 51. Words 0.35-0.6 s, gaps 0.1-0.5 s."""
    audio = rng.normal(size=(frames, 64)).astype(np.float32)
    rows, t = [], int(rng.integers(0, 30))
    while len(rows) < max_events:
        t += int(rng.integers(10, 50))
        length = int(rng.integers(35, 61))
        if t + length > frames:
            break
        label = int(rng.integers(0, K)) if rng.random() < 0.6 else K
        band = 12 * label + 4 if label < K else 44
        audio[t : t + length, band : band + 8] += 3.0
        rows.append((t * HOP, (t + length) * HOP, label))
        t += length
    return audio, rows


def _batch(seed, batch_size, min_frames, max_frames, max_events=12):
    """A padded batch in the input_pipeline format; rows of min..max frames."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_frames, max_frames + 1, size=batch_size)
    batch = {
        "audio": np.zeros((batch_size, max_frames, 64), np.float32),
        "audio_mask": np.zeros((batch_size, max_frames), bool),
        "start": np.zeros((batch_size, max_events), np.float32),
        "end": np.zeros((batch_size, max_events), np.float32),
        "label": np.zeros((batch_size, max_events), np.int32),
        "valid": np.zeros((batch_size, max_events), bool),
        "duration": (lengths * HOP).astype(np.float32),
        "example_mask": np.ones(batch_size, bool),
    }
    for row, length in enumerate(lengths):
        audio, rows = _utterance(rng, int(length), max_events)
        batch["audio"][row, :length] = audio
        batch["audio_mask"][row, :length] = True
        for field, values in zip(("start", "end", "label"), zip(*rows, strict=True), strict=True):
            batch[field][row, : len(rows)] = values
        batch["valid"][row, : len(rows)] = True
    return batch


def _ground_truth(batch):
    return {k: batch[k] for k in ("start", "end", "label", "valid")}


# ----------------------------------------------------------------------------- window labels

SMALL = baselines.WindowConfig(
    window_s=0.4, hop_s=0.2, min_overlap=0.8, word_overlap=0.5, min_score=0.1
)
UNK, SIL = baselines.unknown_class(K), baselines.silence_class(K)


def _hand_batch():
    """Three rows of 2 s (200 frames) -> 9 windows of 0.4 s starting every 0.2 s."""
    rows = [
        _events(
            (0.04, 0.34, 0),  # w0 whole; w1 47 % of it
            (0.50, 0.78, UNK),  # other word: w2 whole, w3 64 %, w1 36 %
            (1.05, 1.37, 1),  # w5 whole, w6 53 % (partial keyword), w4 47 %
            (1.45, 1.75, 7),  # label out of range: never counts
            (1.45, 1.75, 0),  # made invalid below
        ),
        _events(
            (0.02, 0.30, 0),  # w0 holds both keywords whole: the longer one (1) wins
            (0.06, 0.38, 1),  # w1: 0 has 36 %, 1 has 56 % -> unknown
            (0.60, 1.10, 2),  # w3 exactly 80 % -> keyword; w4 60 % -> unknown; w2 40 %
            (1.25, 1.375, 2),  # w5 and w6 whole; in w6 a tie with the next (0.125 s each)
            (1.4375, 1.5625, 0),  # w6 and w7 whole
        ),
        _events((0.1, 0.1, 0), (0.2, 0.5, 1)),  # zero length; the row is all padding
    ]
    start, end, label, valid = (np.stack(x) for x in zip(*rows, strict=True))
    valid[0, 4] = False
    audio_mask = np.ones((3, 200), bool)
    audio_mask[0, 180:] = False  # row 0 has 1.8 s: its last window is masked
    audio_mask[2] = False
    return start, end, label, valid, audio_mask


def test_window_labels_by_hand():
    start, end, label, valid, audio_mask = _hand_batch()
    labels, mask = baselines.window_labels(start, end, label, valid, audio_mask, SMALL, K)
    assert labels.dtype == jnp.int32 and labels.shape == mask.shape == (3, 9)
    assert labels[0].tolist() == [0, SIL, UNK, UNK, SIL, 1, UNK, SIL, SIL]
    assert mask[0].tolist() == [True] * 8 + [False]
    assert labels[1].tolist() == [1, UNK, SIL, 2, UNK, 2, 2, 0, SIL]
    assert mask[1].all()
    assert not mask[2].any() and (labels[2] == SIL).all()
    start_s, end_s = baselines.window_times(200, SMALL)
    np.testing.assert_allclose(start_s, np.arange(9) * 0.2, atol=1e-6)
    np.testing.assert_allclose(end_s - start_s, 0.4, atol=1e-6)


def test_window_labels_jit_and_thresholds():
    args = _hand_batch()
    eager = baselines.window_labels(*args, SMALL, K)
    jitted = jax.jit(baselines.window_labels, static_argnums=(5, 6))(*args, SMALL, K)
    for a, b in zip(eager, jitted, strict=True):
        np.testing.assert_array_equal(a, b)
    # Raising min_overlap above 80 % turns row 1's w3 keyword into unknown; lowering
    # word_overlap to 0.45 makes w1 and w4 of row 0 (47 % of a keyword) unknown.
    strict = dataclasses.replace(SMALL, min_overlap=0.85)
    assert baselines.window_labels(*args, strict, K)[0][1, 3] == UNK
    loose = dataclasses.replace(SMALL, word_overlap=0.45)
    assert baselines.window_labels(*args, loose, K)[0][0].tolist()[:6] == [0, UNK, UNK, UNK, UNK, 1]


def test_windows_are_gathered_slices():
    rng = np.random.default_rng(0)
    audio = rng.normal(size=(2, 130, 64)).astype(np.float32)
    audio_mask = np.ones((2, 130), bool)
    audio_mask[1, 95:] = False
    windows, mask = baselines.extract_windows(audio, audio_mask, SMALL)
    assert windows.shape == (2, 5, 40, 64) and mask.shape == (2, 5)  # (130 - 40) // 20 + 1
    for b in range(2):
        for j in range(5):
            np.testing.assert_array_equal(windows[b, j], audio[b, 20 * j : 20 * j + 40])
            assert bool(mask[b, j]) == bool(audio_mask[b, 20 * j : 20 * j + 40].all())
    assert mask[1].tolist() == [True, True, True, False, False]
    # Audio shorter than a window: one window, padded and masked.
    windows, mask = baselines.extract_windows(audio[:, :30], audio_mask[:, :30], SMALL)
    assert windows.shape == (2, 1, 40, 64) and not mask.any()


# ----------------------------------------------------------------------------- training

TRAIN_STEPS = 80


@functools.cache
def _jitted_loss():
    return jax.jit(baselines.loss, static_argnums=(2, 3))


@pytest.fixture(scope="module")
def trained():
    """CONFIG's classifier after TRAIN_STEPS AdamW steps on 4 s synthetic crops."""
    initial = baselines.create_train_state(CONFIG, K, jax.random.key(0))
    step = jax.jit(functools.partial(baselines.train_step, config=CONFIG, num_keywords=K))
    state, losses = initial, []
    for i in range(TRAIN_STEPS):
        state, stats = step(state, _batch(1000 + i, 16, 400, 400))
        losses.append(float(stats["loss"]))
    assert int(state.step) == TRAIN_STEPS and int(stats["windows"]) == 16 * 33
    return initial, state, losses


@pytest.mark.parametrize("size, frames", [(2, 80), (2, 7), (3, 10), (1, 5)])
def test_max_pool_equals_flax_in_values_and_gradients(size, frames):
    import flax.linen as nn

    rng = np.random.default_rng(size * 100 + frames)
    # Ties on purpose: values drawn from a few levels, zeros as after a ReLU.
    x = jnp.asarray(rng.choice([0.0, 0.0, 0.5, 1.0, 2.0], size=(3, frames, 4)), jnp.float32)
    weights = jnp.asarray(rng.normal(size=(3, -(-frames // size), 4)), jnp.float32)

    def flax_pool(x):
        return nn.max_pool(x, (size,), strides=(size,), padding="SAME")

    np.testing.assert_array_equal(baselines.max_pool(x, size), flax_pool(x))
    for pool in (baselines.max_pool, lambda x, size: flax_pool(x)):
        assert np.all(np.isnan(pool(x.at[1, 0, 2].set(jnp.nan), size)[1, 0, 2]))
    grads = [
        jax.grad(lambda x, pool=pool: jnp.sum(pool(x) * weights))(x)
        for pool in (lambda x: baselines.max_pool(x, size), flax_pool)
    ]
    np.testing.assert_array_equal(*grads)


def test_training_reduces_the_loss(trained):
    initial, state, losses = trained
    held_out = _batch(7, 16, 400, 400)
    before = float(_jitted_loss()(initial.params, held_out, CONFIG, K))
    after = float(_jitted_loss()(state.params, held_out, CONFIG, K))
    assert np.isfinite(losses).all()
    assert after < 0.5 * before, (before, after)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:3])


def test_classifier_beats_chance_on_held_out_windows(trained):
    _, state, _ = trained
    held_out = _batch(8, 16, 300, 500)  # other seeds, padded rows
    probability, mask = baselines.window_probabilities(state.params, held_out, CONFIG, K)
    labels, label_mask = baselines.window_labels(
        held_out["start"],
        held_out["end"],
        held_out["label"],
        held_out["valid"],
        held_out["audio_mask"],
        CONFIG,
        K,
    )
    np.testing.assert_array_equal(mask, label_mask)
    assert probability.shape == (*mask.shape, K + 2)
    np.testing.assert_allclose(np.sum(probability, axis=-1), 1.0, atol=1e-5)
    labels, mask = np.asarray(labels), np.asarray(mask)
    predicted = np.asarray(jnp.argmax(probability, axis=-1))[mask]
    gold = labels[mask]
    majority = np.bincount(gold, minlength=K + 2).max() / gold.size
    accuracy = np.mean(predicted == gold)
    recall = [np.mean(predicted[gold == c] == c) for c in range(K + 2) if (gold == c).any()]
    assert accuracy > majority + 0.15, (accuracy, majority)
    assert np.mean(recall) > 0.6, recall  # balanced accuracy; chance is 1 / 5


def test_loss_masks_and_weights(trained):
    _, state, _ = trained
    batch = _batch(9, 4, 300, 400)
    loss = _jitted_loss()
    full = float(loss(state.params, batch, CONFIG, K))
    # A filler row (example_mask False) does not count, whatever its audio and events.
    noisy = {k: v.copy() for k, v in batch.items()}
    noisy["audio"][0] = 50.0
    noisy["example_mask"][0] = False
    rest = {k: v[1:] for k, v in batch.items()}
    np.testing.assert_allclose(
        loss(state.params, noisy, CONFIG, K), loss(state.params, rest, CONFIG, K), rtol=1e-5
    )
    # Unit weights change nothing; a one-hot weight is the mean over that class's windows.
    np.testing.assert_allclose(
        loss(state.params, batch, CONFIG, K, np.ones(K + 2)), full, rtol=1e-5
    )
    probability, mask = baselines.window_probabilities(state.params, batch, CONFIG, K)
    labels, _ = baselines.window_labels(
        batch["start"], batch["end"], batch["label"], batch["valid"], batch["audio_mask"], CONFIG, K
    )
    picked = np.take_along_axis(np.asarray(probability), np.asarray(labels)[..., None], -1)[..., 0]
    for c in (0, UNK, SIL):
        chosen = np.asarray(mask) & (np.asarray(labels) == c)
        expected = -np.mean(np.log(picked[chosen]))
        weighted = loss(state.params, batch, CONFIG, K, np.eye(K + 2)[c])
        np.testing.assert_allclose(weighted, expected, rtol=1e-4)


# ----------------------------------------------------------------------------- detections


def test_window_detections_by_hand():
    probability = np.zeros((1, 6, K + 2), np.float32)
    probability[0, :, 0] = [0.2, 0.6, 0.5, 0.05, 0.3, 0.3]
    probability[0, :, 1] = 0.05  # flat but below min_score
    probability[0, :, 2] = [0.0, 0.0, 0.4, 0.4, 0.0, 0.9]  # a tie; the 0.9 window is masked
    probability[0, :, UNK] = 0.95  # unknown and silence never become detections
    probability[0, :, SIL] = 0.95
    mask = np.array([[True] * 5 + [False]])
    found = baselines.window_detections(probability, mask, SMALL, K, max_detections=6)
    assert set(found) == {"start", "end", "score", "label", "valid"}
    assert found["valid"][0].tolist() == [True] * 4 + [False] * 2
    assert found["label"][0].tolist() == [0, 2, 2, 0, 0, 0]
    np.testing.assert_allclose(found["score"][0], [0.6, 0.4, 0.4, 0.3, 0, 0])
    np.testing.assert_allclose(found["start"][0], [0.2, 0.4, 0.6, 0.8, 0, 0], atol=1e-6)
    np.testing.assert_allclose(found["end"][0], [0.6, 0.8, 1.0, 1.2, 0, 0], atol=1e-6)
    # Wider suppression: 0.3 at w4 is within 2 windows of 0.5 at w2.
    wide = dataclasses.replace(SMALL, radius=2)
    found = baselines.window_detections(probability, mask, wide, K, max_detections=2)
    assert found["label"][0].tolist() == [0, 2] and found["valid"][0].all()
    high = dataclasses.replace(SMALL, min_score=0.5)
    found = baselines.window_detections(probability, mask, high, K, max_detections=3)
    assert found["valid"][0].tolist() == [True, False, False]


@pytest.fixture(scope="module")
def evaluation():
    """Eight whole utterances of 3-6 s padded to 6 s, and a filler row."""
    batch = _batch(11, 9, 300, 600)
    for field in ("audio", "audio_mask", "valid", "duration", "example_mask"):
        batch[field][-1] = 0
    return batch


def test_detections_format_and_map(trained, evaluation):
    _, state, _ = trained
    max_detections = 32
    detect = jax.jit(
        functools.partial(
            baselines.detections, config=CONFIG, num_keywords=K, max_detections=max_detections
        )
    )
    found = {k: np.asarray(v) for k, v in detect(state.params, evaluation).items()}
    shape = (9, max_detections)
    assert {k: (v.shape, v.dtype.name) for k, v in found.items()} == {
        "start": (shape, "float32"),
        "end": (shape, "float32"),
        "score": (shape, "float32"),
        "label": (shape, "int32"),
        "valid": (shape, "bool"),
    }
    valid = found["valid"]
    assert not valid[-1].any()  # filler row
    assert (np.sum(valid, axis=1)[:-1] > 0).all()
    for field in ("start", "end", "score", "label"):  # padded slots hold zeros
        assert (found[field][~valid] == 0).all()
    assert (np.sort(valid, axis=1)[:, ::-1] == valid).all()  # valid slots first
    assert (np.diff(np.where(valid, found["score"], -1), axis=1) <= 0).all()  # best first
    score, start, end = found["score"][valid], found["start"][valid], found["end"][valid]
    assert (score >= CONFIG.min_score).all() and (score <= 1).all()
    assert (found["label"][valid] >= 0).all() and (found["label"][valid] < K).all()
    np.testing.assert_allclose(end - start, CONFIG.window_s, atol=1e-5)
    np.testing.assert_allclose(start / CONFIG.hop_s, np.round(start / CONFIG.hop_s), atol=1e-4)
    frames = evaluation["audio_mask"].sum(axis=1)
    assert (start >= 0).all()
    assert (found["end"] <= (frames * HOP)[:, None] + 1e-5)[valid].all()

    # Same result without jit.
    eager = baselines.detections(state.params, evaluation, CONFIG, K, max_detections)
    for k, v in found.items():
        np.testing.assert_allclose(eager[k], v, atol=1e-5)

    # mAP far above that of random window detections with the same counts.
    score_fn = jax.jit(
        functools.partial(metrics.detection_scores, num_classes=K + 1, ignore_classes=(K,))
    )
    hours = float(evaluation["duration"].sum()) / 3600
    scores = score_fn(found, _ground_truth(evaluation), total_hours=hours)
    rng = np.random.default_rng(0)
    latest = np.maximum(evaluation["duration"] - CONFIG.window_s, 0)[:, None]
    random_start = (rng.random(shape) * latest).astype(np.float32)
    random = {
        "start": np.where(valid, random_start, 0).astype(np.float32),
        "end": np.where(valid, random_start + CONFIG.window_s, 0).astype(np.float32),
        "score": np.where(valid, rng.random(shape), 0).astype(np.float32),
        "label": np.where(valid, rng.integers(0, K, shape), 0).astype(np.int32),
        "valid": valid,
    }
    chance = score_fn(random, _ground_truth(evaluation), total_hours=hours)
    # A 0.8 s window around a 0.35-0.6 s word has IoU <= 0.75: mAP can reach ~0.6.
    assert float(scores["mAP"]) > 0.45, scores
    assert float(scores["mAP"]) > float(chance["mAP"]) + 0.3, (scores, chance)
    assert float(scores["AP@0.05"]) > 0.9, scores


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("window_s", 0.005, ValueError),  # less than one frame
        ("window_s", 0.805, ValueError),  # not a whole number of frames
        ("window_s", "0.8", TypeError),
        ("hop_s", 0.0, ValueError),
        ("min_overlap", 0.0, ValueError),
        ("min_overlap", 1.5, ValueError),
        ("word_overlap", 0.9, ValueError),  # above min_overlap
        ("channels", (), ValueError),
        ("channels", (16, 0), ValueError),
        ("channels", 16, TypeError),
        ("channels", (16, True), TypeError),
        ("kernel", 0, ValueError),
        ("pool", 1.5, TypeError),
        ("hidden", 0, ValueError),
        ("learning_rate", 0.0, ValueError),
        ("weight_decay", -1.0, ValueError),
        ("clip_norm", float("nan"), ValueError),
        ("radius", -1, ValueError),
        ("min_score", 1.5, ValueError),
        ("min_score", float("nan"), ValueError),
    ],
)
def test_bad_config_names_the_field(field, value, error):
    with pytest.raises(error, match=f"^WindowConfig.{field}: "):
        baselines.WindowConfig(**{field: value})


def test_bad_inputs_name_the_array():
    tiny = dataclasses.replace(SMALL, channels=(4,), hidden=4)
    params = baselines.init_params(tiny, K, jax.random.key(0))
    batch = _batch(3, 2, 100, 120, max_events=4)

    def changed(**fields):
        return {**batch, **fields}

    cases = [
        (changed(audio=batch["audio"][..., :40]), ValueError, "audio"),
        (changed(audio=batch["audio"][0]), ValueError, "audio"),
        (changed(audio_mask=batch["audio_mask"][:, :50]), ValueError, "audio_mask"),
        (changed(audio_mask=batch["audio_mask"].astype(np.float32)), TypeError, "audio_mask"),
        (changed(label=batch["label"][:, :3]), ValueError, "label"),
        (changed(valid=batch["valid"].astype(np.int32)), TypeError, "valid"),
        (changed(start=batch["start"][:1]), ValueError, "start"),
        (changed(example_mask=batch["example_mask"][:1]), ValueError, "example_mask"),
        ({k: v for k, v in batch.items() if k != "end"}, KeyError, "batch"),
    ]
    for bad, error, name in cases:
        with pytest.raises(error, match=rf"\b{name}: "):
            baselines.loss(params, bad, tiny, K)
    with pytest.raises(ValueError, match="class_weights"):
        baselines.loss(params, batch, tiny, K, np.ones(K + 1))
    with pytest.raises(ValueError, match="num_keywords"):
        baselines.loss(params, batch, tiny, 0)
    with pytest.raises(ValueError, match="max_detections"):
        baselines.detections(params, batch, tiny, K, max_detections=0)
    with pytest.raises(ValueError, match="probability"):
        baselines.window_detections(np.zeros((1, 4, K - 1)), np.ones((1, 4), bool), tiny, K)
    with pytest.raises(ValueError, match="window_mask"):
        baselines.window_detections(np.zeros((1, 4, K + 2)), np.ones((1, 5), bool), tiny, K)
