"""The record schema shared by the KWS builders (`synthetic_kws`, `libritop20`).

One record per utterance:
  audio           float32 [frames, 64]  log-mel at 10 ms (`FEATURES`)
  keyword_start   float32 [MAX_KEYWORDS] seconds   \\
  keyword_end     float32 [MAX_KEYWORDS] seconds    | keyword occurrences in time order,
  keyword_label   int32   [MAX_KEYWORDS] class id   | padded (0) after the last one
  keyword_valid   bool    [MAX_KEYWORDS]           /
  other_start, other_end  float32 [n_other] seconds: every other (non-keyword) word,
                  the *unknown* class of AF-KWS
  text            the words spoken, lower case, space separated
  duration        float32 seconds
  utterance_id, speaker: text;  snr_db float32 (NaN for recorded audio), noise: text
  aligned_fraction float32: share of the word intervals that came from forced alignment
                  (synthetic: the rest are espeak's word events; LibriSpeech: 1.0)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from speechkit import frontend

if TYPE_CHECKING:
    import tensorflow_datasets as tfds

MAX_KEYWORDS = 32  # keyword slots per record; an utterance with more is an error
FEATURES = frontend.FeatureConfig(window_ms=25.0, hop_ms=10.0, num_mels=64, fft_size=512)
"""The keyword spotting audio input: 64 log-mel bands, 25 ms Hann window, 10 ms hop
(`FEATURES.hop_s`), 512-point FFT (`speechkit.frontend.stft_magnitude` with it gives the
257-bin spectrogram), 16 kHz."""


@dataclasses.dataclass(frozen=True)
class Word:
    """A word of an utterance and where it is, in seconds from the start of the audio."""

    text: str
    start: float
    end: float


def kws_features() -> tfds.features.FeaturesDict:
    """The TFDS features of a KWS record (see the module docstring)."""
    import tensorflow_datasets as tfds  # here: the models import FEATURES without TFDS

    slots = (MAX_KEYWORDS,)
    return tfds.features.FeaturesDict(
        {
            "audio": tfds.features.Tensor(shape=(None, FEATURES.num_mels), dtype=np.float32),
            "keyword_start": tfds.features.Tensor(shape=slots, dtype=np.float32),
            "keyword_end": tfds.features.Tensor(shape=slots, dtype=np.float32),
            "keyword_label": tfds.features.Tensor(shape=slots, dtype=np.int32),
            "keyword_valid": tfds.features.Tensor(shape=slots, dtype=np.bool_),
            "other_start": tfds.features.Tensor(shape=(None,), dtype=np.float32),
            "other_end": tfds.features.Tensor(shape=(None,), dtype=np.float32),
            "text": tfds.features.Text(),
            "duration": np.float32,
            "utterance_id": tfds.features.Text(),
            "speaker": tfds.features.Text(),
            "snr_db": np.float32,
            "noise": tfds.features.Text(),
            "aligned_fraction": np.float32,
        }
    )


def interval_fields(words, keywords, utterance_id: str) -> dict[str, np.ndarray]:
    """keyword_* (padded) and other_* record fields of `words` (a sequence of `Word`s,
    in time order; `keywords` gives the class ids by position)."""
    class_of = {keyword: i for i, keyword in enumerate(keywords)}
    hits = [(w.start, w.end, class_of[w.text]) for w in words if w.text in class_of]
    if len(hits) > MAX_KEYWORDS:
        raise ValueError(
            f"{utterance_id}: {len(hits)} keyword occurrences, more than the record's "
            f"MAX_KEYWORDS = {MAX_KEYWORDS} slots"
        )
    fields = {
        "keyword_start": np.zeros(MAX_KEYWORDS, np.float32),
        "keyword_end": np.zeros(MAX_KEYWORDS, np.float32),
        "keyword_label": np.zeros(MAX_KEYWORDS, np.int32),
        "keyword_valid": np.zeros(MAX_KEYWORDS, bool),
    }
    for slot, (start, end, label) in enumerate(hits):
        fields["keyword_start"][slot] = start
        fields["keyword_end"][slot] = end
        fields["keyword_label"][slot] = label
        fields["keyword_valid"][slot] = True
    others = [w for w in words if w.text not in class_of]
    fields["other_start"] = np.array([w.start for w in others], np.float32)
    fields["other_end"] = np.array([w.end for w in others], np.float32)
    return fields
