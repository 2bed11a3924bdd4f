"""The character recogniser's corpus: text disjoint from every synthetic_calls call, and
the recogniser_speech builder on `smoke` size (real synthesis, no recognition)."""

import functools
import json

import numpy as np
import pytest
import tensorflow_datasets as tfds

from ctc_jax.datasets import recogniser_speech, recogniser_text
from experiments import build_data
from multiqt_jax.datasets import dialogue, synthetic_calls
from speechkit import asr, prepared, tts

QUICK_GENERAL = 60  # quick train utterances whose general text is drawn too (~10 s)


VARIED = dialogue.ScriptConfig(varied=True)


def every_script():
    """(size, index, varied, turns) of every call script (train and heldout splits) of
    every synthetic_calls size, default and varied (`dialogue.ScriptConfig`) from the
    same generator as `synthetic_calls._script`'s."""
    for size, spec in synthetic_calls.SIZES.items():
        for index in range(spec.calls + spec.heldout_calls):
            turns, _ = synthetic_calls._script(index, size, synthetic_calls.SEED)
            yield size, index, False, turns
            rng = np.random.default_rng([synthetic_calls.SEED, 2, index])
            varied = dialogue.generate_call(rng, spec.protocol_questions, script=VARIED)
            yield size, index, True, varied


@functools.cache
def call_sentences() -> frozenset[str]:
    """The transcript of every turn of every call script, default and varied."""
    return frozenset(
        recogniser_text.transcript(turn.text) for *_, turns in every_script() for turn in turns
    )


def test_every_sentence_of_every_call_is_a_call_sentence():
    for size, index, varied, turns in every_script():
        for turn in turns:
            assert recogniser_text.is_call_sentence(turn.text), (size, index, varied, turn.text)


def test_call_sentences_are_recognised_by_template_not_by_words():
    is_call = recogniser_text.is_call_sentence
    assert is_call("I am at forty Oak lane.") and is_call("forty oak lane")
    assert is_call("My number is one two three four five six seven.")
    assert is_call("okay") and is_call("She is about seventy two.")
    assert not is_call("We live at forty Oak lane.")
    assert not is_call("My number is one two three.")  # a call's has seven digits
    assert not is_call("Is he taking breaths?")  # the "lm" half of the breathing pool
    assert is_call("Sorry?") and is_call("emergency services")  # varied scripts' phrases
    assert not is_call("Pardon?")  # the "lm" half of dialogue.NOT_UNDERSTOOD
    tables = (dialogue.QUESTIONS, dialogue.SYMPTOMS, dialogue.VARIED_PHRASES)
    for phrases in (phrases for table in tables for phrases in table.values()):
        assert not any(is_call(p) for p in dialogue._half(phrases, "lm"))
        assert all(is_call(p) for p in dialogue._half(phrases, "calls"))
    # None of the recogniser's own statements is a call sentence, so none is redrawn.
    assert not any(is_call(s) for s in recogniser_text.STATEMENTS)


def _check_disjoint(text: recogniser_text.UtteranceText, where) -> None:
    calls = call_sentences()
    assert text.sentences, where
    for sentence in text.sentences:
        assert not recogniser_text.is_call_sentence(sentence), (where, sentence)
        assert recogniser_text.transcript(sentence) not in calls, (where, sentence)


def test_dialogue_text_of_every_size_is_disjoint_from_the_calls():
    config = recogniser_speech.TEXT_CONFIG
    largest = {
        split: max(size.utterances[split] for size in recogniser_speech.SIZES.values())
        for split in recogniser_speech.SPLITS
    }
    # Sizes nest (utterance index i is the same utterance at every size), so the largest
    # size's utterances are every size's.
    sources, apostrophes = [], 0
    for split, count in largest.items():
        for index in range(count):
            rng = recogniser_speech.rng(recogniser_speech.SEED, split, "text", index)
            sources.append(recogniser_text.draw_source(rng, config))
            if sources[-1] == "dialogue":
                text = recogniser_text.draw_sentences(rng, "dialogue", config)
                _check_disjoint(text, (split, index))
                apostrophes += "'" in text.transcript
    assert 0.4 < sources.count("dialogue") / len(sources) < 0.6
    assert apostrophes > 100  # the one symbol general text never holds


