"""multiqt_jax.baselines on synthetic calls: pooling, segments, RF / FNN, sliding windows."""

import jax
import numpy as np
import pytest

import metrics
from multiqt_jax import baselines
from multiqt_jax import input_pipeline as pipeline

NUM_CLASSES = 4  # background + classes 1-3
CONFIG = baselines.BaselineConfig(
    window_s=1.0, hop_s=0.1, n_estimators=50, hidden=(32,), epochs=150, batch_size=16
)
LENGTHS = (600, 600, 560, 520, 600, 480)


def synthetic_example(rng: np.random.Generator, frames: int = 600) -> dict[str, np.ndarray]:
    """A call whose labelled spans (classes 1-3) raise 10 class-specific log-mel bands and
    put posterior mass on a class-specific symbol."""
    labels = np.zeros(frames, np.int32)
    t = int(rng.integers(30, 90))
    while True:
        length = int(rng.integers(80, 160))
        if t + length > frames - 20:
            break
        labels[t : t + length] = rng.integers(1, NUM_CLASSES)
        t += length + int(rng.integers(60, 140))
    audio = rng.normal(0.0, 1.0, (frames, baselines.NUM_MELS)).astype(np.float32)
    for c in range(1, NUM_CLASSES):
        audio[labels == c, 10 * c : 10 * c + 10] += 1.5
    text = rng.dirichlet(np.ones(baselines.NUM_SYMBOLS), frames // 2).astype(np.float32) * 0.3
    text[:, 0] += 0.7  # mostly blank
    text_labels = labels[0::2][: frames // 2]
    for c in range(1, NUM_CLASSES):
        text[text_labels == c] *= 0.4
        text[text_labels == c, 4 + c] += 0.6
    return {"audio": audio, "text": text, "labels": labels}


def make_examples(seed: int, lengths=LENGTHS) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [synthetic_example(rng, n) for n in lengths]


def make_batch(examples) -> dict[str, np.ndarray]:
    return pipeline.collate(examples, pipeline.PipelineConfig(batch_size=8, pad_multiple=100))


class Constant:
    """A stub classifier that labels every window `label` and counts the windows."""

    def __init__(self, label: int):
        self.label, self.seen = label, 0

    def predict(self, features):
        self.seen += len(features)
        assert features.shape[1] == baselines.FEATURE_DIM
        return np.full(len(features), self.label)


@pytest.fixture(scope="module")
def train_set():
    examples = make_examples(0) + make_examples(1)
    X, y = baselines.segment_dataset(examples, CONFIG)
    assert set(y.tolist()) == set(range(NUM_CLASSES))
    return X, y


@pytest.fixture(scope="module")
def held_out():
    examples = make_examples(7)
    X, y = baselines.segment_dataset(examples, CONFIG)
    return examples, X, y


@pytest.fixture(scope="module")
def forest(train_set):
    return baselines.fit_random_forest(*train_set, CONFIG)


@pytest.fixture(scope="module")
def fnn(train_set):
    return baselines.fit_fnn(*train_set, CONFIG, num_classes=NUM_CLASSES)


def test_the_worked_example_of_the_docs_gives_what_it_prints():
    """docs/models.md "MultiQT baselines" (tests/test_readme.py runs it; this checks
    the values its comments state)."""
    rng = np.random.default_rng(0)
    labels = np.zeros(600, np.int32)
    labels[100:250] = 1
    labels[350:500] = 2
    audio = rng.normal(size=(600, 40)).astype(np.float32) + 2.0 * labels[:, None]
    text = np.full((300, 29), 1 / 29, np.float32)
    config = baselines.BaselineConfig(window_s=1.0, n_estimators=10)
    X, y = baselines.segment_dataset([{"audio": audio, "text": text, "labels": labels}], config)
    assert X.shape == (4, 109) and sorted(y.tolist()) == [0, 0, 1, 2]
    forest = baselines.fit_random_forest(X, y, config)
    pred = baselines.sliding_labels(forest, audio[None], text[None], None, config)
    assert pred.shape == (1, 600) and pred.dtype == np.int32 and int(pred[0, :99].max()) == 0


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("window_s", 0.0, ValueError),
        ("window_s", "1", TypeError),
        ("hop_s", 0.015, ValueError),
        ("min_window_s", 3.0, ValueError),
        ("background_per_segment", -1.0, ValueError),
        ("background_per_segment", float("nan"), ValueError),
        ("n_estimators", 0, ValueError),
        ("n_estimators", 10.0, TypeError),
        ("max_depth", 0, ValueError),
        ("n_jobs", 0, ValueError),
        ("hidden", (32, 0), ValueError),
        ("hidden", 32, TypeError),
        ("hidden", (32, True), TypeError),
        ("epochs", 0, ValueError),
        ("batch_size", 0, ValueError),
        ("learning_rate", 0.0, ValueError),
        ("weight_decay", -1e-3, ValueError),
        ("seed", -1, ValueError),
    ],
)
def test_config_validation_names_the_field(field, value, error):
    with pytest.raises(error, match=f"^BaselineConfig.{field}: "):
        baselines.BaselineConfig(**{field: value})


