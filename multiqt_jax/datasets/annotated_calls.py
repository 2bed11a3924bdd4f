"""TFDS builder `annotated_calls`: a user's own recorded calls, from `manual_dir`.

One call per stem in the manual folder:

    <manual_dir>/<call>.wav            the call audio (or .flac / .ogg), any rate, mono
    <manual_dir>/<call>.json           {"segments": [{"label", "start", "end"}, ...],
                                        "fold": optional, "asr": optional timed words}
    <manual_dir>/<call>.npy            optional: character posteriors [frames, V] at 20 ms

The `asr` words or the `.npy` matrix give the text modality; with neither, pocketsphinx
recognises the audio. Every violation raises `AnnotationError` naming the file (and the
segment). Records have the fields of `synthetic_calls` plus `text_posteriors`.
Specification (every rule, dtypes, bounded reading): docs/corpora.md#your-own-calls-annotated_calls.
"""

from __future__ import annotations

import hashlib
import math
import os

import numpy as np
import tensorflow_datasets as tfds

from multiqt_jax import labels
from multiqt_jax.datasets.features import FEATURES, NUM_FOLDS, call_features, word_fields
from multiqt_jax.datasets.render import paint_span
from speechkit import arrays, asr, audio_io, corpus, errors, files, frontend

AUDIO_SUFFIXES = audio_io.AUDIO_SUFFIXES
TIME_TOLERANCE_S = 0.05  # annotations may end this much past the audio


class AnnotationError(errors.InvalidInput):
    """An annotation file that breaks the documented format; the message names it."""


def _number(path, where: str, value) -> float:
    """A finite JSON number as float (an integer too large for a float is not one)."""
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if math.isfinite(number):
            return number
    shown = repr(value) if len(repr(value)) < 40 else repr(value)[:37] + "..."
    raise AnnotationError(f"{path}: {where} must be a finite number, got {shown}")


def _read_json(path: str):
    """The JSON in `path` (`speechkit.files.load_json`: a regular file of at most
    `files.JSON_LIMIT` bytes), or an AnnotationError naming it (not UTF-8, not JSON,
    nested deeper than the reader recurses, too long, not a regular file, unreadable)."""
    try:
        return files.load_json(path)
    except files.JsonFileError as err:
        raise AnnotationError(str(err)) from None