def test_general_text_is_disjoint_from_the_calls():
    smoke = recogniser_speech.SIZES["smoke"].utterances
    indices = [(split, i) for split, count in smoke.items() for i in range(count)]
    indices += [("train", i) for i in range(QUICK_GENERAL)]
    general = 0
    for split, index in dict.fromkeys(indices):
        rng = recogniser_speech.rng(recogniser_speech.SEED, split, "text", index)
        if recogniser_text.draw_source(rng, recogniser_speech.TEXT_CONFIG) == "general":
            text = recogniser_text.draw_sentences(rng, "general", recogniser_speech.TEXT_CONFIG)
            _check_disjoint(text, (split, index))
            general += 1
    assert general > QUICK_GENERAL // 4


def test_utterance_text_is_seeded_and_spelled_as_the_recogniser_spells():
    first = recogniser_speech.utterance_text("validation", 3)
    assert first == recogniser_speech.utterance_text("validation", 3)
    assert first != recogniser_speech.utterance_text("train", 3)
    config = recogniser_text.RecogniserTextConfig()
    for index in range(40):
        text = recogniser_text.draw_utterance(np.random.default_rng([5, index]), config)
        assert config.sentences[0] <= len(text.sentences) <= config.sentences[1]
        assert text.source in recogniser_text.SOURCES
        assert set(text.transcript) <= set(recogniser_speech.SYMBOLS)
        assert text.transcript.split() == asr.normalise_words(text.spoken)


def test_text_config_errors_name_the_field():
    with pytest.raises(ValueError, match="RecogniserTextConfig.sentences"):
        recogniser_text.RecogniserTextConfig(sentences=(3, 1))
    with pytest.raises(ValueError, match="RecogniserTextConfig.dialogue_share"):
        recogniser_text.RecogniserTextConfig(dialogue_share=1.5)
    with pytest.raises(ValueError, match="source: expected one of"):
        recogniser_text.draw_sentence(np.random.default_rng(0), "calls", config=None)


def test_configs_default_to_array_record_and_hold_the_heldout_engine_out(tmp_path):
    builder = tfds.builder("recogniser_speech/smoke", data_dir=str(tmp_path))
    assert builder.info.file_format == tfds.core.FileFormat.ARRAY_RECORD
    assert builder.builder_config.render_config.training_engines == ("espeak",)
    festival = tfds.builder("recogniser_speech/quick-festival", data_dir=str(tmp_path))
    assert festival.builder_config.render_config.training_engines == ("espeak", "festival")
    jobs = recogniser_speech.jobs("smoke", "train", festival.builder_config.render_config)
    assert {job.engine for job in jobs} == {"espeak", "festival"}
    assert "recogniser" not in build_data.DEFAULT_CORPORA  # `make demo` does not build it


