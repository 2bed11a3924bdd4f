"""libritop20: LibriTop-20 records from a LibriSpeech-shaped manual_dir, and a clear error
(file and line) for each bad file."""

import os
import re

import numpy as np
import pytest
import soundfile
import tensorflow_datasets as tfds

from cskws_jax.datasets import libritop20 as lt

RATE = 16_000
TRAIN = {  # utterance id -> (duration in ms, transcript)
    "100-1-0000": (2500, "THE LITTLE PEOPLE BEFORE THE RIVER GARDEN"),
    "100-1-0001": (2000, "LITTLE WINDOW AND BEFORE MORNING ZORBLAX"),
    "100-1-0002": (3000, "THE LITTLE SILVER PEOPLE YELLOW MOUNTAIN FOREST ZORBLAX"),
    "200-2-0000": (2500, "LITTLE JOURNEY PAPER THE DOCTOR LETTER MONEY ISLAND"),
    "200-2-0001": (3000, "PEOPLE MINUTE POCKET LADY THE HUSBAND FATHER MOTHER SISTER"),
}
TEST = {"100-3-0000": (1500, "LITTLE WATER"), "100-3-0001": (2000, "THE PEOPLE SILVER")}
OVERRUN_MS = {"100-3-0001": 30}  # the last word ends this far after the audio (clipped)
# little 4, people 3, before 2, then the 2-syllable words seen once, alphabetically; "the"
# and "and" have one syllable, "zorblax" is not in the dictionary
TOP20 = [
    "little",
    "people",
    "before",
    "doctor",
    "father",
    "forest",
    "garden",
    "husband",
    "island",
    "journey",
    "lady",
    "letter",
    "minute",
    "money",
    "morning",
    "mother",
    "mountain",
    "paper",
    "pocket",
    "river",
]


