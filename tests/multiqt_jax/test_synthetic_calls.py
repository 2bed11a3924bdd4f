"""The synthetic_calls builder and build_data on `smoke` size (real synthesis and ASR)."""

import dataclasses
import glob
import json

import numpy as np
import pytest
import tensorflow_datasets as tfds

from multiqt_jax import labels
from multiqt_jax.datasets import render, synthetic_calls
from multiqt_jax.datasets.features import RecognisedBy, recognised_words, spoken_words
from speechkit import asr


def _records(data_dir, name, split="train"):
    source = tfds.data_source(f"synthetic_calls/{name}", data_dir=str(data_dir))[split]
    return {record["call_id"]: record for record in (source[i] for i in range(len(source)))}


@pytest.mark.slow
def test_records_are_consistent(smoke_build):
    data_dir, _ = smoke_build
    questions = _records(data_dir, "questions-smoke")
    symptoms = _records(data_dir, "symptoms-smoke")
    assert len(questions) == 5 and questions.keys() == symptoms.keys()
    for call_id, record in questions.items():
        frames = record["audio"].shape[0]
        assert record["audio"].shape == (frames, 40) and record["labels"].shape == (frames,)
        assert frames == int(record["duration"] / 0.01)
        assert record["labels"].min() >= 0 and record["labels"].max() < len(labels.QUESTION_CLASSES)
        assert record["labels"].max() > 0  # every call asks at least the address
        np.testing.assert_array_equal(record["audio"], symptoms[call_id]["audio"])
        assert 0 <= record["fold"] < 5
        # The recognised words live inside the call and become 20 ms character frames
        # that line up with the 10 ms audio frames.
        assert np.all(record["asr_end"] <= record["duration"] + 0.02)
        words = recognised_words(record)
        text = asr.char_frames(words, frames // 2, causal=True)
        assert text.shape == (frames // 2, asr.NUM_SYMBOLS)
        assert record["speakers"].decode().startswith("espeak:")
        # The oracle transcript: the transcript's words, in order, at increasing times
        # inside the call.
        said = spoken_words(record)
        assert [w.word for w in said] == asr.normalise_words(record["transcript"].decode())
        starts = np.array([w.start for w in said])
        assert np.all(np.diff(starts) > 0) and said[-1].end <= record["duration"]


@pytest.mark.slow
def test_heldout_calls_are_spoken_by_the_heldout_engine_only(smoke_build):
    data_dir, report = smoke_build
    heldout = _records(data_dir, "questions-smoke", "heldout")
    train = _records(data_dir, "questions-smoke")
    assert len(heldout) == 2 and not heldout.keys() & train.keys()
    transcripts = {r["transcript"] for r in train.values()}
    for record in heldout.values():
        assert {s.split(":")[0] for s in record["speakers"].decode().split("|")} == {"piper"}
        assert record["transcript"] not in transcripts  # scripts of their own
        assert record["labels"].max() > 0
    entry = report["configs"]["synthetic_calls/questions-smoke"]
    assert set(entry["engines"]) == {"espeak"} and set(entry["heldout"]["engines"]) == {"piper"}
    assert entry["engines"]["espeak"]["speakers"] >= 5  # dispatcher and caller per call
    # plain scripts ask the address first: the clock a tracker can learn
    assert entry["first_class"]["share"]["address"] == 1.0
    assert entry["scripts"]["address_first"] == 1.0 and entry["scripts"]["calls"] == 5
    assert 0.3 <= entry["first_class"]["onset_s"]["median"] < entry["hours"] * 3600


@pytest.mark.slow
def test_report_and_determinism(smoke_build):
    data_dir, _ = smoke_build
    saved = json.loads((data_dir / "build_report-smoke.json").read_text())
    assert saved["configs"].keys() == {
        "synthetic_calls/questions-smoke",
        "synthetic_calls/symptoms-smoke",
        "synthetic_kws/smoke",
    }
    entry = saved["configs"]["synthetic_calls/questions-smoke"]
    assert entry["examples"] == 5 and entry["hours"] > 0
    assert 0 <= entry["word_error_rate"] <= 1.5
    assert sum(entry["instances_per_class"].values()) >= 5
    # The causal text stream is not empty: words come out during the call, shortly after
    # they end (before the endpointer, 95 % only arrived when the call was over).
    stream = entry["text_stream"]
    assert stream["words"] >= 50
    assert stream["lag_p90_s"] <= 1.5 and stream["within_2s"] >= 0.9
    # Reverberant rooms fill some of the pauses the endpointer waits for (0.10 here).
    assert stream["emitted_after_call_end"] <= 0.15
    assert stream["nonblank_text_frames_causal"] >= 0.5 * stream["nonblank_text_frames_offline"]
    # Rendering a call again (its job, in this process) gives its record exactly.
    (language_model,) = glob.glob(f"{data_dir}/synthetic_calls/render_cache/*/calls.arpa")
    config = render.RenderConfig()
    config = dataclasses.replace(
        config, recogniser=dataclasses.replace(config.recogniser, language_model=language_model)
    )
    job = (1, "smoke", config, synthetic_calls.SEED, "espeak", synthetic_calls.PLAIN_SCRIPTS)
    again = synthetic_calls._render_one(job)
    record = _records(data_dir, "questions-smoke")[b"call-00001"]
    np.testing.assert_array_equal(record["audio"], again.features)
    np.testing.assert_array_equal(record["labels"], again.labels["questions"])
    np.testing.assert_array_equal(
        record["asr_emitted"], np.float32([w.emitted for w in again.asr_words])
    )


@pytest.mark.slow
def test_a_recogniser_variant_hears_every_call_of_the_corpus(smoke_build):
    data_dir, _ = smoke_build
    builder = synthetic_calls.SyntheticCalls(config="questions-smoke", data_dir=str(data_dir))
    words = builder.variant_words("small_beam")
    source = tfds.data_source("synthetic_calls/questions-smoke", data_dir=str(data_dir))["train"]
    heard = RecognisedBy(source, words)
    ids = {key.decode() for key in _records(data_dir, "questions-smoke")}
    assert words.keys() == ids and len(heard) == 5
    for i in range(len(source)):
        record, original = heard[i], source[i]
        said = words[record["call_id"].decode()]
        assert list(record["asr_word"]) == [w.word for w in said]
        np.testing.assert_allclose(record["asr_emitted"], [w.emitted for w in said], atol=1e-6)
        np.testing.assert_array_equal(record["audio"], original["audio"])
        assert np.all(record["asr_end"] <= record["duration"] + 0.02)
    assert builder.variant_words("small_beam") == words  # read back from its cache
    with pytest.raises(KeyError, match="no recognised words for call 'call-00000'"):
        RecognisedBy(source, {})[0]
    with pytest.raises(ValueError, match="recogniser variant: expected one of"):
        builder.variant_words("perfect")