def test_config_frames():
    config = baselines.BaselineConfig(window_s=2.0, hop_s=0.2, min_window_s=0.5, hidden=[8, 4])
    assert (config.window_frames, config.hop_frames, config.min_window_frames) == (200, 20, 50)
    assert config.hidden == (8, 4)
    assert baselines.BaselineConfig().min_window_frames == 200


def test_pooling_equals_numpy_mean_and_std():
    example = make_examples(3, lengths=(301,))[0]
    audio, text = example["audio"] + 50.0, example["text"]  # an offset stresses the sums
    spans = [(0, 301), (17, 18), (17, 19), (40, 141), (1, 2), (299, 301), (100, 100)]
    starts, ends = np.array(spans).T
    pooled = baselines.pooled_features(audio, text, starts, ends)
    assert pooled.shape == (len(spans), baselines.FEATURE_DIM) and pooled.dtype == np.float32
    for row, (s, e) in enumerate(spans):
        expected = np.zeros(baselines.FEATURE_DIM)
        if e > s:
            expected[:40] = audio[s:e].astype(np.float64).mean(axis=0)
            expected[40:80] = audio[s:e].astype(np.float64).std(axis=0)
        inside = text[(s + 1) // 2 : e // 2]  # text frames wholly inside [s, e)
        if len(inside):
            expected[80:] = inside.mean(axis=0)
        np.testing.assert_allclose(pooled[row], expected, rtol=1e-5, atol=1e-5)
        single = baselines.segment_features(audio, text, s, e)
        np.testing.assert_array_equal(single, pooled[row])


def test_pooling_leaves_out_masked_frames():
    example = make_examples(4, lengths=(240,))[0]
    audio = np.full((1, 300, 40), 99.0, np.float32)  # padding far from the data
    text = np.full((1, 150, baselines.NUM_SYMBOLS), 99.0, np.float32)
    audio[0, :240], text[0, :120] = example["audio"], example["text"]
    mask = np.arange(300)[None] < 240
    starts, ends = np.array([0, 200, 230]), np.array([300, 260, 240])
    padded = baselines.pooled_features(audio, text, starts, ends, audio_mask=mask)
    clipped = baselines.pooled_features(
        example["audio"], example["text"], np.minimum(starts, 240), np.minimum(ends, 240)
    )
    np.testing.assert_allclose(padded[0], clipped, rtol=1e-5, atol=1e-5)


def test_label_runs():
    labels = np.array([0, 1, 1, 2, 2, 0, 3, 3, 3, 3, 0, 1])
    mask = np.ones(12, bool)
    mask[8] = False  # a masked frame ends a run
    starts, ends, classes = baselines.label_runs(labels, mask)
    assert starts.tolist() == [1, 3, 6, 9, 11]
    assert ends.tolist() == [3, 5, 8, 10, 12]
    assert classes.tolist() == [1, 2, 3, 3, 1]


def test_segment_dataset_finds_exactly_the_instances():
    examples = make_examples(5)
    X, y = baselines.segment_dataset(examples, CONFIG, rng=0)
    runs = [baselines.label_runs(e["labels"]) for e in examples]
    count = sum(len(s) for s, _, _ in runs)
    assert count >= 10
    assert (y > 0).sum() == count and (y == 0).sum() == count  # background_per_segment 1
    assert y[:count].tolist() == np.concatenate([c for *_, c in runs]).tolist()
    expected = np.concatenate(
        [
            baselines.pooled_features(e["audio"], e["text"], s, t)
            for e, (s, t, _) in zip(examples, runs, strict=True)
        ]
    )
    np.testing.assert_array_equal(X[:count], expected)
    # The same calls as one padded pipeline batch give the same instance segments.
    Xb, yb = baselines.segment_dataset(make_batch(examples), CONFIG, rng=0)
    np.testing.assert_array_equal(yb, y)
    np.testing.assert_allclose(Xb[:count], X[:count], rtol=1e-5, atol=1e-5)


def test_segment_dataset_is_reproducible_and_samples_background_like_instances():
    examples = make_examples(6)
    for example in examples:  # band 0 marks instances, band 1 is time
        example["audio"][:, 0] = 100.0 * (example["labels"] > 0)
        example["audio"][:, 1] = np.arange(len(example["labels"]))
    batch = make_batch(examples)
    batch["audio"][..., 0] = np.where(batch["audio_mask"], batch["audio"][..., 0], 100.0)
    config = baselines.BaselineConfig(background_per_segment=2.5)
    X, y = baselines.segment_dataset(batch, config, rng=np.random.default_rng(11))
    again = baselines.segment_dataset(batch, config, rng=np.random.default_rng(11))
    other = baselines.segment_dataset(batch, config, rng=np.random.default_rng(12))
    np.testing.assert_array_equal(X, again[0])
    np.testing.assert_array_equal(y, again[1])
    assert not np.array_equal(X, other[0])
    instances = int((y > 0).sum())
    background = X[y == 0]
    assert len(background) == round(2.5 * instances)
    # Never inside an instance or the padding (band 0 would be 100 there).
    np.testing.assert_allclose(background[:, [0, 40]], 0.0, atol=1e-6)
    # Lengths (recovered from the std of the time ramp) are drawn from the instances'.
    lengths = np.round(np.sqrt(12 * X[:, 41].astype(np.float64) ** 2 + 1)).astype(int)
    assert set(lengths[y == 0]) <= set(lengths[y > 0])
    assert len(set(lengths[y == 0])) > 1


def test_empty_training_set_is_an_error():
    example = make_examples(8, lengths=(300,))[0]
    example["labels"][:] = 0
    with pytest.raises(ValueError, match="empty training set"):
        baselines.segment_dataset([example], CONFIG)
    with pytest.raises(ValueError, match=r"X: shape \(0, 109\).*empty training set"):
        baselines.fit_random_forest(np.zeros((0, 109), np.float32), np.zeros(0, np.int32))
    with pytest.raises(ValueError, match=r"X: shape \(0, 109\)"):
        baselines.fit_fnn(np.zeros((0, 109), np.float32), np.zeros(0, np.int32))


def test_bad_widths_and_lengths_name_the_array_and_shape():
    example = make_examples(9, lengths=(600,))[0]
    audio, text, labels = example["audio"], example["text"], example["labels"]
    with pytest.raises(ValueError, match=r"data\[0\]\['audio'\]: shape \(600, 39\)"):
        baselines.segment_dataset([{"audio": audio[:, :39], "text": text, "labels": labels}])
    with pytest.raises(ValueError, match=r"data\[0\]\['text'\]: shape \(300, 28\)"):
        baselines.segment_dataset([{"audio": audio, "text": text[:, :28], "labels": labels}])
    with pytest.raises(ValueError, match=r"data\[0\]\['text'\]: shape \(290, 29\).*300"):
        baselines.segment_dataset([{"audio": audio, "text": text[:290], "labels": labels}])
    with pytest.raises(ValueError, match=r"data\[0\]\['labels'\]: shape \(599,\)"):
        baselines.segment_dataset([{"audio": audio, "text": text, "labels": labels[:599]}])
    batch = make_batch([example])
    with pytest.raises(ValueError, match=r"text: shape \(8, 298, 29\)"):
        baselines.sliding_labels(Constant(1), batch["audio"], batch["text"][:, :298])
    with pytest.raises(ValueError, match=r"audio: shape \(8, 600, 41\)"):
        baselines.sliding_labels(Constant(1), np.zeros((8, 600, 41)), batch["text"])
    with pytest.raises(ValueError, match=r"mask: shape \(8, 500\)"):
        baselines.sliding_labels(
            Constant(1), batch["audio"], batch["text"], batch["audio_mask"][:, :500]
        )
    with pytest.raises(ValueError, match=r"features: shape \(3, 108\)"):
        baselines.ForestClassifier(None).predict(np.zeros((3, 108)))
    with pytest.raises(TypeError, match=r"^y: expected an integer dtype, got float64"):
        baselines.fit_random_forest(np.zeros((2, 109)), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"^num_classes: expected an int >= 2, got 1"):
        baselines.fit_fnn(np.zeros((2, 109)), np.array([0, 0]), num_classes=1)
    with pytest.raises(KeyError, match=r"batch: missing \['text'\]"):
        baselines.sliding_labels_batch(Constant(1), {"audio": batch["audio"], "audio_mask": 1})
    # One 20 ms frame more or less is accepted.
    for frames in (299, 301):
        padded = np.resize(text, (frames, 29))
        baselines.segment_dataset([{"audio": audio, "text": padded, "labels": labels}], CONFIG)


def _accuracy(classifier, X, y) -> float:
    return float(np.mean(classifier.predict(X) == y))


def test_random_forest_classifies_held_out_segments(forest, held_out):
    _, X, y = held_out
    chance = np.bincount(y).max() / len(y)
    assert chance < 0.6
    assert _accuracy(forest, X, y) >= chance + 0.3
    again = baselines.fit_random_forest(*baselines.segment_dataset(make_examples(0), CONFIG))
    same = baselines.fit_random_forest(*baselines.segment_dataset(make_examples(0), CONFIG))
    np.testing.assert_array_equal(again.predict(X), same.predict(X))


def test_fnn_classifies_held_out_segments(fnn, held_out, train_set):
    _, X, y = held_out
    chance = np.bincount(y).max() / len(y)
    assert _accuracy(fnn, X, y) >= chance + 0.3
    assert fnn.losses.shape == (CONFIG.epochs,) and fnn.losses[-1] < 0.5 * fnn.losses[0]
    probs = fnn.predict_proba(X)
    assert probs.shape == (len(y), NUM_CLASSES)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(fnn.mean, train_set[0].mean(axis=0), rtol=1e-5, atol=1e-5)
    short = baselines.BaselineConfig(hidden=(8,), epochs=3, batch_size=7)
    first = baselines.fit_fnn(*train_set, short)
    second = baselines.fit_fnn(*train_set, short)
    np.testing.assert_array_equal(first.predict_proba(X), second.predict_proba(X))


def test_sliding_labels_shape_mask_and_leading_background():
    examples = make_examples(10)
    batch = make_batch(examples)
    always_two = Constant(2)
    pred = baselines.sliding_labels_batch(always_two, batch, CONFIG)
    assert pred.shape == batch["labels"].shape == (8, 600) and pred.dtype == np.int32
    mask = batch["audio_mask"] & batch["example_mask"][:, None]
    first = CONFIG.window_frames - 1  # last frame of the first window
    expected = np.where(mask & (np.arange(600) >= first), 2, 0)
    np.testing.assert_array_equal(pred, expected)
    # Only windows with valid audio are classified (not the two filler rows).
    ends = baselines.window_ends(600, CONFIG)
    lengths = np.array(LENGTHS)
    assert always_two.seen == int(np.sum(ends[None] - CONFIG.window_frames < lengths[:, None]))
    # Shorter first windows start labelling earlier.
    early = baselines.BaselineConfig(window_s=1.0, hop_s=0.1, min_window_s=0.3)
    pred = baselines.sliding_labels_batch(Constant(2), batch, early)
    np.testing.assert_array_equal(pred, np.where(mask & (np.arange(600) >= 29), 2, 0))
    # One unbatched example gives its batch row.
    single = baselines.sliding_labels(
        Constant(3), examples[2]["audio"], examples[2]["text"], config=CONFIG
    )
    assert single.shape == (560,)
    np.testing.assert_array_equal(single, np.where(np.arange(560) >= first, 3, 0))


def test_sliding_labels_take_the_latest_window(forest):
    example = make_examples(11, lengths=(600,))[0]
    audio, text = example["audio"], example["text"]
    pred = baselines.sliding_labels(forest, audio, text, None, CONFIG)
    window, hop = CONFIG.window_frames, CONFIG.hop_frames
    for t in (99, 100, 118, 119, 350, 599):
        end = window + ((t + 1 - window) // hop) * hop  # latest window end <= t + 1
        features = baselines.segment_features(audio, text, end - window, end)
        assert pred[t] == forest.predict(features[None])[0]


@pytest.mark.parametrize("model", ["forest", "fnn"])
def test_sliding_labels_are_causal(model, request):
    classifier = request.getfixturevalue(model)
    batch = make_batch(make_examples(12))
    mask = batch["audio_mask"] & batch["example_mask"][:, None]
    pred = baselines.sliding_labels(classifier, batch["audio"], batch["text"], mask, CONFIG)
    rng = np.random.default_rng(0)
    changed_later = False
    for t in (99, 150, 219, 220, 333, 480):
        audio, text = batch["audio"].copy(), batch["text"].copy()
        audio[:, t + 1 :] = rng.normal(0, 1, audio[:, t + 1 :].shape)
        audio[:, t + 1 :, 30:40] += 1.5  # class 3 from here on
        text[:, (t + 1) // 2 :] = 0.0  # text frames not finished by the end of frame t
        text[:, (t + 1) // 2 :, 7] = 1.0
        future = baselines.sliding_labels(classifier, audio, text, mask, CONFIG)
        np.testing.assert_array_equal(future[:, : t + 1], pred[:, : t + 1])
        changed_later |= bool((future[:, t + 1 :] != pred[:, t + 1 :]).any())
    assert changed_later  # the perturbation does matter after t


@pytest.mark.parametrize("model", ["forest", "fnn"])
def test_sliding_labels_beat_the_majority_class(model, request):
    classifier = request.getfixturevalue(model)
    batch = make_batch(make_examples(13))
    mask = batch["audio_mask"] & batch["example_mask"][:, None]
    gold = batch["labels"]
    pred = baselines.sliding_labels_batch(classifier, batch, CONFIG)
    majority = np.zeros_like(gold)  # background is the most frequent class
    assert np.bincount(gold[mask]).argmax() == 0
    timestep = jax.jit(metrics.timestep_prf, static_argnames="num_classes")
    instance = jax.jit(metrics.instance_prf, static_argnames="num_classes")  # eager: ~7 s
    sliding = timestep(pred, gold, mask, num_classes=NUM_CLASSES)
    baseline = timestep(majority, gold, mask, num_classes=NUM_CLASSES)
    assert float(sliding.f1) > float(baseline.f1) + 0.2
    assert float(instance(pred, gold, mask, num_classes=NUM_CLASSES).f1) > 0.3
