"""folder_kws: a user's recordings with keyword intervals, from manual_dir, and an error
naming the file and the entry for every broken rule."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile
import tensorflow_datasets as tfds

from cskws_jax import keywords as shipped
from cskws_jax.datasets import folder_kws
from cskws_jax.datasets.features import FEATURES
from speechkit import audio_io, frontend

RATE = 16_000
KEYWORDS = ("people", "hundred", "about")


def tone(seconds: float, rate: int = RATE, channels: int = 1, seed: int = 0) -> np.ndarray:
    """float32 [samples] (or [samples, channels]): a 440 Hz tone over a little noise."""
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    mono = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.01 * rng.normal(size=t.size)
    wave = mono.astype(np.float32)
    return np.stack([wave] * channels, axis=1) if channels > 1 else wave


def interval(keyword: str, start: float, end: float) -> dict:
    return {"keyword": keyword, "start": start, "end": end}


def write_json(path, value) -> None:
    path.write_text(value if isinstance(value, str) else json.dumps(value))


def small_folder(root):
    """A folder in both annotation styles: a.wav (22.05 kHz stereo, a.json),
    sub/b.flac and sub/c.ogg (sub/keywords.json; c has no keyword)."""
    root.mkdir()
    audio_io.write_audio(root / "a.wav", tone(1.0, 22_050, channels=2), 22_050)
    write_json(root / "a.json", [interval("people", 0.5, 0.8), interval("about", 0.1, 0.3)])
    (root / "sub").mkdir()
    audio_io.write_audio(root / "sub" / "b.flac", tone(0.8, seed=1), RATE)
    soundfile.write(root / "sub" / "c.ogg", tone(0.6, seed=2), RATE, subtype="VORBIS")
    write_json(
        root / "sub" / "keywords.json",
        {"b.flac": [interval("hundred", 0.2, 0.79)], "c.ogg": []},
    )
    return root


def records(manual, keywords=KEYWORDS) -> dict[str, dict]:
    return dict(folder_kws.folder_records(str(manual), keywords))


def test_builds_the_test_split_from_both_annotation_styles(tmp_path):
    manual = small_folder(tmp_path / "manual")
    data_dir = str(tmp_path / "tfds")
    builder = folder_kws.FolderKws(config="shipped", data_dir=data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
    )
    assert builder.info.file_format == tfds.core.FileFormat.ARRAY_RECORD
    assert list(builder.info.metadata["keywords"]) == shipped.load_keywords()
    sources = tfds.data_source("folder_kws/shipped", data_dir=data_dir)
    assert set(sources) == {"test"}
    found = {r["utterance_id"].decode(): r for r in sources["test"]}
    assert set(found) == {"a", "sub/b", "sub/c"}
    a = found["a"]
    ids = shipped.load_keywords()
    valid = a["keyword_valid"]
    assert valid.sum() == 2 and not a["other_start"].size
    assert [ids[k] for k in a["keyword_label"][valid]] == ["about", "people"]  # time order
    np.testing.assert_allclose(a["keyword_start"][valid], [0.1, 0.5])
    assert a["duration"] == pytest.approx(1.0, abs=1e-3)
    assert found["sub/b"]["speaker"] == b"sub" and found["sub/c"]["keyword_valid"].sum() == 0
    samples, _ = audio_io.read_audio(
        manual / "sub" / "b.flac", target_rate=RATE, channels=None, mix_to_mono=True
    )
    np.testing.assert_allclose(
        found["sub/b"]["audio"], frontend.waveform_log_mel(samples, FEATURES), atol=1e-5
    )


def test_keywords_from_the_folder_or_the_config(tmp_path):
    manual = small_folder(tmp_path / "manual")
    write_json(manual / "keyword_list.json", {"keywords": ["hundred", "people", "about"]})
    builder = folder_kws.FolderKws(config="from_folder", data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
    )
    assert list(builder.info.metadata["keywords"]) == ["hundred", "people", "about"]
    b = tfds.data_source("folder_kws/from_folder", data_dir=str(tmp_path / "tfds"))["test"]
    by_id = {r["utterance_id"]: r for r in b}
    assert by_id[b"sub/b"]["keyword_label"][0] == 0  # "hundred" is class 0 here
    mine = folder_kws.FolderKwsConfig(name="mine", keywords=("hundred",))
    with pytest.raises(folder_kws.FolderKwsError, match=r"a\.json: intervals\[0\] has keyword"):
        folder_kws.FolderKws(config=mine, data_dir=str(tmp_path / "tfds2")).download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
        )


def test_from_folder_needs_the_keyword_list(tmp_path):
    manual = small_folder(tmp_path / "manual")
    builder = folder_kws.FolderKws(config="from_folder", data_dir=str(tmp_path / "tfds"))
    with pytest.raises(folder_kws.FolderKwsError, match=r"keyword_list\.json: missing"):
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
        )
    write_json(manual / "keyword_list.json", {"keywords": ["people", "people"]})
    with pytest.raises(folder_kws.FolderKwsError, match="keywords: expected a list of distinct"):
        folder_kws.read_keyword_list(str(manual))


def _set_a(manual, value):
    write_json(manual / "a.json", value)


def _set_b(manual, value):
    write_json(manual / "sub" / "keywords.json", {"b.flac": value, "c.ogg": []})


BROKEN_INTERVALS = [
    (_set_a, "{not json", r"a\.json: not valid JSON"),
    (_set_a, {"people": [0, 1]}, r"a\.json: intervals: expected a list"),
    (_set_a, [{"keyword": "people", "start": 0.1}], r"a\.json: intervals\[0\] needs 'keyword'"),
    (_set_a, [interval("weather", 0.1, 0.2)], r"a\.json: intervals\[0\] has keyword 'weather'"),
    (
        _set_a,
        [interval("about", 0.1, 0.2), interval("people", 0.5, 0.5)],
        r"a\.json: intervals\[1\] needs 0 <= start < end, got 0\.5, 0\.5",
    ),
    (_set_a, [interval("people", -0.1, 0.2)], r"a\.json: intervals\[0\] needs 0 <= start"),
    (_set_a, [interval("people", 0.1, "1")], r"a\.json: intervals\[0\]\.end must be a finite"),
    (_set_a, [interval("people", 0.5, 1.2)], r"a\.json: intervals\[0\] ends at 1\.2 s, after"),
    (
        _set_a,
        [interval("people", 0.1, 0.5), interval("about", 0.4, 0.6)],
        r"a\.json: intervals\[1\] overlaps intervals\[0\]$",
    ),
    (_set_a, [interval("people", 0.0, 0.01)] * 33, r"a\.json: intervals: 33 intervals, more"),
    (
        _set_b,
        [interval("people", 0.5, 0.9)],
        r"sub/keywords\.json: 'b\.flac'\[0\] ends at 0\.9 s, after the audio .*b\.flac",
    ),
    (_set_b, [interval("PEOPLE", 0.1, 0.2)], r"keywords\.json: 'b\.flac'\[0\] has keyword"),
]


@pytest.mark.parametrize("write, value, pattern", BROKEN_INTERVALS)
def test_each_broken_interval_names_its_file_and_entry(tmp_path, write, value, pattern):
    manual = small_folder(tmp_path / "manual")
    write(manual, value)
    with pytest.raises(folder_kws.FolderKwsError, match=pattern):
        records(manual)


def _no_annotation(manual):
    (manual / "a.json").unlink()


def _orphan_annotation(manual):
    write_json(manual / "d.json", [])


def _orphan_entry(manual):
    write_json(manual / "sub" / "keywords.json", {"b.flac": [], "c.ogg": [], "d.wav": []})


def _twice(manual):
    write_json(manual / "sub" / "b.json", [])


def _same_name(manual):
    audio_io.write_audio(manual / "a.flac", tone(0.5), RATE)


def _repeated_key(manual):
    write_json(manual / "sub" / "keywords.json", '{"b.flac": [], "b.flac": [], "c.ogg": []}')


def _unreadable(manual):
    (manual / "a.wav").write_bytes(b"RIFF not really a wav file")


def _empty(manual):
    (manual / "a.wav").write_bytes(b"")


def _not_finite(manual):
    samples = tone(1.0)
    samples[100] = np.nan
    soundfile.write(manual / "a.wav", samples, RATE, subtype="FLOAT")


BROKEN_FOLDERS = [
    (_no_annotation, r"a\.wav: no annotation \(.*a\.json, or an entry 'a\.wav' in"),
    (_orphan_annotation, r"d\.json: no audio file for this annotation"),
    (_orphan_entry, r"sub/keywords\.json: 'd\.wav': no such audio file"),
    (_twice, r"b\.flac: annotated twice, in .*b\.json and in .*keywords\.json"),
    (_same_name, r"a\.wav: a\.flac has the same name"),
    (_repeated_key, r"sub/keywords\.json: the key 'b\.flac' appears twice"),
    (_unreadable, r"a\.wav: not a readable audio file"),
    (_empty, r"a\.wav: is empty"),
    (_not_finite, r"a\.wav: 1 non-finite sample"),
]


@pytest.mark.parametrize("break_it, pattern", BROKEN_FOLDERS)
def test_each_broken_folder_rule_names_the_file(tmp_path, break_it, pattern):
    manual = small_folder(tmp_path / "manual")
    break_it(manual)
    with pytest.raises(folder_kws.FolderKwsError, match=pattern):
        records(manual)


def test_an_empty_or_missing_folder_is_refused(tmp_path):
    with pytest.raises(folder_kws.FolderKwsError, match="the manual_dir does not exist"):
        records(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(folder_kws.FolderKwsError, match="no audio files"):
        records(tmp_path / "empty")