def read_annotation(path: str, task: str, duration: float) -> dict:
    """Parses and validates `<call>.json`; returns segments (class ids), fold and asr."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise AnnotationError(f"{path}: expected a JSON object with 'segments'")
    if not isinstance(data.get("segments"), list):
        raise AnnotationError(f"{path}: 'segments' must be a list of {{label, start, end}}")
    names = labels.classes(task)
    segments = []
    for i, segment in enumerate(data["segments"]):
        where = f"segments[{i}]"
        if not isinstance(segment, dict) or not {"label", "start", "end"} <= set(segment):
            raise AnnotationError(f"{path}: {where} needs 'label', 'start' and 'end'")
        if segment["label"] not in names:
            raise AnnotationError(
                f"{path}: {where} has label {segment['label']!r}, not a {task} class {names}"
            )
        start = _number(path, f"{where}.start", segment["start"])
        end = _number(path, f"{where}.end", segment["end"])
        if not 0 <= start < end:
            raise AnnotationError(f"{path}: {where} needs 0 <= start < end, got {start}, {end}")
        if end > duration + TIME_TOLERANCE_S:
            raise AnnotationError(
                f"{path}: {where} ends at {end} s, after the audio ({duration:.2f} s)"
            )
        segments.append((names.index(segment["label"]), start, min(end, duration)))
    segments.sort(key=lambda s: s[1])
    for (_, _, end), (_, start, _) in zip(segments, segments[1:], strict=False):
        if start < end:
            raise AnnotationError(f"{path}: segments overlap around {start} s")
    fold = data.get("fold")
    if fold is not None and (type(fold) is not int or fold not in range(NUM_FOLDS)):
        raise AnnotationError(f"{path}: 'fold' must be an integer 0-{NUM_FOLDS - 1}, got {fold!r}")
    words = timed_words(path, data["asr"]) if "asr" in data else None
    return {"segments": segments, "fold": fold, "asr": words}


def timed_words(path, entries) -> list[asr.TimedWord]:
    """The 'asr' list of a `<call>.json` ({word, start, end, emitted?} each, seconds;
    `emitted` defaults to `end`) as `asr.TimedWord`s, checked."""
    if not isinstance(entries, list):
        raise AnnotationError(f"{path}: 'asr' must be a list of {{word, start, end}}")
    words = []
    for i, word in enumerate(entries):
        where = f"asr[{i}]"
        if not isinstance(word, dict) or not isinstance(word.get("word"), str):
            raise AnnotationError(f"{path}: {where} needs a string 'word'")
        start = _number(path, f"{where}.start", word.get("start"))
        end = _number(path, f"{where}.end", word.get("end"))
        emitted = _number(path, f"{where}.emitted", word.get("emitted", end))
        if not 0 <= start <= end <= emitted:
            raise AnnotationError(f"{path}: {where} needs 0 <= start <= end <= emitted")
        words.append(asr.TimedWord(word["word"], start, end, emitted))
    return words


def read_words(path: str) -> list[asr.TimedWord]:
    """The timed words of a words file: a `<call>.json` with an 'asr' list (its
    segments, if any, are not read) or that list alone."""
    data = _read_json(path)
    if isinstance(data, dict):
        if "asr" not in data:
            raise AnnotationError(f"{path}: no 'asr' list of {{word, start, end}}")
        data = data["asr"]
    return timed_words(path, data)


def call_files(folder: str) -> list[str]:
    """The calls' audio files at the top of `folder` (sorted), or an AnnotationError
    naming what does not fit: a subfolder (not read, so not silently skipped), two audio
    files of one call (`c1.wav` and `c1.flac`), an annotation without audio, or one
    whose name ends in `.JSON` (read as `.json` only)."""
    if not os.path.isdir(folder):
        raise AnnotationError(f"{folder}: the manual_dir does not exist")
    names = sorted(os.listdir(folder))
    for name in names:
        if os.path.isdir(os.path.join(folder, name)):
            raise AnnotationError(
                f"{os.path.join(folder, name)}: a folder; annotated_calls reads the calls at "
                "the top of manual_dir only (move them up, or remove the folder)"
            )
    audio = [os.path.join(folder, n) for n in names if n.lower().endswith(AUDIO_SUFFIXES)]
    clash = files.stem_clash(audio)
    if clash:
        raise AnnotationError(
            f"{clash[0]} and {os.path.basename(clash[1])}: two audio files of one call; keep one"
        )
    seen = {os.path.splitext(path)[0] for path in audio}
    for name in names:
        if name.lower().endswith(".json") and not name.endswith(".json"):
            raise AnnotationError(
                f"{os.path.join(folder, name)}: an annotation's name ends in .json, lower case"
            )
    orphans = [
        os.path.join(folder, name)
        for name in names
        if name.endswith(".json") and os.path.join(folder, name[:-5]) not in seen
    ]
    if orphans:
        raise AnnotationError(f"{orphans[0]}: no audio file for this annotation")
    if not audio:
        raise AnnotationError(f"{folder}: no audio files ({', '.join(AUDIO_SUFFIXES)})")
    return audio


POSTERIOR_DTYPES = arrays.FLOAT_DTYPES
"""What a `<call>.npy` may hold: real floats (float16, float32 or float64); a complex,
string, integer or object array is refused, not converted."""


def read_posteriors(path: str, frames: int) -> np.ndarray:
    """Loads `<call>.npy` and checks it: float [about frames, V], rows of probabilities.
    Read header first (`speechkit.arrays.load_npy`): its dtype, its shape against
    `frames` and its size against the file's are checked before any data is read, so a
    header claiming more rows than the call has is refused having read a few hundred
    bytes."""

    def expect(shape: tuple[int, ...]) -> None:
        if len(shape) != 2 or shape[1] != asr.NUM_SYMBOLS:
            raise AnnotationError(
                f"{path}: expected shape [frames, {asr.NUM_SYMBOLS}] (speechkit.asr symbols), "
                f"got {shape}"
            )
        if abs(shape[0] - frames) > 1 or shape[0] == 0 < frames:
            raise AnnotationError(
                f"{path}: has {shape[0]} frames, expected {frames} (20 ms over the audio)"
            )

    try:
        matrix = arrays.load_npy(path, dtypes=POSTERIOR_DTYPES, expect=expect)
    except arrays.ArrayFileError as err:
        raise AnnotationError(str(err)) from None
    with np.errstate(over="ignore"):  # a float64 past float32's range: infinite, refused
        matrix = matrix.astype(np.float32)
    if matrix.size and (not np.all(np.isfinite(matrix)) or matrix.min() < 0):
        raise AnnotationError(f"{path}: values must be finite and non-negative (as float32)")
    return _fit(matrix, frames)


def _fit(matrix: np.ndarray, frames: int) -> np.ndarray:
    if matrix.shape[0] >= frames:
        return matrix[:frames]
    return np.concatenate([matrix, np.repeat(matrix[-1:], frames - matrix.shape[0], axis=0)])


def _default_fold(call_id: str) -> int:
    return int(hashlib.sha1(call_id.encode()).hexdigest(), 16) % NUM_FOLDS


def convert_call(audio_path: str, task: str) -> dict:
    """One call of the manual folder -> a record (see the module docstring)."""
    stem, _ = os.path.splitext(audio_path)
    call_id = os.path.basename(stem)
    json_path = stem + ".json"
    if not os.path.exists(json_path):
        raise AnnotationError(f"{audio_path}: no annotation file {json_path}")
    config = FEATURES
    samples, _ = audio_io.read_audio(audio_path, target_rate=config.sample_rate)
    duration = samples.size / config.sample_rate
    annotation = read_annotation(json_path, task, duration)
    features = frontend.waveform_log_mel(samples, config)
    frames = features.shape[0]
    label = np.zeros(frames, np.int32)
    for class_id, start, end in annotation["segments"]:
        paint_span(label, start, end, class_id, config.hop_s)
    posteriors = np.zeros((0, asr.NUM_SYMBOLS), np.float32)
    words = annotation["asr"]
    if os.path.exists(stem + ".npy"):
        posteriors = read_posteriors(stem + ".npy", frames // 2)
        words = words or []
    elif words is None:
        words = list(asr.recognise(samples).words)
    fold = annotation["fold"] if annotation["fold"] is not None else _default_fold(call_id)
    return {
        "audio": features,
        "labels": label,
        **word_fields(words),
        "text_posteriors": posteriors,
        "transcript": "",
        "fold": fold,
        "call_id": call_id,
        "duration": duration,
        "snr_db": float("nan"),
        "noise": "recorded",
        "speakers": "recorded",
    }


class AnnotatedCalls(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder):
    """A user's own call recordings with question or symptom segments."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {
        "1.1.0": "calls without words are recognised with endpointed streaming (speechkit.asr)"
    }
    MANUAL_DOWNLOAD_INSTRUCTIONS = __doc__
    BUILDER_CONFIGS = [tfds.core.BuilderConfig(name=task) for task in labels.TASKS]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=call_features(with_text_posteriors=True),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(call_files(os.fspath(dl_manager.manual_dir)))}

    def _generate_examples(self, audio_paths):
        for path in audio_paths:
            record = convert_call(path, self.builder_config.name)
            yield record["call_id"], record
