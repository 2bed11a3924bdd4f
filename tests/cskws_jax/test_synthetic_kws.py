"""The synthetic_kws builder on `smoke` size (real synthesis and forced alignment)."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from cskws_jax import keywords as keyword_list
from cskws_jax.datasets import render, synthetic_kws
from cskws_jax.datasets.features import MAX_KEYWORDS
from experiments import build_data
from speechkit.channel import ChannelConfig

KEYWORDS = keyword_list.load_keywords()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _records(data_dir, split):
    source = tfds.data_source("synthetic_kws/smoke", data_dir=str(data_dir))[split]
    return {_text(r["utterance_id"]): r for r in (source[i] for i in range(len(source)))}


def _smoke_job(split, index):
    config = synthetic_kws.SyntheticKwsBuilderConfig(size="smoke")
    return synthetic_kws.UtteranceJob(
        split,
        index,
        config.seed,
        tuple(KEYWORDS),
        config.duration_s,
        config.text_config,
        config.render_config,
    )


@pytest.mark.slow
@pytest.mark.parametrize("split", synthetic_kws.SPLITS)
def test_records_hold_keyword_intervals_inside_the_audio(smoke_build, split):
    data_dir, _ = smoke_build
    records = _records(data_dir, split)
    assert len(records) == synthetic_kws.SIZES["smoke"].utterances[split]
    config = render.KwsRenderConfig()
    engines = render.split_engines(config.engines, config.heldout_engine, split)
    for utterance_id, record in records.items():
        duration = float(record["duration"])
        frames = record["audio"].shape[0]
        assert record["audio"].shape == (frames, 64) and abs(frames - duration / 0.01) <= 1
        assert 2.0 <= duration <= 10.0, utterance_id
        engine, voice = _text(record["speaker"]).split("@")[0].split(":")
        assert engine in engines, utterance_id
        assert voice.split("+")[-1] in render.split_voices(engine, split), utterance_id
        valid = record["keyword_valid"]
        count = int(valid.sum())
        assert valid.shape == (MAX_KEYWORDS,) and valid[:count].all() and not valid[count:].any()
        start, end = record["keyword_start"][:count], record["keyword_end"][:count]
        assert np.all((start >= 0) & (start < end) & (end <= duration + 0.02)), utterance_id
        assert np.all(np.diff(start) > 0)
        words = _text(record["text"]).split()
        spoken = [KEYWORDS.index(w) for w in words if w in KEYWORDS]
        assert record["keyword_label"][:count].tolist() == spoken
        assert 0 <= count <= 3
        assert record["other_start"].size == len(words) - count
        assert np.all(record["other_end"] <= duration + 0.02)


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "heldout"])
def test_intervals_are_trusted_and_reach_the_records(smoke_build, split):
    data_dir, _ = smoke_build
    records = _records(data_dir, split)
    sources = []
    # Rendering a job again gives its record's audio exactly: same seed, same records,
    # whichever worker rendered it.
    for index in range(3):
        utterance = synthetic_kws.render_one(_smoke_job(split, index))
        for word in utterance.words:
            sources.append(word.source)
            assert word.source in ("alignment", "engine"), word  # estimates are redrawn
            if word.source == "engine":
                assert (word.start, word.end) == (word.engine_start, word.engine_end)
        record = records[f"{split}-{index:06d}"]
        keyword_words = [w for w in utterance.words if w.word in KEYWORDS]
        count = len(keyword_words)
        np.testing.assert_array_equal(
            record["keyword_start"][:count], np.float32([w.start for w in keyword_words])
        )
        np.testing.assert_array_equal(record["audio"], utterance.features)
    # Most intervals come from the aligner, the rest fall back to the engine's timings.
    assert sources.count("alignment") / len(sources) > 0.3


@pytest.mark.slow
def test_report_counts_keywords_per_split(smoke_build):
    data_dir, report = smoke_build
    entry = report["configs"]["synthetic_kws/smoke"]
    assert entry["keyword_list"] == KEYWORDS
    for split in synthetic_kws.SPLITS:
        records = _records(data_dir, split).values()
        occurrences = sum(int(r["keyword_valid"].sum()) for r in records)
        assert entry[split]["keyword_occurrences"] == occurrences
        assert sum(entry[split]["keywords"].values()) == occurrences
        assert entry[split]["utterances"] == len(records)
        engines = entry[split]["engines"]
        assert sum(e["utterances"] for e in engines.values()) == len(records)
        assert all(0.5 <= e["mean_aligned_fraction"] <= 1 for e in engines.values()), engines
        assert all(e["speaker_stage"]["shifted"] == 0 for e in engines.values())  # plain
    config = render.KwsRenderConfig()
    assert set(entry["heldout"]["engines"]) == {config.heldout_engine}
    assert config.heldout_engine not in entry["train"]["engines"]
    assert entry["hours"] > 0
    assert set(report["synthesis_speed"]) >= {"espeak", "piper"}


@pytest.mark.slow
def test_a_rebuild_of_built_corpora_keeps_their_build_times(smoke_build):
    """A rerun that finds the corpora built measures no build time: the report keeps the
    first build's times and synthesis speeds instead of writing near-zero ones."""
    data_dir, first = smoke_build
    again = build_data.build("smoke", str(data_dir), corpora=("kws",))
    entry = "synthetic_kws/smoke"
    assert first["configs"][entry]["build_seconds"] > 1
    assert again["configs"][entry]["build_seconds"] == first["configs"][entry]["build_seconds"]
    assert again["synthesis_speed"] == first["synthesis_speed"]
    assert again["configs"][entry]["hours"] == first["configs"][entry]["hours"]


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="size: expected one of"):
        synthetic_kws.SyntheticKwsBuilderConfig(size="huge")
    with pytest.raises(ValueError, match="noise_kinds"):
        render.KwsRenderConfig(channel=ChannelConfig(noise_kinds=("babble",)))
    with pytest.raises(ValueError, match="leaves no engine for training"):
        render.KwsRenderConfig(engines=("piper",), heldout_engine="piper")
    with pytest.raises(ValueError, match="heldout_engine: expected one of"):
        render.KwsRenderConfig(engines=("espeak",), heldout_engine="piper")
    with pytest.raises(ValueError, match="corpora: unknown"):
        build_data.build("smoke", "/nonexistent", corpora=("videos",))
    with pytest.raises(ValueError, match="size 'medium': corpus 'calls' has sizes"):
        build_data.build("medium", "/nonexistent", corpora=("kws", "calls"))
