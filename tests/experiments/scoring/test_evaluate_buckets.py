"""Length buckets of the evaluation batches (issue 60):
`experiments.scoring.bundles.evaluate` pads its batches to a few lengths
(`speechkit.batching.bucket_length`), masked, so that a folder compiles a few programs;
the scores are those of batches padded to their own lengths."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from cskws_jax import bundle as kws_bundle
from cskws_jax import model as kws_model
from experiments.scoring import bundles, calls, corpora
from experiments.scoring import keywords as kws_scoring
from multiqt_jax import bundle as calls_bundle
from multiqt_jax import input_pipeline, labels
from multiqt_jax import model as calls_model
from speechkit import audio_io, batching, compilation

RATE = 16_000
KEYWORDS = ("people", "hundred", "about")
# Two utterances per batch: sorted by length, the batches end at 0.9, 2.2, 3.6, 5.3
# and 7.1 s (exact: 100, 300, 400, 600, 800 frames; buckets: 100, 400, 800).
DURATIONS = (0.5, 0.9, 1.4, 2.2, 2.9, 3.6, 4.4, 5.3, 6.2, 7.1)
EXACT_FRAMES, BUCKET_FRAMES = {100, 300, 400, 600, 800}, {100, 400, 800}


def _tone(seconds: float, seed: int) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    noise = 0.02 * np.random.default_rng(seed).normal(size=t.size)
    return (0.3 * np.sin(2 * np.pi * (250 + 60 * seed) * t) + noise).astype(np.float32)


@pytest.fixture(scope="module")
def kws_case(tmp_path_factory, tiny_afkws_config):
    """(bundle, manual folder, data_dir): an untrained AF-KWS bundle of KEYWORDS and a
    folder_kws folder of DURATIONS, a keyword in every other file."""
    root = tmp_path_factory.mktemp("buckets")
    folder = root / "keywords"
    folder.mkdir()
    annotations = {}
    for seed, seconds in enumerate(DURATIONS):
        name = f"u{seed}.wav"
        audio_io.write_audio(folder / name, _tone(seconds, seed), RATE)
        keyword = KEYWORDS[seed % len(KEYWORDS)]
        annotations[name] = [{"keyword": keyword, "start": 0.1, "end": 0.4}] if seed % 2 else []
    (folder / "keywords.json").write_text(json.dumps(annotations))
    net = kws_model.AfKws(tiny_afkws_config(len(KEYWORDS)))
    params = jax.jit(net.init)(jax.random.key(3), {"audio": np.zeros((1, 16, 64), np.float32)})
    bundle = root / "bundle"
    kws_bundle.save(bundle, net, params, KEYWORDS, corpus="synthetic_kws/smoke")
    return bundle, folder, root / "tfds"


def _settings(bundle, dataset, data_dir, manual_dir="") -> bundles.Settings:
    return bundles.Settings(
        bundle=str(bundle),
        dataset=dataset,
        data_dir=str(data_dir),
        manual_dir=str(manual_dir),
        batch_size=2,
    )


def _without_timings(results: dict) -> dict:
    results = {key: value for key, value in results.items() if key != "seconds"}
    results["scores"] = {k: v for k, v in results["scores"].items() if k != "RTF"}
    return results


def test_bucket_lengths_are_few_and_at_most_twice_the_length():
    assert [batching.bucket_length(n, 100) for n in (1, 100, 101, 300, 400, 401)] == [
        100,
        100,
        200,
        400,
        400,
        800,
    ]
    lengths = {batching.bucket_length(n, 100) for n in range(100, 10_001, 100)}
    assert len(lengths) == 8  # 100 x 2^k for k = 0..7, for 100 lengths
    assert all(n <= batching.bucket_length(n, 100) < 2 * n for n in range(101, 10_001, 100))
    with pytest.raises(ValueError, match="expected one of"):
        batching.check_lengths("padded")


def test_pad_steps_pads_with_masked_zeros_and_keeps_other_fields():
    batch = {
        "audio": np.ones((2, 3, 4), np.float32),
        "audio_mask": np.array([[True, True, False], [True, True, True]]),
        "duration": np.array([0.02, 0.03], np.float32),
    }
    padded = batching.pad_steps(batch, {"audio": 5, "audio_mask": 5})
    assert padded["audio"].shape == (2, 5, 4) and not padded["audio"][:, 3:].any()
    np.testing.assert_array_equal(padded["audio_mask"][:, :3], batch["audio_mask"])
    assert not padded["audio_mask"][:, 3:].any()
    assert padded["duration"] is batch["duration"]
    with pytest.raises(ValueError, match="'audio' has 3 steps, more than 2"):
        batching.pad_steps(batch, {"audio": 2})


def test_keyword_batches_take_few_shapes_and_score_as_exact_ones(kws_case, tmp_path):
    bundle, folder, data_dir = kws_case
    dataset = "folder_kws/shipped"
    bundles.evaluate(_settings(bundle, dataset, data_dir, folder), str(tmp_path / "built"))
    source = corpora.split_source(corpora.corpus_builder(dataset, str(data_dir)), "test")

    def shapes(lengths):
        found = kws_scoring.evaluation_batches(
            source, num_keywords=20, batch_size=2, lengths=lengths
        )
        return [batch["audio"].shape[1] for batch in found]

    assert set(shapes("exact")) == EXACT_FRAMES and set(shapes("buckets")) == BUCKET_FRAMES
    results, compiled = {}, {}
    for lengths in batching.LENGTHS:
        with compilation.Counter() as counted:
            results[lengths] = bundles.evaluate(
                _settings(bundle, dataset, data_dir), str(tmp_path / lengths), lengths
            )
        compiled[lengths] = counted.programs_by_name["jit(detect)"]
    assert compiled == {"exact": len(EXACT_FRAMES), "buckets": len(BUCKET_FRAMES)}
    assert _without_timings(results["buckets"]) == _without_timings(results["exact"])
    exact, padded = (np.load(tmp_path / name / "detections.npz") for name in batching.LENGTHS)
    assert exact["detection_valid"].any()  # something was detected and scored
    for key in exact.files:
        np.testing.assert_array_equal(padded[key], exact[key], err_msg=key)


def test_call_batches_are_padded_in_both_clocks():
    batch = {
        "audio": np.ones((2, 1500, 40), np.float32),
        "audio_mask": np.ones((2, 1500), bool),
        "labels": np.full((2, 1500), 3, np.int32),
        "text": np.ones((2, 750, 29), np.float32),
        "text_mask": np.ones((2, 750), bool),
        "example_mask": np.array([True, False]),
    }
    padded = calls.bucketed(batch, multiple=500)
    assert padded["audio"].shape == (2, 2000, 40) and padded["text"].shape == (2, 1000, 29)
    assert padded["labels"].shape == padded["audio_mask"].shape == (2, 2000)
    assert padded["text_mask"].shape == (2, 1000)
    assert not padded["audio_mask"][:, 1500:].any() and not padded["text_mask"][:, 750:].any()
    assert not padded["labels"][:, 1500:].any()
    np.testing.assert_array_equal(padded["example_mask"], batch["example_mask"])
    with pytest.raises(ValueError, match="expected one of"):
        calls.CallBatching(batch_size=2, lengths="padded")


def test_calls_take_few_shapes_and_score_as_exact_ones(tmp_path, tiny_multiqt_config):
    """Calls of 2 to 18 s, one per batch: exact lengths of 500, 1000, 1500 and 2000
    frames, buckets of 500, 1000 and 2000; the same MultiQT scores either way."""
    folder = tmp_path / "calls"
    folder.mkdir()
    for seed, seconds in enumerate((2.0, 9.0, 12.0, 18.0)):
        audio_io.write_audio(folder / f"call{seed}.wav", _tone(seconds, seed), RATE)
        annotation = {
            "segments": [{"label": "address", "start": 0.4, "end": 1.6}],
            "fold": seed % 5,
            "asr": [{"word": "where", "start": 0.4, "end": 0.8}],
        }
        (folder / f"call{seed}.json").write_text(json.dumps(annotation))
    net = calls_model.MultiQT(tiny_multiqt_config())
    inputs = {"audio": np.zeros((1, 40, 40), np.float32), "text": np.zeros((1, 20, 29))}
    params = jax.jit(net.init)(jax.random.key(5), inputs)
    bundle = tmp_path / "bundle"
    calls_bundle.save(bundle, net, params, labels.classes("questions"), corpus="elsewhere")
    dataset, data_dir = "annotated_calls/questions", tmp_path / "tfds"
    results = {}
    for lengths in batching.LENGTHS:
        settings = _settings(bundle, dataset, data_dir, folder if lengths == "exact" else "")
        settings = dataclasses.replace(settings, batch_size=1)
        results[lengths] = bundles.evaluate(settings, str(tmp_path / lengths), lengths)
    without_timings = [{k: v for k, v in r.items() if k != "seconds"} for r in results.values()]
    assert without_timings[0] == without_timings[1]
    source = corpora.split_source(corpora.corpus_builder(dataset, str(data_dir)), "train")
    index = input_pipeline.CorpusIndex.read(source)

    def shapes(lengths):
        batching_config = calls.CallBatching(batch_size=1, lengths=lengths)
        found = calls.eval_batches(source, np.arange(len(source)), index, batching_config)
        return {batch["audio"].shape[1] for batch in found}

    assert shapes("exact") == {500, 1000, 1500, 2000}
    assert shapes("buckets") == {500, 1000, 2000}
