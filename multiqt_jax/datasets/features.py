"""The MultiQT audio features and the record schema shared by the call builders
(synthetic and annotated)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from speechkit import asr, frontend

if TYPE_CHECKING:
    import tensorflow_datasets as tfds

NUM_FOLDS = 5  # cross-validation folds; every record carries its fold id 0..NUM_FOLDS-1
FEATURES = frontend.FeatureConfig(window_ms=20.0, hop_ms=10.0, num_mels=40)
"""The MultiQT audio input: 40 log-mel bands, 20 ms Hann window, 10 ms hop, 16 kHz;
labels share its frame rate (`FEATURES.hop_s`)."""


def call_features(
    with_text_posteriors: bool = False, with_spoken_words: bool = False
) -> tfds.features.FeaturesDict:
    """audio [frames, FEATURES.num_mels] and labels [frames] at FEATURES.hop_s (10 ms),
    recognised words with times (s), transcript, fold, call_id, duration (s), snr_db,
    noise, speakers; optionally the user's own character posteriors [frames // 2, asr.NUM_SYMBOLS]
    at 20 ms, and the words actually said with their true times (spoken_word,
    spoken_start, spoken_end: an oracle transcript, where the builder knows it)."""
    import tensorflow_datasets as tfds  # here: the models import FEATURES without TFDS

    fields = {
        "audio": tfds.features.Tensor(shape=(None, FEATURES.num_mels), dtype=np.float32),
        "labels": tfds.features.Tensor(shape=(None,), dtype=np.int32),
        "asr_word": tfds.features.Sequence(tfds.features.Text()),
        "asr_start": tfds.features.Tensor(shape=(None,), dtype=np.float32),
        "asr_end": tfds.features.Tensor(shape=(None,), dtype=np.float32),
        "asr_emitted": tfds.features.Tensor(shape=(None,), dtype=np.float32),
        "transcript": tfds.features.Text(),
        "fold": np.int32,
        "call_id": tfds.features.Text(),
        "duration": np.float32,
        "snr_db": np.float32,
        "noise": tfds.features.Text(),
        "speakers": tfds.features.Text(),  # "|"-joined `speechkit.tts` speakers; "recorded"
    }
    if with_text_posteriors:
        fields["text_posteriors"] = tfds.features.Tensor(
            shape=(None, asr.NUM_SYMBOLS), dtype=np.float32
        )
    if with_spoken_words:
        fields["spoken_word"] = tfds.features.Sequence(tfds.features.Text())
        fields["spoken_start"] = tfds.features.Tensor(shape=(None,), dtype=np.float32)
        fields["spoken_end"] = tfds.features.Tensor(shape=(None,), dtype=np.float32)
    return tfds.features.FeaturesDict(fields)


def word_fields(words) -> dict[str, object]:
    """The asr_* record fields of a sequence of `asr.TimedWord`s."""
    return {
        "asr_word": [w.word for w in words],
        "asr_start": np.array([w.start for w in words], np.float32),
        "asr_end": np.array([w.end for w in words], np.float32),
        "asr_emitted": np.array([w.emitted for w in words], np.float32),
    }


def spoken_fields(words) -> dict[str, object]:
    """The spoken_* record fields of a sequence of `asr.TimedWord`s (the words said)."""
    return {
        "spoken_word": [w.word for w in words],
        "spoken_start": np.array([w.start for w in words], np.float32),
        "spoken_end": np.array([w.end for w in words], np.float32),
    }


def spoken_words(record) -> list[asr.TimedWord]:
    """The spoken_* fields of a stored record as `asr.TimedWord`s, each emitted at its end
    (what a perfect streaming recogniser would give); a clear error for a record without
    them (annotated calls, live audio)."""
    if "spoken_word" not in record:
        raise ValueError(
            f"record {_text(record.get('call_id', '?'))!r} has no spoken_word field: the "
            "oracle transcript exists only in synthetic_calls >= 2.1.0"
        )
    return [
        asr.TimedWord(_text(word), float(start), float(end), float(end))
        for word, start, end in zip(
            record["spoken_word"], record["spoken_start"], record["spoken_end"], strict=True
        )
    ]


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def recognised_words(record) -> list[asr.TimedWord]:
    """The asr_* fields of a stored record back as `asr.TimedWord`s."""
    return [
        asr.TimedWord(
            _text(word),
            float(start),
            float(end),
            float(emitted),
        )
        for word, start, end, emitted in zip(
            record["asr_word"],
            record["asr_start"],
            record["asr_end"],
            record["asr_emitted"],
            strict=True,
        )
    ]


def record_call_id(record) -> str:
    """A record's `call_id` as str (TFDS gives text fields as bytes)."""
    call_id = record["call_id"]
    return call_id.decode() if isinstance(call_id, bytes) else str(call_id)


class _PerCall:
    """A data source (`tfds.data_source` split) whose records get fields of their own:
    `fields(values[call_id])` merged into each record. Every call needs its value."""

    what = ""  # what `values` hold, for the error naming a call without one

    def __init__(self, source, values: dict):
        self.source, self.values = source, values

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> dict:
        record = self.source[index]
        call_id = record_call_id(record)
        if call_id not in self.values:
            raise KeyError(f"{type(self).__name__}: no {self.what} for call {call_id!r}")
        return {**record, **self.fields(self.values[call_id])}

    def fields(self, value) -> dict:
        raise NotImplementedError


class RecognisedBy(_PerCall):
    """A data source whose records' asr_* fields hold other recognised words:
    `words[call_id]`, a sequence of `asr.TimedWord`s per call (e.g.
    `synthetic_calls.SyntheticCalls.variant_words`)."""

    what = "recognised words"

    def fields(self, words) -> dict:
        return word_fields(words)


class WithPosteriors(_PerCall):
    """A data source whose records carry their own character posteriors:
    `posteriors[call_id]`, float32 [frames // 2, asr.NUM_SYMBOLS] per call (e.g. a
    `ctc_jax` recogniser's), the `text_posteriors` field the text input then reads
    in place of the words."""

    what = "posteriors"

    def fields(self, posteriors) -> dict:
        return {"text_posteriors": posteriors}
