"""The CTC recogniser's Grain side (`ctc_jax.input_pipeline`, and
`ctc_jax.recognise`, which batches through `speechkit.batching`): the input
pipeline, that training learns to spell, and the recogniser's cached words and
posteriors. Apart from tests/ctc_jax/test_model.py, which the device check
(`benchmarks.gpu_check`) runs on a machine without Grain."""

import dataclasses
import functools
import json

import jax
import numpy as np
import pytest

from ctc_jax import decode, input_pipeline, model, recognise, symbols, train
from speechkit import asr
from speechkit.optim import OptimizerConfig

SMALL = model.CtcConfig(channels=16, stem_kernel=3, kernels=(3, 3, 2), dilations=(1, 2, 4))


def _setup(config=SMALL, frames=91, batch=2, seed=0):
    audio = np.random.default_rng(seed).normal(size=(batch, frames, 40)).astype(np.float32)
    net = model.CtcRecogniser(config)
    return net, net.init(jax.random.key(seed), {"audio": audio}), audio


def _recordings(seed: int, first: int, step: int) -> dict[str, np.ndarray]:
    """Three random recordings {"call-<i>": float32 [first + step * i, 40]}."""
    rng = np.random.default_rng(seed)
    return {
        f"call-{i}": rng.normal(size=(first + step * i, 40)).astype(np.float32) for i in range(3)
    }


def _records(count=6, seed=0):
    rng = np.random.default_rng(seed)
    texts = ["yes", "call me back", "oh my god", "he is breathing"]
    return [
        {
            "audio": rng.normal(size=(int(rng.integers(120, 420)), 40)).astype(np.float32),
            "text": texts[i % len(texts)].encode(),
        }
        for i in range(count)
    ]


def test_batches_pad_frames_and_labels_by_bucket_with_masks():
    records = _records()
    config = input_pipeline.PipelineConfig(batch_size=4, num_epochs=2)
    steps = list(input_pipeline.batches(records, config, seed=0))
    assert len(steps) == 4
    for batch in steps:
        frames = batch["audio"].shape[1]
        assert frames % 200 == 0 and batch["labels"].shape[1] == frames // 4
        real = batch["example_mask"]
        texts = [
            symbols.decode_ids(row[m])
            for row, m in zip(batch["labels"], batch["label_mask"], strict=True)
        ]
        assert all(
            text in {"yes", "call me back", "oh my god", "he is breathing"}
            for text, r in zip(texts, real, strict=True)
            if r
        )
        assert batch["audio_mask"].sum(1)[real].min() >= 120
    again = list(input_pipeline.batches(records, config, seed=0))
    assert all(np.array_equal(x["audio"], y["audio"]) for x, y in zip(steps, again, strict=True))


def test_the_pipeline_refuses_unnormalised_text_and_too_many_characters():
    records = _records(2)
    records[1]["text"] = b"Call me back."
    with pytest.raises(ValueError, match=r"record 1: text 'Call me back.' is not normalised"):
        list(input_pipeline.batches(records, input_pipeline.PipelineConfig(batch_size=2)))
    records[1]["text"] = b"a" * 60
    records[1]["audio"] = records[1]["audio"][:40]
    records[0]["audio"] = records[0]["audio"][:40]
    with pytest.raises(ValueError, match=r"example \d has 60 characters in 0.40 s, more than 50"):
        list(input_pipeline.batches(records, input_pipeline.PipelineConfig(batch_size=2)))


def test_training_learns_to_spell_a_toy_language():
    """Each character is a fixed random 40-band pattern held for 3 frames with blank-ish
    noise between words: a few hundred steps spell held-out sentences nearly exactly."""
    rng = np.random.default_rng(0)
    patterns = rng.normal(size=(symbols.NUM_SYMBOLS, 40)).astype(np.float32) * 2

    def record(text):
        frames = [patterns[s] for s in symbols.encode(text) for _ in range(4)]
        audio = np.stack([np.zeros(40, np.float32)] * 4 + frames + [np.zeros(40, np.float32)] * 4)
        return {
            "audio": audio + rng.normal(size=audio.shape).astype(np.float32) * 0.3,
            "text": text,
        }

    words = ["yes", "no", "help", "me", "call", "back"]
    sentences = [" ".join(rng.choice(words, size=int(rng.integers(1, 4)))) for _ in range(40)]
    records = [record(s) for s in sentences]
    config = dataclasses.replace(SMALL, channels=32, dropout=0.0)
    net = model.CtcRecogniser(config)
    pipeline = input_pipeline.PipelineConfig(batch_size=8, num_epochs=60, pad_multiple=100)
    steps = iter(input_pipeline.batches(records[:32], pipeline, seed=0))
    first = next(steps)
    state = train.create_train_state(
        net,
        OptimizerConfig(learning_rate=3e-3, warmup_steps=10, total_steps=240),
        jax.random.key(0),
        first,
    )
    step = jax.jit(functools.partial(train.train_step, net))
    losses = []
    for i, batch in enumerate(steps):
        state, loss = step(state, batch, jax.random.key(i))
        losses.append(float(loss))
    assert losses[-1] < 0.1 * losses[0]
    test = input_pipeline.collate(
        [input_pipeline.to_example(r) for r in records[32:]],
        dataclasses.replace(pipeline, batch_size=8),
    )
    emit, symbol, mask = jax.jit(functools.partial(train.predict, net))(state.params, test)
    hypotheses = [
        decode.transcribe(e, s, hop_s=0.02).text for e, s in zip(emit, symbol, strict=True)
    ]
    assert decode.error_rates(sentences[32:], hypotheses)["cer"] < 0.1