def _word_times(utterance_id: str, duration_ms: int, text: str) -> list[tuple[str, int, int]]:
    """(word, start ms, end ms): evenly spread words with silences between them."""
    words = text.split()
    step = (duration_ms - 200) // len(words)
    times = [(w, 100 + i * step, 100 + i * step + step * 3 // 4) for i, w in enumerate(words)]
    word, start, _ = times[-1]
    if utterance_id in OVERRUN_MS:
        times[-1] = (word, start, duration_ms + OVERRUN_MS[utterance_id])
    return times


def _alignment_line(utterance_id, times, duration_ms) -> str:
    tokens, ends = [], []
    for word, start, end in times:
        tokens += ["", word]
        ends += [start, end]
    tokens.append("")
    ends.append(max(ends[-1], duration_ms))
    text = ",".join(f"{ms / 1000:.3f}" for ms in ends)
    return f'{utterance_id} "{",".join(tokens)}" "{text}"'


def _textgrid(times, duration_ms) -> str:
    intervals, previous = [], 0
    for word, start, end in times:
        intervals += [(previous, start, ""), (start, end, word.lower())]
        previous = end
    intervals.append((previous, max(previous, duration_ms), ""))
    body = "".join(
        f"            intervals [{i}]:\n                xmin = {a / 1000}\n"
        f'                xmax = {b / 1000}\n                text = "{text}"\n'
        for i, (a, b, text) in enumerate(intervals, start=1)
    )
    end = max(previous, duration_ms) / 1000
    return (
        'File type = "ooTextFile"\nObject class = "TextGrid"\n\nxmin = 0\n'
        f"xmax = {end}\ntiers? <exists>\nsize = 2\nitem []:\n    item [1]:\n"
        '        class = "IntervalTier"\n        name = "words"\n        xmin = 0\n'
        f"        xmax = {end}\n        intervals: size = {len(intervals)}\n{body}"
        '    item [2]:\n        class = "IntervalTier"\n        name = "phones"\n'
        f"        xmin = 0\n        xmax = {end}\n        intervals: size = 1\n"
        f"        intervals [1]:\n            xmin = 0\n            xmax = {end}\n"
        '            text = ""\n'
    )


def _write_chapter(chapter, utterances, alignment_dir=None, textgrid_dir=None):
    """A chapter folder: transcript, FLAC audio and either an .alignment.txt (in
    `alignment_dir`, default the chapter) or TextGrids (in `textgrid_dir`)."""
    chapter.mkdir(parents=True)
    stem = f"{chapter.parent.name}-{chapter.name}"
    lines = [f"{u} {text}" for u, (_, text) in utterances.items()]
    (chapter / f"{stem}.trans.txt").write_text("\n".join(lines) + "\n")
    rng = np.random.default_rng(len(str(chapter)))
    alignment = []
    for i, (utterance_id, (duration_ms, text)) in enumerate(utterances.items()):
        t = np.arange(duration_ms * RATE // 1000) / RATE
        tone = 0.2 * np.sin(2 * np.pi * (200 + 50 * i) * t) + 0.01 * rng.standard_normal(t.size)
        soundfile.write(chapter / f"{utterance_id}.flac", tone, RATE, format="FLAC")
        times = _word_times(utterance_id, duration_ms, text)
        if textgrid_dir is None:
            alignment.append(_alignment_line(utterance_id, times, duration_ms))
        else:
            textgrid_dir.mkdir(parents=True, exist_ok=True)
            (textgrid_dir / f"{utterance_id}.TextGrid").write_text(_textgrid(times, duration_ms))
    if alignment:
        folder = alignment_dir or chapter
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{stem}.alignment.txt").write_text("\n".join(alignment) + "\n")


@pytest.fixture()
def librispeech(tmp_path):
    """manual_dir: train-clean-100 (chapter 100/1 with an .alignment.txt, 200/2 with
    TextGrids elsewhere) and test-clean (100/3, its .alignment.txt elsewhere)."""
    manual = tmp_path / "manual"
    root = manual / "LibriSpeech"
    _write_chapter(root / "train-clean-100/100/1", {u: v for u, v in TRAIN.items() if "-1-" in u})
    _write_chapter(
        root / "train-clean-100/200/2",
        {u: v for u, v in TRAIN.items() if "-2-" in u},
        textgrid_dir=manual / "mfa/200",
    )
    _write_chapter(root / "test-clean/100/3", TEST, alignment_dir=manual / "alignments")
    # both forms for 100-1-0000: the .alignment.txt wins and this one is never parsed
    (manual / "mfa/100-1-0000.TextGrid").write_text("not a TextGrid")
    return manual


def _build(manual, tmp_path, config="top20"):
    builder = lt.LibriTop20(config=config, data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
    )
    return builder


def _expected(utterances, keywords):
    """utterance id -> (keyword start, end, label), (other start, end), float32 seconds."""
    expected = {}
    for utterance_id, (duration_ms, text) in utterances.items():
        times = [
            (w.lower(), s / 1000, min(e, duration_ms) / 1000)
            for w, s, e in _word_times(utterance_id, duration_ms, text)
        ]
        hits = [(s, e, keywords.index(w)) for w, s, e in times if w in keywords]
        others = [(s, e) for w, s, e in times if w not in keywords]
        expected[utterance_id] = (
            np.array(hits, np.float32).reshape(-1, 3),
            np.array(others, np.float32).reshape(-1, 2),
        )
    return expected


def _check_records(source, utterances, keywords):
    records = {r["utterance_id"].decode(): r for r in (source[i] for i in range(len(source)))}
    assert records.keys() == utterances.keys()
    for utterance_id, (hits, others) in _expected(utterances, keywords).items():
        record = records[utterance_id]
        duration_ms, text = utterances[utterance_id]
        samples = duration_ms * RATE // 1000
        assert record["audio"].shape == (samples // 160, 64)
        assert record["duration"] == np.float32(samples / RATE)
        assert record["text"].decode() == text.lower()
        assert record["speaker"].decode() == utterance_id.split("-")[0]
        assert record["noise"] == b"recorded" and np.isnan(record["snr_db"])
        assert record["aligned_fraction"] == 1.0
        count = len(hits)
        assert record["keyword_valid"].tolist() == [True] * count + [False] * (32 - count)
        np.testing.assert_array_equal(record["keyword_start"][:count], hits[:, 0])
        np.testing.assert_array_equal(record["keyword_end"][:count], hits[:, 1])
        np.testing.assert_array_equal(record["keyword_label"][:count], hits[:, 2])
        np.testing.assert_array_equal(record["other_start"], others[:, 0])
        np.testing.assert_array_equal(record["other_end"], others[:, 1])


def test_builds_top20_from_manual_dir(tmp_path, librispeech):
    builder = _build(librispeech, tmp_path)
    assert builder.info.metadata["keywords"] == TOP20
    dataset = tfds.data_source("libritop20/top20", data_dir=str(tmp_path / "tfds"))
    assert set(dataset) == {"train", "test"}
    _check_records(dataset["train"], TRAIN, TOP20)
    _check_records(dataset["test"], TEST, TOP20)
    reread = tfds.builder("libritop20/top20", data_dir=str(tmp_path / "tfds"))
    assert reread.info.metadata["keywords"] == TOP20


def test_given_keywords_and_subsets_directly_in_manual_dir(tmp_path):
    manual = tmp_path / "manual"
    _write_chapter(manual / "test-other/100/3", TEST)
    keywords = ("people", "water")
    config = lt.LibriTop20Config(name="mine", keywords=keywords)
    builder = _build(manual, tmp_path, config)
    assert builder.info.metadata["keywords"] == list(keywords)
    dataset = tfds.data_source("libritop20/mine", data_dir=str(tmp_path / "tfds"))
    assert set(dataset) == {"test"}
    _check_records(dataset["test"], TEST, list(keywords))


def test_derive_keywords_counts_ties_and_syllables():
    transcripts = {
        "a": ["THE", "RIVER", "GARDEN", "THE", "MONEY", "ZORBLAX"],
        "b": ["THE", "GARDEN", "RIVER", "ISLAND", "ZORBLAX", "ZORBLAX"],
        "c": ["THE", "PAPER", "MONEY"],
    }
    syllables = lt.shipped_syllables()
    assert syllables["the"] == 1 and "zorblax" not in syllables
    # garden, money and river tie (2 each): alphabetical; "the" (4) has one syllable
    assert lt.derive_keywords(transcripts, syllables, 4) == ["garden", "money", "river", "island"]
    assert lt.derive_keywords(transcripts, syllables, 2, min_syllables=1) == ["the", "garden"]
    with pytest.raises(lt.LibriSpeechError, match="only 5 words .* 6 keywords asked for"):
        lt.derive_keywords(transcripts, syllables, 6)


def _one_chapter(tmp_path, textgrids=False):
    manual = tmp_path / "manual"
    utterances = {u: v for u, v in TRAIN.items() if "-1-" in u}
    textgrid_dir = manual / "mfa" if textgrids else None
    _write_chapter(manual / "train-clean-100/100/1", utterances, textgrid_dir=textgrid_dir)
    return manual, manual / "train-clean-100/100/1"


GIVEN = lt.LibriTop20Config(name="given", keywords=("little", "people"))


def _edit_line(path, number, edit):
    lines = path.read_text().splitlines()
    lines[number - 1] = edit(lines[number - 1])
    path.write_text("\n".join(lines) + "\n")


def _raises(manual, tmp_path, pattern):
    with pytest.raises(lt.LibriSpeechError, match=pattern):
        _build(manual, tmp_path, GIVEN)


def test_malformed_alignment_line_names_file_and_line(tmp_path):
    manual, chapter = _one_chapter(tmp_path)
    _edit_line(chapter / "100-1.alignment.txt", 2, lambda line: line + ' "extra"')
    _raises(manual, tmp_path, r"100-1\.alignment\.txt:2: expected UTTID .* got 4 fields")


@pytest.mark.parametrize(
    "line, pattern",
    [
        ('100-1-0000 ",A," 0.1,0.2,0.3', "must be in quotes"),
        ('100-1-0000 ",A," "0.1,0.2"', "3 tokens but 2 end times"),
        ('100-1-0000 ",A," "0.1,x,0.3"', "end time 2 is 'x', not a number"),
        ('100-1-0000 ",A," "0.1,0.3,0.2"', r"end time 3 \(0.2\) is before"),
        ('100-1-0000 ",A," "-0.1,0.3,0.4"', "end time 1 is '-0.1'"),
    ],
)
def test_bad_alignment_lines(tmp_path, line, pattern):
    path = tmp_path / "100-1.alignment.txt"
    path.write_text("\n" + line + "\n")
    with pytest.raises(lt.LibriSpeechError, match=re.escape(f"{path}:2: ") + ".*" + pattern):
        lt.read_alignment_file(str(path))


@pytest.mark.parametrize(
    "line, pattern",
    [
        ("100-1-0000", "utterance 100-1-0000 has no words"),
        ("200-9-0000 HELLO", "'200-9-0000' is not an utterance of 100-1"),
    ],
)
def test_bad_transcript_lines(tmp_path, line, pattern):
    path = tmp_path / "100-1.trans.txt"
    path.write_text("100-1-0001 HELLO\n" + line + "\n")
    with pytest.raises(lt.LibriSpeechError, match=re.escape(f"{path}:2: ") + pattern):
        lt.read_transcript(str(path))


@pytest.mark.parametrize(
    "edit, pattern",
    [
        (lambda text: text.replace("item []:", "2"), ': not a TextGrid in the long "ooTextFile"'),
        (lambda text: text.replace("xmax = 0.1", "xmax = soon", 1), r":17: xmax is 'soon', not"),
        (lambda text: text.replace('text = "little"', "text = little"), ":22: text must be in"),
    ],
)
def test_bad_textgrids(tmp_path, edit, pattern):
    path = tmp_path / "100-1-0000.TextGrid"
    times = _word_times("100-1-0000", 1000, "LITTLE PEOPLE")
    path.write_text(edit(_textgrid(times, 1000)))
    with pytest.raises(lt.LibriSpeechError, match=re.escape(str(path)) + pattern):
        lt.read_textgrid(str(path))


def test_given_keywords_must_be_distinct_lower_case():
    with pytest.raises(ValueError, match="distinct lower-case"):
        lt.LibriTop20Config(name="bad", keywords=("People",))
    with pytest.raises(ValueError, match="distinct lower-case"):
        lt.LibriTop20Config(name="bad", keywords=("people", "people"))


def test_missing_audio_names_utterance_transcript_line_and_path(tmp_path):
    manual, chapter = _one_chapter(tmp_path)
    os.remove(chapter / "100-1-0001.flac")
    _raises(
        manual,
        tmp_path,
        r"100-1\.trans\.txt:2: utterance 100-1-0001: no audio .*100/1/100-1-0001\.flac",
    )


def test_word_mismatch_names_alignment_line_and_words(tmp_path):
    manual, chapter = _one_chapter(tmp_path)
    _edit_line(chapter / "100-1.trans.txt", 3, lambda line: line.replace("SILVER", "GOLDEN"))
    _raises(
        manual,
        tmp_path,
        r"100-1\.alignment\.txt:3: aligned word 3 is 'silver', but the transcript "
        r".*100-1\.trans\.txt:3 has 'golden'",
    )


def test_textgrid_without_words_tier(tmp_path):
    manual, _ = _one_chapter(tmp_path, textgrids=True)
    path = manual / "mfa/100-1-0000.TextGrid"
    path.write_text(path.read_text().replace('name = "words"', 'name = "phrases"'))
    _raises(manual, tmp_path, r'100-1-0000\.TextGrid: no "words" tier')


def test_word_past_the_audio_names_the_line(tmp_path):
    manual, chapter = _one_chapter(tmp_path)
    # 100-1-0001 (2 s): its last word ends at 1.825 s, then silence to 2 s
    _edit_line(
        chapter / "100-1.alignment.txt", 2, lambda line: line.rsplit(",", 2)[0] + ',2.100,2.100"'
    )
    _raises(
        manual,
        tmp_path,
        r"100-1\.alignment\.txt:2: 'ZORBLAX' ends at 2.1 s, after the audio .*\(2.000 s\)",
    )


def test_textgrid_interval_past_the_audio_names_its_line(tmp_path):
    manual, _ = _one_chapter(tmp_path, textgrids=True)
    path = manual / "mfa/100-1-0001.TextGrid"
    path.write_text(path.read_text().replace("xmax = 1.825", "xmax = 2.1", 1))
    _raises(manual, tmp_path, r"100-1-0001\.TextGrid:\d+: 'zorblax' ends at 2.1 s, after the audio")


def test_missing_alignment_and_subsets(tmp_path):
    manual, chapter = _one_chapter(tmp_path)
    os.remove(chapter / "100-1.alignment.txt")
    _raises(manual, tmp_path, r"100-1\.trans\.txt:1: utterance 100-1-0000 has no word alignment")
    with pytest.raises(lt.LibriSpeechError, match="no LibriSpeech subset folders"):
        lt.find_subsets(str(tmp_path / "manual/train-clean-100"))
