"""Render a call script into a MultiQT example: audio, real ASR, features, labels.

Per call: each turn is synthesised (espeak-ng) with the dispatcher's or the caller's
voice, turns are joined with pauses, background noise is added at a drawn SNR and the
result goes through a telephone line (wide-band by default, see `RenderConfig`).
pocketsphinx then recognises the call audio (its errors are real), and the example
stores the 40 log-mel features (10 ms), the timed recognised words, and per-10 ms
labels for both tasks from the synthesis timings.

Stages are timed (`RenderedCall.stage_seconds`) for the build reports.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from multiqt_jax import labels
from multiqt_jax.datasets.dialogue import Turn
from speechkit import asr, channel, frontend, tts

LABEL_HOP_S = 0.01  # labels and audio features: one per 10 ms
DISPATCHER_VARIANTS = ("f1", "f2", "f3", "f4", "m1", "m2", "m3", "m4")
CALLER_VARIANTS = ("f5", "m5", "m6", "m7", "klatt", "klatt2", "klatt3", "whisperf")


@dataclasses.dataclass(frozen=True)
class RenderConfig:
    """How a script becomes audio; every field is a sweepable experiment setting."""

    sample_rate: int = 16_000
    snr_db: tuple[float, float] = (15.0, 30.0)  # drawn uniformly per call (WER ~33 %)
    noise_kinds: tuple[str, ...] = ("pink", "white", "babble")
    # "wideband" (HD voice, 50-7000 Hz), "narrowband" (300-3400 Hz, mu-law) or "none".
    # The shipped recogniser is a 16 kHz wide-band model: narrow-band calls cost it ~30
    # points of WER (a mismatch a real dispatch centre's telephone model would not have).
    telephone: str = "wideband"
    pause_s: tuple[float, float] = (0.2, 0.8)  # silence between turns
    lead_s: float = 0.3  # silence before the first and after the last turn
    rate_wpm: tuple[int, int] = (150, 200)
    recognizer: asr.RecognizerConfig = asr.RecognizerConfig()
    features: frontend.FeatureConfig = frontend.MULTIQT_FEATURES

    def __post_init__(self):
        unknown = set(self.noise_kinds) - {"pink", "white", "babble"}
        if unknown or not self.noise_kinds:
            raise ValueError(f"noise_kinds: expected some of pink, white, babble; got {unknown}")
        if self.telephone not in ("wideband", "narrowband", "none"):
            raise ValueError(
                f"telephone: expected 'wideband', 'narrowband' or 'none', got {self.telephone!r}"
            )
        if self.snr_db[0] > self.snr_db[1] or self.pause_s[0] > self.pause_s[1]:
            raise ValueError("snr_db / pause_s: expected (low, high) with low <= high")


@dataclasses.dataclass(frozen=True)
class RenderedCall:
    features: np.ndarray  # float32 [frames, 40] log-mel at 10 ms
    labels: dict[str, np.ndarray]  # task -> int32 [frames] class ids at 10 ms
    asr_words: tuple[asr.TimedWord, ...]  # recognised words, with emission times
    transcript: str  # what was said
    duration: float  # seconds
    snr_db: float
    noise: str
    stage_seconds: dict[str, float]


def paint_span(frame_labels: np.ndarray, start: float, end: float, class_id: int) -> None:
    """Sets the 10 ms label frames of [start, end) seconds to class_id, in place."""
    frame_labels[int(round(start / LABEL_HOP_S)) : int(round(end / LABEL_HOP_S))] = class_id


def _voice(rng: np.random.Generator, variants: tuple[str, ...], config: RenderConfig):
    return tts.Voice(
        variant=variants[int(rng.integers(len(variants)))],
        rate=int(rng.integers(config.rate_wpm[0], config.rate_wpm[1] + 1)),
        pitch=int(rng.integers(30, 71)),
    )


def _noise(rng, kind: str, samples: int, config: RenderConfig) -> np.ndarray:
    if kind == "white":
        return channel.white_noise(rng, samples)
    if kind == "pink":
        return channel.pink_noise(rng, samples)
    texts = ("Please hold the line.", "Unit four is on scene.", "Copy that, over.")
    voices = [
        tts.synthesize(text, _voice(rng, CALLER_VARIANTS, config), config.sample_rate).waveform
        for text in texts
    ]
    return channel.babble(rng, voices, samples, talkers=4)


def render_call(
    turns: tuple[Turn, ...], rng: np.random.Generator, config: RenderConfig = RenderConfig()
) -> RenderedCall:
    """Synthesis, channel, recognition and features for one script."""
    if not turns:
        raise ValueError("render_call: the script has no turns")
    timings = dict.fromkeys(("synthesis", "channel", "recognition", "features"), 0.0)
    clock = time.perf_counter()
    voices = {
        "dispatcher": _voice(rng, DISPATCHER_VARIANTS, config),
        "caller": _voice(rng, CALLER_VARIANTS, config),
    }
    rate = config.sample_rate
    pieces = [np.zeros(int(config.lead_s * rate), np.float32)]
    spans = []  # (turn, start s, end s) of the spoken words
    cursor = pieces[0].size
    for i, turn in enumerate(turns):
        speech = tts.synthesize(
            turn.text, voices[turn.speaker], rate, seed=int(rng.integers(2**31))
        )
        words = speech.words
        spans.append((turn, cursor / rate + words[0].start, cursor / rate + words[-1].end))
        pieces.append(speech.waveform)
        cursor += speech.waveform.size
        gap = config.lead_s if i == len(turns) - 1 else rng.uniform(*config.pause_s)
        pieces.append(np.zeros(int(gap * rate), np.float32))
        cursor += pieces[-1].size
    clean = np.concatenate(pieces)
    timings["synthesis"] += time.perf_counter() - clock

    clock = time.perf_counter()
    kind = config.noise_kinds[int(rng.integers(len(config.noise_kinds)))]
    snr = float(rng.uniform(*config.snr_db))
    noisy = channel.add_noise(clean, _noise(rng, kind, clean.size, config), snr)
    line = {"wideband": channel.wideband_telephone, "narrowband": channel.telephone}
    audio = line[config.telephone](noisy, rate) if config.telephone != "none" else noisy
    audio = np.clip(audio, -1.0, 1.0)
    timings["channel"] += time.perf_counter() - clock

    clock = time.perf_counter()
    recognition = asr.recognize(audio, config.recognizer)
    timings["recognition"] += time.perf_counter() - clock

    clock = time.perf_counter()
    features = frontend.waveform_log_mel(audio, config.features)
    frames = features.shape[0]
    timings["features"] += time.perf_counter() - clock

    call_labels = {task: np.zeros(frames, np.int32) for task in labels.TASKS}
    for turn, start, end in spans:
        for task, name in (("questions", turn.question), ("symptoms", turn.symptom)):
            if name != "none":
                paint_span(call_labels[task], start, end, labels.classes(task).index(name))
    return RenderedCall(
        features=features,
        labels=call_labels,
        asr_words=recognition.words,
        transcript=" ".join(t.text for t in turns),
        duration=audio.size / rate,
        snr_db=snr,
        noise=kind,
        stage_seconds=timings,
    )