def test_cached_words_are_data_keyed_by_the_recogniser(tmp_path, monkeypatch):
    import pickle

    net, params, _ = _setup()
    features = _recordings(5, 60, 40)
    recogniser = recognise.Recogniser(net, params, digest="a")
    path = str(tmp_path / "train.npz")
    words = recognise.cached_words(recogniser, features, path, batch_size=2)
    whole = recogniser.transcribe([features[k] for k in features], batch_size=1)
    assert [words[k] for k in features] == [t.words for t in whole]
    calls = []
    monkeypatch.setattr(
        recognise.Recogniser, "recognise", lambda *a, **k: calls.append(1) or ([], [])
    )
    assert recognise.cached_words(recogniser, features, path) == words and not calls
    with pytest.raises(ValueError):  # another recogniser's cache is not read: recomputed
        recognise.cached_words(recognise.Recogniser(net, params, digest="b"), features, path)
    assert calls == [1]
    (tmp_path / "train.npz").write_bytes(pickle.dumps({"not": "data"}))
    assert recognise._read(path, "a") is None


def test_one_pass_gives_words_and_posteriors_and_fills_both_caches(tmp_path, monkeypatch):
    """`recognise` is `transcribe` and `posteriors` bit for bit; `cached_outputs` runs it
    once for both caches and then reads them; the calls' digest names their keys and
    values."""
    net, params, _ = _setup()
    features = _recordings(7, 57, 45)
    recogniser = recognise.Recogniser(net, params, digest="a")
    recordings = list(features.values())
    transcripts, posteriors = recogniser.recognise(recordings, batch_size=2, pad_multiple=100)
    assert transcripts == recogniser.transcribe(recordings, batch_size=2, pad_multiple=100)
    alone = recogniser.posteriors(recordings, batch_size=2, pad_multiple=100)
    assert all(np.array_equal(a, b) for a, b in zip(posteriors, alone, strict=True))

    words_path, posteriors_path = str(tmp_path / "w.npz"), str(tmp_path / "p.npz")
    passes = []
    one_pass = recognise.Recogniser.recognise
    monkeypatch.setattr(
        recognise.Recogniser, "recognise", lambda *a, **k: passes.append(1) or one_pass(*a, **k)
    )
    words, cached = recognise.cached_outputs(recogniser, features, words_path, posteriors_path)
    assert passes == [1] and [words[k] for k in features] == [t.words for t in transcripts]
    for key, value in zip(features, posteriors, strict=True):
        np.testing.assert_array_equal(cached[key], value.astype(np.float16).astype(np.float32))
    monkeypatch.setattr(recognise.Recogniser, "recognise", lambda *a, **k: 1 / 0)
    again = recognise.cached_outputs(recogniser, features, words_path, posteriors_path)
    assert passes == [1] and again[0] == words
    assert all(np.array_equal(again[1][k], cached[k]) for k in features)
    assert recognise.cached_outputs(recogniser, features) == (None, None)

    digest = recognise.features_digest(features)
    assert digest == recognise.features_digest(dict(features))
    renamed = {f"other-{k}": v for k, v in features.items()}
    changed = {**features, "call-0": features["call-0"] + 1e-3}
    assert digest not in {recognise.features_digest(renamed), recognise.features_digest(changed)}


def test_posteriors_are_each_calls_own_and_cached_as_data(tmp_path, monkeypatch):
    """Batched and padded, each recording gets the posteriors of its own whole-call
    logits, frames // 2 rows; the cache returns them (float16-rounded) without the model."""
    net, params, _ = _setup()
    features = _recordings(6, 61, 40)
    recogniser = recognise.Recogniser(net, params, digest="a")
    found = recogniser.posteriors(list(features.values()), batch_size=2, pad_multiple=100)
    for (key, audio), posteriors in zip(features.items(), found, strict=True):
        logits = net.apply(params, {"audio": audio[None]})[0]["logits"][0]
        assert posteriors.shape == (len(audio) // 2, asr.NUM_SYMBOLS), key
        expected = decode.text_posteriors(logits)[: len(audio) // 2]
        np.testing.assert_allclose(posteriors, expected, atol=1e-6)
    path = str(tmp_path / "train.npz")
    cached = recognise.cached_posteriors(recogniser, features, path, batch_size=2)
    for key, posteriors in zip(features, found, strict=True):
        np.testing.assert_array_equal(cached[key], posteriors.astype(np.float16).astype(np.float32))
    monkeypatch.setattr(recognise.Recogniser, "recognise", lambda *a, **k: 1 / 0)
    again = recognise.cached_posteriors(recogniser, features, path)
    assert all(np.array_equal(again[k], cached[k]) for k in features)
    assert recognise._read_posteriors(path, "b") is None  # another recogniser's: not read
    (tmp_path / "train.npz").write_bytes(b"not an npz")
    assert recognise._read_posteriors(path, "a") is None
    # crafted arrays of the right names but the wrong kinds are not read (no crash)
    description = np.frombuffer(
        json.dumps({"format": 1, "digest": "a", "keys": ["k"]}).encode(), np.uint8
    )
    for offsets, posteriors in (
        (np.array([0.0, 1.0]), np.zeros((1, asr.NUM_SYMBOLS), np.float16)),
        (np.array([0, 2]), np.zeros((1, asr.NUM_SYMBOLS), np.float16)),
        (np.array([0, 1]), np.zeros((1, 3), np.float16)),
    ):
        np.savez(path, description=description, offsets=offsets, posteriors=posteriors)
        assert recognise._read_posteriors(path, "a") is None
    words = {"format": 1, "digest": "a", "keys": ["k"], "words": ["hello"]}
    description = np.frombuffer(json.dumps(words).encode(), np.uint8)
    np.savez(path, description=description, counts=np.array([1.0]), times=np.zeros((1, 3)))
    assert recognise._read(path, "a") is None