@pytest.mark.parametrize(
    "module", ["ctc_jax.datasets.recogniser_speech", "multiqt_jax.datasets.recogniser_speech"]
)
def test_a_corpus_prepared_before_the_builder_moved_to_ctc_jax_still_opens(tmp_path, module):
    """The builder lived in multiqt_jax.datasets: the corpora it prepared there name that
    module (dataset_info.json's moduleName) and are opened as its own; no other is."""
    version = tmp_path / "recogniser_speech" / "smoke" / "1.0.0"
    version.mkdir(parents=True)
    features = "tensorflow_datasets.core.features.features_dict.FeaturesDict"
    (version / "features.json").write_text(
        json.dumps({"pythonClassName": features, "featuresDict": {"features": {}}})
    )
    info = version / "dataset_info.json"
    info.write_text(json.dumps({"name": "recogniser_speech", "moduleName": module}))
    prepared.check("recogniser_speech/smoke", str(tmp_path))
    info.write_text(
        json.dumps({"name": "recogniser_speech", "moduleName": "multiqt_jax.datasets.dialogue"})
    )
    with pytest.raises(
        prepared.PreparedCorpusError,
        match="expected 'ctc_jax.datasets.recogniser_speech' or "
        "'multiqt_jax.datasets.recogniser_speech'",
    ):
        prepared.check("recogniser_speech/smoke", str(tmp_path))


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """(data_dir, report, {split: records in utterance order}) of one smoke build through
    build_data (TFDS stores records in the order of their keys' hashes)."""
    data_dir = tmp_path_factory.mktemp("recogniser-tfds")
    report = build_data.build("smoke", str(data_dir), corpora=("recogniser",))
    sources = tfds.data_source("recogniser_speech/smoke", data_dir=str(data_dir))
    records = {
        split: sorted((source[i] for i in range(len(source))), key=lambda r: r["utterance_id"])
        for split, source in sources.items()
    }
    return data_dir, report, records


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@pytest.mark.slow
def test_smoke_records_have_their_fields_and_never_the_heldout_engine(smoke):
    _, _, records = smoke
    sizes = recogniser_speech.SIZES["smoke"].utterances
    assert {split: len(found) for split, found in records.items()} == sizes
    heldout = tts.ENGINE_SETS["pip"][1]
    for split, found in records.items():
        for index, record in enumerate(found):
            audio = record["audio"]
            assert audio.dtype == np.float32 and audio.ndim == 2 and audio.shape[1] == 40
            assert np.all(np.isfinite(audio))
            assert audio.shape[0] == int(float(record["duration"]) / 0.01)
            assert _text(record["utterance_id"]) == f"{split}-{index:06d}"
            speaker = _text(record["speaker"])
            assert speaker.startswith("espeak:") and not speaker.startswith(f"{heldout}:")
            assert _text(record["source"]) in recogniser_text.SOURCES
            text = _text(record["text"])
            # The builder's text is what utterance_text draws, as the recogniser spells it.
            expected = recogniser_speech.utterance_text(split, index)
            assert text == expected.transcript and int(record["sentences"]) == len(
                expected.sentences
            )
            assert set(text) <= set(asr.ALPHABET + " ") and "  " not in text
            assert _text(record["noise"]) in ("pink", "white", "babble")
            assert 15.0 <= float(record["snr_db"]) <= 30.0


@pytest.mark.slow
def test_smoke_records_are_rendered_again_bit_for_bit(smoke):
    _, _, records = smoke
    config = recogniser_speech.RecogniserSpeechConfig(size="smoke")
    jobs = recogniser_speech.jobs("smoke", "validation", config.render_config)
    for job in jobs[:3]:
        again = recogniser_speech.render_one(job)
        record = records["validation"][job.index]
        np.testing.assert_array_equal(again.features, record["audio"])
        assert again.text == _text(record["text"]) and again.speaker == _text(record["speaker"])


@pytest.mark.slow
def test_smoke_report_is_within_bounds(smoke):
    _, report, records = smoke
    entry = report["configs"]["recogniser_speech/smoke"]
    assert set(entry) >= {"build_seconds", "hours", "train", "validation"}
    for split, found in records.items():
        part = entry[split]
        assert part == recogniser_speech.corpus_report(found)
        seconds = sum(float(r["duration"]) for r in found)
        assert part["utterances"] == len(found)
        assert part["hours"] == pytest.approx(seconds / 3600)
        assert 1.0 <= part["mean_duration_s"] <= 12.0
        assert set(part["engines"]) == {"espeak"}
        assert 1 < part["engines"]["espeak"]["speakers"] <= part["utterances"]
        assert part["other_symbols"] == []
        assert sum(part["symbol_share"].values()) == pytest.approx(1.0)
        assert 0.1 < part["symbol_share"][" "] < 0.3 and part["symbol_share"]["e"] > 0.05
        assert sum(part["sentence_share"].values()) == pytest.approx(1.0)
        assert part["words"] >= part["utterances"] and part["characters"] > part["words"]
        for record in found:
            duration, text = float(record["duration"]), _text(record["text"])
            assert 0.8 <= duration <= 20.0
            assert 5.0 <= len(text) / duration <= 25.0
    assert entry["train"]["sentence_share"]["dialogue"] > 0
    assert entry["train"]["sentence_share"]["general"] > 0
