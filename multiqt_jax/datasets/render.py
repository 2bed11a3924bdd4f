"""Render a call script into a MultiQT example: audio, real ASR, features, labels.

Per call: one synthesiser speaks the whole call (`speechkit.tts`: espeak-ng, Piper or
Festival; the builder picks it, `RenderConfig.engines` / `heldout_engine`); each turn is
synthesised with the dispatcher's or the caller's voice (drawn from `ROLE_VOICES`, with
a speed perturbation), turns are joined with pauses, then `speechkit.channel.degrade`
puts it in a room and through a microphone, adds background noise at a drawn SNR and a
telephone line (wide-band by default, see `RenderConfig`). pocketsphinx then recognises
the call audio (its errors are real), and the example stores the log-mel features
(`features.FEATURES`: 40 bands, 10 ms), the timed recognised words, and labels for both
tasks at the features' frame rate, from the synthesis timings.

Stages are timed (`RenderedCall.stage_seconds`) for the build reports.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from multiqt_jax import labels
from multiqt_jax.datasets.dialogue import Turn
from multiqt_jax.datasets.features import FEATURES
from speechkit import asr, channel, checks, frontend, tts

LABEL_HOP_S = FEATURES.hop_s  # labels and audio features: one per 10 ms
DISPATCHER_VARIANTS = ("f1", "f2", "f3", "f4", "m1", "m2", "m3", "m4")
CALLER_VARIANTS = ("f5", "m5", "m6", "m7", "klatt", "klatt2", "klatt3", "whisperf")
# engine -> role -> voices. Piper has one voice: its two roles differ by drawn warps.
ROLE_VOICES = {
    "espeak": {"dispatcher": DISPATCHER_VARIANTS, "caller": CALLER_VARIANTS},
    "piper": {"dispatcher": ("joe",), "caller": ("joe",)},
    "festival": {
        "dispatcher": ("kal_diphone",),
        "caller": ("ked_diphone", "cmu_us_slt_arctic_hts"),
    },
}
BABBLE_TEXTS = ("Please hold the line.", "Unit four is on scene.", "Copy that, over.")
# SNR drawn uniformly per call (WER ~33 %). The line is wide-band: the shipped recogniser
# is a 16 kHz wide-band model, and narrow-band calls cost it ~30 points of WER (a
# mismatch a real dispatch centre's telephone model would not have).
CALL_CHANNEL = channel.ChannelConfig(
    snr_db=(15.0, 30.0),
    noise_kinds=("pink", "white", "babble"),
    telephone="wideband",
    babble_talkers=4,
    reverb_probability=0.5,  # the caller's room (the whole call, one room)
    colour_probability=0.5,  # the caller's handset
)


@dataclasses.dataclass(frozen=True)
class RenderConfig:
    """How a script becomes audio; every field is a sweepable experiment setting."""

    sample_rate: int = 16_000
    channel: channel.ChannelConfig = CALL_CHANNEL  # noise, SNR and telephone line
    pause_s: tuple[float, float] = (0.2, 0.8)  # silence between turns
    lead_s: float = 0.3  # silence before the first and after the last turn
    rate_wpm: tuple[int, int] = (150, 200)  # espeak speaking rate, drawn per voice
    pitch: tuple[int, int] = (30, 70)  # espeak pitch 0..99, drawn per voice
    tempo: tuple[float, float] = (0.85, 1.15)  # piper / festival speaking-rate factor
    warp: tuple[float, float] = (0.9, 1.1)  # speed perturbation, drawn per voice
    engines: tuple[str, ...] = ("espeak", "piper")  # speechkit.tts.ENGINES
    heldout_engine: str | None = "piper"  # speaks only the heldout calls (None: none)
    recogniser: asr.RecogniserConfig = asr.RecogniserConfig()
    features: frontend.FeatureConfig = FEATURES
    # per call and role: formants, pitch, tempo (and Piper's noises) drawn; None: none
    speaker_stage: tts.SpeakerStage | None = None

    def __post_init__(self):
        checks.require_interval("RenderConfig.pause_s", self.pause_s)
        checks.require_subset("RenderConfig.engines", self.engines, tts.ENGINES)
        if self.heldout_engine is not None:
            checks.require_choice("RenderConfig.heldout_engine", self.heldout_engine, self.engines)
        if not self.training_engines:
            raise ValueError(
                f"RenderConfig.engines: {self.engines} leaves no engine for training once "
                f"{self.heldout_engine!r} is held out"
            )
        self.speakers  # noqa: B018 - checks the speaker ranges

    @property
    def speakers(self) -> tts.SpeakerConfig:
        return tts.SpeakerConfig(
            self.rate_wpm, self.pitch, self.tempo, self.warp, self.speaker_stage
        )

    @property
    def training_engines(self) -> tuple[str, ...]:
        """The engines of the calls models train and are tested on (not the held-out one)."""
        return tuple(e for e in self.engines if e != self.heldout_engine)


@dataclasses.dataclass(frozen=True)
class RecogniserVariant:
    """Another recogniser on the same call audio (a point on the studies' WER axis)."""

    line: str = "none"  # channel.TELEPHONE_LINES: the call heard through this line first
    # "calls": the corpus's own trigram model; "unigram": a unigram model of the same
    # text (no word context); "general": pocketsphinx's general en-us model (slow)
    language_model: str = "calls"
    # (beam, word beam, phone beam) of pocketsphinx; None: the corpus recogniser's
    beams: tuple[float, float, float] | None = None

    def __post_init__(self):
        checks.require_choice("RecogniserVariant.line", self.line, channel.TELEPHONE_LINES)
        checks.require_choice(
            "RecogniserVariant.language_model", self.language_model, LANGUAGE_MODELS
        )

    def recogniser(
        self, corpus: asr.RecogniserConfig, unigram_language_model: str | None = None
    ) -> asr.RecogniserConfig:
        """The corpus's recogniser (`corpus`, its language model set) changed as this
        says; `unigram_language_model`: the unigram model's path, where it is used."""
        changes = {}
        if self.language_model == "general":
            changes["language_model"] = None
        elif self.language_model == "unigram":
            if unigram_language_model is None:
                raise ValueError("RecogniserVariant: language_model 'unigram' needs its path")
            changes["language_model"] = unigram_language_model
        if self.beams is not None:
            changes.update(zip(("beam", "word_beam", "phone_beam"), self.beams, strict=True))
        return dataclasses.replace(corpus, **changes)


LANGUAGE_MODELS = ("calls", "unigram", "general")
# Worse recognisers than the corpus's own, each on the same audio. pocketsphinx's
# defaults are beams of 1e-48 / 7e-29 / 1e-48; the corpus decodes with wider ones.
RECOGNISER_VARIANTS = {
    "narrowband": RecogniserVariant(line="narrowband"),  # an 8 kHz line, a 16 kHz model
    "small_beam": RecogniserVariant(beams=(1e-20, 1e-12, 1e-20)),
    "unigram_lm": RecogniserVariant(language_model="unigram"),
    "general_lm": RecogniserVariant(language_model="general"),
}


@dataclasses.dataclass(frozen=True)
class VariantRecognition:
    words: tuple[asr.TimedWord, ...]  # recognised words, with emission times
    stage_seconds: dict[str, float]


@dataclasses.dataclass(frozen=True)
class RenderedCall:
    features: np.ndarray  # float32 [frames, num_mels] log-mel, one frame per hop (10 ms)
    labels: dict[str, np.ndarray]  # task -> int32 [frames] class ids, on the same frames
    asr_words: tuple[asr.TimedWord, ...]  # recognised words, with emission times
    spoken_words: tuple[asr.TimedWord, ...]  # the words said, at their synthesised times
    transcript: str  # what was said
    duration: float  # seconds
    snr_db: float
    noise: str
    room: str  # speechkit.channel.Degraded.room
    engine: str  # the synthesiser that spoke the call
    speakers: tuple[str, ...]  # dispatcher's and caller's `speaker` names
    stage_seconds: dict[str, float]


def paint_span(
    frame_labels: np.ndarray, start: float, end: float, class_id: int, hop_s: float = LABEL_HOP_S
) -> None:
    """Sets the label frames (one per hop_s seconds) of [start, end) s to class_id, in place."""
    frame_labels[int(round(start / hop_s)) : int(round(end / hop_s))] = class_id


def _voice(rng: np.random.Generator, engine: str, role: str, config: RenderConfig):
    return tts.draw_speaker(rng, engine, ROLE_VOICES[engine][role], config.speakers)


def _babble_voices(rng: np.random.Generator, engine: str, config: RenderConfig) -> list[np.ndarray]:
    """Other callers' speech for babble noise: float32 waveforms at config.sample_rate."""
    return [
        tts.synthesize(text, _voice(rng, engine, "caller", config), config.sample_rate).waveform
        for text in BABBLE_TEXTS
    ]


def spoken_words(words, offset_s: float) -> list[asr.TimedWord]:
    """A turn's `tts.WordTiming`s as the recogniser would spell them (`asr.normalise_words`),
    `offset_s` seconds later, each emitted at its end (a perfect streaming recogniser). A
    timing that normalises to several words ("twenty-one" -> two) splits its span evenly."""
    out = []
    for timing in words:
        parts = asr.normalise_words(timing.text)
        step = (timing.end - timing.start) / max(len(parts), 1)
        for i, part in enumerate(parts):
            start = offset_s + timing.start + i * step
            out.append(asr.TimedWord(part, start, start + step, start + step))
    return out


@dataclasses.dataclass(frozen=True)
class CallAudio:
    waveform: np.ndarray  # float32 [samples] at RenderConfig.sample_rate, channel applied
    spans: tuple[tuple[Turn, float, float], ...]  # (turn, start s, end s) of its words
    spoken_words: tuple[asr.TimedWord, ...]  # the words said, at their synthesised times
    degraded: channel.Degraded
    speakers: tuple[str, ...]  # dispatcher's and caller's `speaker` names


def render_audio(
    turns: tuple[Turn, ...],
    rng: np.random.Generator,
    config: RenderConfig = RenderConfig(),
    engine: str = "espeak",
    timings: dict[str, float] | None = None,
) -> CallAudio:
    """Synthesis by `engine` and the channel for one script: the call audio as the
    recogniser and the features hear it. Adds its stages' seconds to `timings`."""
    if not turns:
        raise ValueError("render_call: the script has no turns")
    checks.require_choice("engine", engine, tts.ENGINES)
    timings = {} if timings is None else timings
    clock = time.perf_counter()
    voices = {role: _voice(rng, engine, role, config) for role in ("dispatcher", "caller")}
    rate = config.sample_rate
    pieces = [np.zeros(int(config.lead_s * rate), np.float32)]
    spans = []
    spoken = []
    cursor = pieces[0].size
    for i, turn in enumerate(turns):
        speech = tts.synthesize(
            turn.text, voices[turn.speaker], rate, seed=int(rng.integers(2**31))
        )
        words = speech.words
        spans.append((turn, cursor / rate + words[0].start, cursor / rate + words[-1].end))
        spoken += spoken_words(words, cursor / rate)
        pieces.append(speech.waveform)
        cursor += speech.waveform.size
        gap = config.lead_s if i == len(turns) - 1 else rng.uniform(*config.pause_s)
        pieces.append(np.zeros(int(gap * rate), np.float32))
        cursor += pieces[-1].size
    clean = np.concatenate(pieces)
    timings["synthesis"] = timings.get("synthesis", 0.0) + time.perf_counter() - clock

    clock = time.perf_counter()
    degraded = channel.degrade(
        clean,
        rng,
        config.channel,
        rate,
        babble_voices=lambda voice_rng: _babble_voices(voice_rng, engine, config),
    )
    timings["channel"] = timings.get("channel", 0.0) + time.perf_counter() - clock
    return CallAudio(
        waveform=degraded.waveform,
        spans=tuple(spans),
        spoken_words=tuple(spoken),
        degraded=degraded,
        speakers=tuple(voice.speaker for voice in voices.values()),
    )


def render_call(
    turns: tuple[Turn, ...],
    rng: np.random.Generator,
    config: RenderConfig = RenderConfig(),
    engine: str = "espeak",
) -> RenderedCall:
    """Synthesis by `engine`, channel, recognition and features for one script."""
    timings = dict.fromkeys(("synthesis", "channel", "recognition", "features"), 0.0)
    call = render_audio(turns, rng, config, engine, timings)
    audio, rate = call.waveform, config.sample_rate

    clock = time.perf_counter()
    recognition = asr.recognise(audio, config.recogniser)
    timings["recognition"] += time.perf_counter() - clock

    clock = time.perf_counter()
    features = frontend.waveform_log_mel(audio, config.features)
    frames = features.shape[0]
    timings["features"] += time.perf_counter() - clock

    call_labels = {task: np.zeros(frames, np.int32) for task in labels.TASKS}
    for turn, start, end in call.spans:
        for task, name in (("questions", turn.question), ("symptoms", turn.symptom)):
            if name != "none":
                class_id = labels.classes(task).index(name)
                paint_span(call_labels[task], start, end, class_id, config.features.hop_s)
    return RenderedCall(
        features=features,
        labels=call_labels,
        asr_words=recognition.words,
        spoken_words=call.spoken_words,
        transcript=" ".join(t.text for t in turns),
        duration=audio.size / rate,
        snr_db=call.degraded.snr_db,
        noise=call.degraded.noise,
        room=call.degraded.room,
        engine=engine,
        speakers=call.speakers,
        stage_seconds=timings,
    )


def recognise_variant(
    turns: tuple[Turn, ...],
    rng: np.random.Generator,
    config: RenderConfig,
    engine: str,
    variant: RecogniserVariant,
    unigram_language_model: str | None = None,
) -> VariantRecognition:
    """The call of `render_call(turns, rng, config, engine)` rendered again (the same
    audio, from the same generator state) and recognised by `variant`
    (`unigram_language_model`: see `RecogniserVariant.recogniser`)."""
    timings = dict.fromkeys(("synthesis", "channel", "recognition"), 0.0)
    call = render_audio(turns, rng, config, engine, timings)
    clock = time.perf_counter()
    audio = channel.through_line(call.waveform, variant.line, config.sample_rate)
    recogniser = variant.recogniser(config.recogniser, unigram_language_model)
    words = asr.recognise(audio, recogniser).words
    timings["recognition"] += time.perf_counter() - clock
    return VariantRecognition(words, timings)
