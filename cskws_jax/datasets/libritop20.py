"""TFDS builder `libritop20`: LibriTop-20 keyword spotting, from a user's LibriSpeech copy.

LibriTop-20 (the AF-KWS benchmark) spots the 20 most frequent words with at least two
syllables in LibriSpeech. Nothing is downloaded: `manual_dir` holds LibriSpeech and word
alignments (.alignment.txt or Montreal Forced Aligner .TextGrid) for every utterance.

    builder = libritop20.LibriTop20(config="top20", data_dir="/data/tfds")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir="/data/librispeech"))
    train = tfds.data_source("libritop20/top20", data_dir="/data/tfds")["train"]
    keywords = builder.info.metadata["keywords"]

Specification (folder layout, alignment formats, splits, keyword derivation):
docs/corpora.md#libritop-20.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence

import tensorflow_datasets as tfds

from cskws_jax import keywords as shipped
from cskws_jax.datasets.features import FEATURES, Word, interval_fields, kws_features
from speechkit import audio_io, checks, corpus, errors, frontend

SPLIT_PREFIXES = {"train-": "train", "dev-": "validation", "test-": "test"}
TIME_TOLERANCE_S = 0.05  # a word may end this much after the audio; it is clipped


class LibriSpeechError(errors.InvalidInput):
    """A LibriSpeech or alignment file that breaks the documented layout; the message
    names it (and the 1-based line of a text file)."""


@dataclasses.dataclass(frozen=True)
class Utterance:
    """A transcript line: `words` as written (upper case), `source` = "file:line"."""

    id: str
    words: tuple[str, ...]
    source: str


@dataclasses.dataclass(frozen=True)
class Alignment:
    """An utterance's aligned words in time order (silences dropped). `source` names the
    alignment ("file:line" or a TextGrid file); `places[i]` is where word i is."""

    words: tuple[Word, ...]
    places: tuple[str, ...]
    source: str


@dataclasses.dataclass(eq=False)
class LibriTop20Config(tfds.core.BuilderConfig):
    """`keywords` (lower case) or, when None, derived: see `derive_keywords`."""

    keywords: tuple[str, ...] | None = None
    num_keywords: int = 20
    min_syllables: int = 2

    def __post_init__(self):
        words = self.keywords = None if self.keywords is None else tuple(self.keywords)
        if words is not None and (
            not words or len(set(words)) < len(words) or any(w != w.lower() or not w for w in words)
        ):
            raise ValueError(
                f"LibriTop20Config.keywords: expected distinct lower-case words, got {words!r}"
            )
        checks.require_int("LibriTop20Config.num_keywords", self.num_keywords, at_least=1)


# ---------------------------------------------------------------------------- keywords


@functools.lru_cache(maxsize=1)
def shipped_syllables() -> dict[str, int]:
    """word -> syllables in pocketsphinx's shipped CMU dictionary (lower-case words)."""
    return shipped.read_dictionary(shipped.shipped_model_paths()[1])


def derive_keywords(
    transcripts: Mapping[str, Sequence[str]],
    syllables: Mapping[str, int],
    num_keywords: int = 20,
    min_syllables: int = 2,
) -> list[str]:
    """The `num_keywords` most frequent words (lower-cased) of `transcripts` (utterance id
    -> words) with >= `min_syllables` in `syllables` (word -> count, e.g.
    `shipped_syllables()`); words missing from it are skipped, ties go alphabetically."""
    counts = collections.Counter(word.lower() for words in transcripts.values() for word in words)
    ranked = sorted(
        (-count, word) for word, count in counts.items() if syllables.get(word, 0) >= min_syllables
    )
    if len(ranked) < num_keywords:
        raise LibriSpeechError(
            f"only {len(ranked)} words of the train transcripts have >= {min_syllables} "
            f"syllables in the dictionary, {num_keywords} keywords asked for"
        )
    return [word for _, word in ranked[:num_keywords]]


# ---------------------------------------------------------------------------- text files


def read_transcript(path: str) -> list[Utterance]:
    """`<speaker>-<chapter>.trans.txt` -> its utterances, in file order."""
    chapter = os.path.basename(path).removesuffix(".trans.txt")
    utterances, seen = [], set()
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            fields = line.split()
            if not fields:
                continue
            where = f"{path}:{number}"
            if not fields[0].startswith(chapter + "-"):
                raise LibriSpeechError(f"{where}: {fields[0]!r} is not an utterance of {chapter}")
            if len(fields) < 2:
                raise LibriSpeechError(f"{where}: utterance {fields[0]} has no words")
            if fields[0] in seen:
                raise LibriSpeechError(f"{where}: utterance {fields[0]} appears twice")
            seen.add(fields[0])
            utterances.append(Utterance(fields[0], tuple(fields[1:]), where))
    return utterances


