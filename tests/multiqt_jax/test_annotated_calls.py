"""annotated_calls: a user's calls from manual_dir, and a clear error for each bad file."""

import json

import numpy as np
import pytest
import tensorflow_datasets as tfds

from multiqt_jax import input_pipeline, labels
from multiqt_jax.datasets import annotated_calls as ac
from speechkit import asr, audio_io, dsp, tts


@pytest.fixture(scope="module")
def speech():
    return tts.synthesize("Where are you? Is she breathing?", tts.EspeakVoice(variant="f2"), 16_000)


def _write_call(folder, name, speech, annotation, npy=None, rate=16_000):
    audio_io.write_audio(folder / f"{name}.wav", dsp.resample(speech.waveform, 16_000, rate), rate)
    (folder / f"{name}.json").write_text(json.dumps(annotation))
    if npy is not None:
        np.save(folder / f"{name}.npy", npy)


def _segments(speech):
    where, breathing = speech.words[0], speech.words[3]
    return [
        {"label": "address", "start": where.start, "end": speech.words[2].end},
        {"label": "breathing", "start": breathing.start, "end": speech.words[-1].end},
    ]


@pytest.mark.slow
def test_builds_from_manual_dir_with_each_text_source(tmp_path, speech):
    manual = tmp_path / "manual"
    manual.mkdir()
    frames = int(speech.duration / 0.01)
    words = [{"word": w.text.lower(), "start": w.start, "end": w.end} for w in speech.words]
    posteriors = asr.char_frames(
        [asr.TimedWord(w["word"], w["start"], w["end"]) for w in words], frames // 2
    )
    _write_call(
        manual, "with_asr", speech, {"segments": _segments(speech), "fold": 3, "asr": words}
    )
    _write_call(manual, "with_npy", speech, {"segments": _segments(speech)}, npy=posteriors)
    _write_call(manual, "recognised", speech, {"segments": _segments(speech)}, rate=22_050)
    builder = ac.AnnotatedCalls(
        config="questions", data_dir=str(tmp_path / "tfds"), file_format="array_record"
    )
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
    )
    source = tfds.data_source("annotated_calls/questions", data_dir=str(tmp_path / "tfds"))["train"]
    records = {r["call_id"]: r for r in (source[i] for i in range(len(source)))}
    assert records.keys() == {b"with_asr", b"with_npy", b"recognised"}
    record = records[b"with_asr"]
    assert record["fold"] == 3 and list(record["asr_word"][:2]) == [b"where", b"are"]
    address = labels.QUESTION_CLASSES.index("address")
    breathing = labels.QUESTION_CLASSES.index("breathing")
    assert set(np.unique(record["labels"])) == {0, address, breathing}
    assert records[b"with_npy"]["text_posteriors"].shape[0] == record["audio"].shape[0] // 2
    recognised = records[b"recognised"]
    assert len(recognised["asr_word"]) > 0  # pocketsphinx ran on it, streaming: every
    lag = recognised["asr_emitted"] - recognised["asr_end"]  # word out soon after its end
    assert np.all(lag >= 0) and np.all(lag <= 2.0), lag
    example = input_pipeline.to_example(records[b"with_npy"], causal_text=True)
    np.testing.assert_allclose(example["text"], posteriors[: example["text"].shape[0]], atol=1e-6)


@pytest.mark.parametrize(
    "annotation, pattern",
    [
        ("{not json", "not valid JSON"),
        ({"segment": []}, "'segments' must be a list"),
        ({"segments": [{"label": "address", "start": 0.1}]}, r"segments\[0\] needs 'label'"),
        (
            {"segments": [{"label": "weather", "start": 0, "end": 1}]},
            "label 'weather', not a questions class",
        ),
        ({"segments": [{"label": "age", "start": 1.0, "end": 0.5}]}, "needs 0 <= start < end"),
        (
            {"segments": [{"label": "age", "start": 0.0, "end": 99.0}]},
            "ends at 99.0 s, after the audio",
        ),
        (
            {"segments": [{"label": "age", "start": "0", "end": 1}]},
            r"segments\[0\].start must be a finite number",
        ),
        (
            {
                "segments": [
                    {"label": "age", "start": 0, "end": 1},
                    {"label": "age", "start": 0.5, "end": 1.5},
                ]
            },
            "segments overlap",
        ),
        ({"segments": [], "fold": 9}, "'fold' must be an integer 0-4"),
        (
            {"segments": [], "asr": [{"word": 3, "start": 0, "end": 1}]},
            r"asr\[0\] needs a string 'word'",
        ),
    ],
)
def test_bad_annotations_name_the_file(tmp_path, speech, annotation, pattern):
    path = tmp_path / "call.json"
    path.write_text(annotation if isinstance(annotation, str) else json.dumps(annotation))
    with pytest.raises(ac.AnnotationError, match=pattern) as error:
        ac.read_annotation(str(path), "questions", speech.duration)
    assert str(path) in str(error.value)


def test_bad_files_name_themselves(tmp_path, speech):
    frames = 50
    np.save(tmp_path / "wide.npy", np.ones((frames, 1)))
    with pytest.raises(ac.AnnotationError, match=r"wide.npy: expected shape \[frames, 29\]"):
        ac.read_posteriors(str(tmp_path / "wide.npy"), frames)
    np.save(tmp_path / "short.npy", np.ones((10, asr.NUM_SYMBOLS)))
    with pytest.raises(ac.AnnotationError, match="short.npy: has 10 frames, expected 50"):
        ac.read_posteriors(str(tmp_path / "short.npy"), frames)
    audio_io.write_audio(tmp_path / "lonely.wav", speech.waveform, 16_000)
    with pytest.raises(ac.AnnotationError, match="lonely.wav: no annotation file"):
        ac.convert_call(str(tmp_path / "lonely.wav"), "questions")


def _touch(folder, *names):
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"")


@pytest.mark.parametrize(
    "names, pattern",
    [
        (["c1.wav", "c1.json", "c1.flac"], "c1.flac and c1.wav: two audio files of one call"),
        (["c1.wav", "c1.json", "orphan.JSON"], "orphan.JSON: an annotation's name ends in .json"),
        (["c1.wav", "c1.json", "orphan.json"], "orphan.json: no audio file for this annotation"),
        (["c1.wav", "c1.json", "more/c2.wav"], "more: a folder; annotated_calls reads the calls"),
        (["notes.txt"], "no audio files"),
    ],
)
def test_the_calls_folder_names_what_does_not_fit(tmp_path, names, pattern):
    _touch(tmp_path, *names)
    with pytest.raises(ac.AnnotationError, match=pattern):
        ac.call_files(str(tmp_path))


def test_the_calls_folder_lists_the_audio(tmp_path):
    _touch(tmp_path, "b.flac", "b.json", "a.WAV", "a.json")
    assert ac.call_files(str(tmp_path)) == [str(tmp_path / "a.WAV"), str(tmp_path / "b.flac")]


def test_posteriors_in_an_npz_are_refused(tmp_path):
    np.savez(tmp_path / "p.npz", np.ones((50, asr.NUM_SYMBOLS)))
    with pytest.raises(ac.AnnotationError, match=r"p.npz: an .npz archive; expected one .npy"):
        ac.read_posteriors(str(tmp_path / "p.npz"), 50)
