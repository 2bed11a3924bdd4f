"""keyword_free: speech without keywords from the config's engines in turn, for counting
false alarms; its report bounds what the operating points depend on."""

import numpy as np
import pytest

from cskws_jax import keywords as keyword_list
from cskws_jax.datasets import keyword_free, text


@pytest.fixture(scope="module")
def smoke(keyword_free_smoke):
    return keyword_free_smoke


def test_each_split_is_spoken_by_the_engines_in_turn_without_a_keyword(smoke):
    keywords = set(keyword_list.load_keywords())
    sources = smoke.as_data_source()
    assert set(sources) == set(keyword_free.SPLITS)
    for split in keyword_free.SPLITS:
        records = sorted(sources[split], key=lambda r: r["utterance_id"])  # stored shuffled
        assert len(records) == smoke.builder_config.utterances == 4
        engines = [r["speaker"].decode().split(":", 1)[0] for r in records]
        assert engines == ["espeak", "piper", "espeak", "piper"]
        for record in records:
            words = record["text"].decode().split()
            assert keywords.isdisjoint(words) and not record["keyword_valid"].any()
            low, high = keyword_free.DURATION_S
            assert low <= record["duration"] <= high
            assert len(record["other_start"]) == len(words)  # the engine's word timings
            assert np.all(np.diff(record["other_start"]) >= 0)
            frames = record["audio"].shape[0]
            assert abs(frames - 100 * record["duration"]) <= 3  # 10 ms hop


def test_the_report_counts_hours_and_voices_per_engine(smoke):
    keywords = keyword_list.load_keywords()
    for split in keyword_free.SPLITS:
        records = list(smoke.as_data_source()[split])
        report = keyword_free.report(records, keywords)
        assert report["keyword_occurrences"] == 0
        assert set(report["engines"]) == {"espeak", "piper"}
        for engine in report["engines"].values():
            assert engine["utterances"] == 2 and engine["voices"] >= 1
            assert 2.0 <= engine["mean_seconds"] <= 30.0
        total = sum(float(r["duration"]) for r in records) / 3600
        assert report["hours"] == pytest.approx(total)
        assert 0.0 <= report["confusable_filler"] <= 1.0


def test_the_full_config_takes_turns_over_every_engine():
    full = dict((c.name, c) for c in keyword_free.CONFIGS)["full"]
    assert [full.engine_of(i) for i in range(4)] == ["espeak", "festival", "piper", "espeak"]
    # at the 5.7 s mean measured on 90 utterances, 6,600 give about 10.4 hours a split
    assert full.utterances * 5.67 / 3600 >= 10.0


def test_the_text_bars_every_keyword_and_an_utterance_draws_the_same_twice():
    keywords = list(keyword_list.load_keywords())
    for index in range(20):
        words, wanted = text.sample_utterance_text(
            np.random.default_rng([1, index]), keywords, keyword_free.KEYWORD_FREE_TEXT
        )
        assert wanted == 0 and not set(words) & set(keywords)
    job = keyword_free.SpeechJob(
        "dev", 0, keyword_free.SEED, tuple(keywords), keyword_free.render_config("espeak")
    )
    first, second = keyword_free.render_one(job), keyword_free.render_one(job)
    assert first.text == second.text and np.array_equal(first.features, second.features)
    assert (first.words, first.duration, first.speaker) == (
        second.words,
        second.duration,
        second.speaker,
    )