def _end_times(where: str, text: str) -> list[float]:
    times = []
    for i, value in enumerate(text.split(","), start=1):
        time = _non_negative(where, f"end time {i}", value)
        if times and time < times[-1]:
            raise LibriSpeechError(f"{where}: end time {i} ({time}) is before the one before it")
        times.append(time)
    return times


def read_alignment_file(path: str) -> dict[str, Alignment]:
    """`<speaker>-<chapter>.alignment.txt` -> utterance id -> its word alignment."""
    alignments = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            fields, where = line.split(), f"{path}:{number}"
            if not fields:
                continue
            if len(fields) != 3:
                raise LibriSpeechError(
                    f'{where}: expected UTTID "TOKENS" "END_TIMES", got {len(fields)} fields'
                )
            utterance, tokens, ends = fields
            if not all(len(f) >= 2 and f[0] == f[-1] == '"' for f in (tokens, ends)):
                raise LibriSpeechError(f"{where}: the tokens and end times must be in quotes")
            tokens, ends = tokens[1:-1].split(","), _end_times(where, ends[1:-1])
            if len(tokens) != len(ends):
                raise LibriSpeechError(f"{where}: {len(tokens)} tokens but {len(ends)} end times")
            if utterance in alignments:
                raise LibriSpeechError(f"{where}: utterance {utterance} appears twice")
            starts = [0.0, *ends[:-1]]
            words = tuple(Word(t, s, e) for t, s, e in zip(tokens, starts, ends, strict=True) if t)
            alignments[utterance] = Alignment(words, (where,) * len(words), where)
    return alignments


_PRAAT_KEY = re.compile(r"(\w+) = (.*)")


def _non_negative(where: str, what: str, value: str) -> float:
    """float(value), or an error naming `where` unless it is a finite number >= 0."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise LibriSpeechError(f"{where}: {what} is {value!r}, not a number >= 0")
    return number


def _tiers(path: str, lines: list[str]) -> dict[str, list[tuple[int, dict]]]:
    """Tier name -> its intervals: (line of "intervals [i]:", key -> (raw value, line))."""
    tiers: dict[str, list] = {}
    name, interval = None, None
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if re.fullmatch(r"item \[\d+\]:", line):
            name, interval = None, None
        elif re.fullmatch(r"intervals \[\d+\]:", line):
            if name is None:
                raise LibriSpeechError(f"{path}:{number}: an interval outside a named tier")
            interval = {}
            tiers[name].append((number, interval))
        elif match := _PRAAT_KEY.fullmatch(line):
            key, value = match.groups()
            if interval is not None:
                interval[key] = (value, number)
            elif key == "name" and name is None:
                name = value.strip('"')
                tiers.setdefault(name, [])
    return tiers


def read_textgrid(path: str) -> Alignment:
    """An MFA `<uttid>.TextGrid` (long text format) -> the words of its "words" tier."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            lines = handle.read().splitlines()
    except UnicodeDecodeError:
        raise LibriSpeechError(f"{path}: not UTF-8 text") from None
    if (
        not lines
        or lines[0].strip() != 'File type = "ooTextFile"'
        or "item []:" not in (line.strip() for line in lines)
    ):
        raise LibriSpeechError(f'{path}: not a TextGrid in the long "ooTextFile" text format')
    tiers = _tiers(path, lines)
    if not tiers.get("words"):
        raise LibriSpeechError(f'{path}: no "words" tier of intervals (tiers: {list(tiers)})')
    words, places, previous = [], [], 0.0
    for header, interval in tiers["words"]:
        where = f"{path}:{header}"
        if not {"xmin", "xmax", "text"} <= interval.keys():
            raise LibriSpeechError(f"{where}: the interval needs xmin, xmax and text")
        start = _non_negative(f"{path}:{interval['xmin'][1]}", "xmin", interval["xmin"][0])
        end = _non_negative(f"{path}:{interval['xmax'][1]}", "xmax", interval["xmax"][0])
        text = interval["text"][0]
        if not (len(text) >= 2 and text[0] == text[-1] == '"'):
            raise LibriSpeechError(f"{path}:{interval['text'][1]}: text must be in quotes")
        if not previous <= start <= end:
            raise LibriSpeechError(
                f"{where}: the interval {start}-{end} s is reversed or before the previous one"
            )
        previous = start
        if text := text[1:-1].replace('""', '"').strip():
            words.append(Word(text, start, end))
            places.append(where)
    return Alignment(tuple(words), tuple(places), path)


# ---------------------------------------------------------------------------- the tree


def find_subsets(manual_dir: str) -> dict[str, list[str]]:
    """split -> its subset folders, from `<manual_dir>/LibriSpeech/` and `<manual_dir>/`."""
    splits: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for root in (os.path.join(manual_dir, "LibriSpeech"), manual_dir):
        for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            folder = os.path.join(root, name)
            split = next((s for p, s in SPLIT_PREFIXES.items() if name.startswith(p)), None)
            if split is None or not os.path.isdir(folder):
                continue
            if name in seen:
                raise LibriSpeechError(f"{folder}: subset {name} is also at {seen[name]}")
            seen[name] = folder
            splits.setdefault(split, []).append(folder)
    if not splits:
        raise LibriSpeechError(
            f"{manual_dir}: no LibriSpeech subset folders (train-*, dev-*, test-*) in it "
            "or in its LibriSpeech/ folder"
        )
    return splits


def chapter_folders(subset: str) -> list[str]:
    """The `<speaker>/<chapter>` folders of a subset folder, sorted."""

    def folders(parent):
        return [
            os.path.join(parent, name)
            for name in sorted(os.listdir(parent))
            if os.path.isdir(os.path.join(parent, name))
        ]

    return [chapter for speaker in folders(subset) for chapter in folders(speaker)]


def _transcript_path(chapter: str) -> str:
    speaker, chapter_id = chapter.split(os.sep)[-2:]
    path = os.path.join(chapter, f"{speaker}-{chapter_id}.trans.txt")
    if not os.path.exists(path):
        raise LibriSpeechError(f"{chapter}: no transcript {os.path.basename(path)}")
    return path


class AlignmentFiles:
    """The .alignment.txt and .TextGrid files under manual_dir, found by name."""

    SUFFIXES = (".alignment.txt", ".TextGrid")

    def __init__(self, manual_dir: str):
        self.manual_dir = manual_dir
        self.paths: dict[str, list[str]] = collections.defaultdict(list)
        for folder, _, names in os.walk(manual_dir, followlinks=True):
            for name in names:
                if name.endswith(self.SUFFIXES):
                    self.paths[name].append(os.path.join(folder, name))

    def find(self, name: str, folder: str | None = None) -> str | None:
        """The file `name`: in `folder` if given and there, else the only one of its name."""
        if folder is not None and os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
        paths = sorted(self.paths.get(name, []))
        if len(paths) > 1:
            raise LibriSpeechError(f"{paths[0]}: {len(paths)} files named {name}: {paths}")
        return paths[0] if paths else None


# ---------------------------------------------------------------------------- records


def check_words(utterance: Utterance, alignment: Alignment) -> None:
    """Raises unless the aligned words are the transcript's (case-insensitive)."""
    said = [word.lower() for word in utterance.words]
    aligned = [word.text.lower() for word in alignment.words]
    if said == aligned:
        return
    pairs = zip(said + ["(end)"], aligned + ["(end)"], strict=False)
    i, (want, got) = next((i, p) for i, p in enumerate(pairs) if p[0] != p[1])
    raise LibriSpeechError(
        f"{alignment.source}: aligned word {i + 1} is {got!r}, but the transcript "
        f"{utterance.source} has {want!r}"
    )


def fit_to_audio(alignment: Alignment, duration: float, audio_path: str) -> list[Word]:
    """The words lower-cased, clipped to `duration` (s); raises if one ends later than
    `TIME_TOLERANCE_S` after it."""
    for word, place in zip(alignment.words, alignment.places, strict=True):
        if word.end > duration + TIME_TOLERANCE_S:
            raise LibriSpeechError(
                f"{place}: {word.text!r} ends at {word.end} s, after the audio "
                f"{audio_path} ({duration:.3f} s)"
            )
    return [
        Word(w.text.lower(), min(w.start, duration), min(w.end, duration)) for w in alignment.words
    ]


def convert_utterance(
    utterance: Utterance, alignment: Alignment, audio_path: str, keywords: Sequence[str]
) -> dict:
    """One aligned utterance -> a record (`features.kws_features()`)."""
    check_words(utterance, alignment)
    samples, _ = audio_io.read_audio(audio_path, target_rate=FEATURES.sample_rate)
    duration = samples.size / FEATURES.sample_rate
    words = fit_to_audio(alignment, duration, audio_path)
    return {
        "audio": frontend.waveform_log_mel(samples, FEATURES),
        **interval_fields(words, keywords, utterance.id),
        "text": " ".join(word.lower() for word in utterance.words),
        "duration": duration,
        "utterance_id": utterance.id,
        "speaker": utterance.id.split("-")[0],
        "snr_db": math.nan,
        "noise": "recorded",
        "aligned_fraction": 1.0,
    }


def chapter_examples(
    chapter: str, keywords: Sequence[str], files: AlignmentFiles
) -> Iterator[tuple[str, dict]]:
    """(utterance id, record) for each transcript line of a chapter folder."""
    transcript = _transcript_path(chapter)
    utterances = read_transcript(transcript)
    name = os.path.basename(transcript).replace(".trans.txt", ".alignment.txt")
    alignment_path = files.find(name, folder=chapter)
    alignments = read_alignment_file(alignment_path) if alignment_path else {}
    said = {u.id for u in utterances}
    if extra := sorted(alignments.keys() - said):
        raise LibriSpeechError(
            f"{alignments[extra[0]].source}: utterance {extra[0]} is not in {transcript}"
        )
    for audio in sorted(n for n in os.listdir(chapter) if n.endswith(".flac")):
        if audio.removesuffix(".flac") not in said:
            raise LibriSpeechError(f"{os.path.join(chapter, audio)}: not in {transcript}")
    for utterance in utterances:
        audio_path = os.path.join(chapter, utterance.id + ".flac")
        if not os.path.exists(audio_path):
            raise LibriSpeechError(
                f"{utterance.source}: utterance {utterance.id}: no audio {audio_path}"
            )
        alignment = alignments.get(utterance.id)
        if alignment is None:
            textgrid = files.find(utterance.id + ".TextGrid")
            if textgrid is None:
                looked = alignment_path or f"{name} (none in the chapter folder or under it)"
                raise LibriSpeechError(
                    f"{utterance.source}: utterance {utterance.id} has no word alignment: "
                    f"not in {looked}, no {utterance.id}.TextGrid under {files.manual_dir}"
                )
            alignment = read_textgrid(textgrid)
        yield utterance.id, convert_utterance(utterance, alignment, audio_path, keywords)


class LibriTop20(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder):
    """LibriTop-20 keyword spotting records from a user's LibriSpeech and alignments."""

    name = "libritop20"
    VERSION = tfds.core.Version("1.0.0")
    MANUAL_DOWNLOAD_INSTRUCTIONS = __doc__
    BUILDER_CONFIGS = [
        LibriTop20Config(
            name="top20",
            description="the 20 most frequent words with >= 2 syllables of the train split",
        )
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        given = self.builder_config.keywords
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=kws_features(),
            metadata=tfds.core.MetadataDict(keywords=list(given) if given else []),
        )

    def _split_generators(self, dl_manager):
        manual_dir = os.fspath(dl_manager.manual_dir)
        if not os.path.isdir(manual_dir):
            raise LibriSpeechError(f"{manual_dir}: the manual_dir does not exist")
        splits = find_subsets(manual_dir)
        chapters = {
            split: [c for s in subsets for c in chapter_folders(s)]
            for split, subsets in splits.items()
        }
        keywords = self._keywords(chapters.get("train"), manual_dir)
        self.info.metadata["keywords"] = keywords
        files = AlignmentFiles(manual_dir)
        return {
            split: self._generate_examples(folders, keywords, files)
            for split, folders in chapters.items()
        }

    def _keywords(self, train_chapters: list[str] | None, manual_dir: str) -> list[str]:
        config = self.builder_config
        if config.keywords:
            return list(config.keywords)
        if not train_chapters:
            raise LibriSpeechError(f"{manual_dir}: deriving the keywords needs a train-* subset")
        transcripts = {
            u.id: u.words for c in train_chapters for u in read_transcript(_transcript_path(c))
        }
        return derive_keywords(
            transcripts, shipped_syllables(), config.num_keywords, config.min_syllables
        )

    def _generate_examples(self, chapters, keywords, files):
        for chapter in chapters:
            yield from chapter_examples(chapter, keywords, files)
