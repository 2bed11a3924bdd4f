"""TFDS builder `recogniser_speech`: transcribed utterances that train the causal
character recogniser whose outputs become MultiQT's text input.

Disjoint from everything MultiQT is scored on (text from `recogniser_text`), spoken by
the engine set's training engines with the calls' voices and channel, as MultiQT's front
end hears them. Configs are sizes (smoke, quick, full), each also as `<size>-festival`;
splits `train` and `validation`.

    builder = RecogniserSpeech(config="quick", data_dir=DIR)  # ArrayRecord by default
    builder.download_and_prepare()
    source = tfds.data_source("recogniser_speech/quick", data_dir=DIR)  # train, validation

`utterance_text` draws an utterance's text without audio; `corpus_report` gives a split's
build-report entry. Specification (text, speech, sizes, record fields, seeding):
docs/corpora.md#the-recognisers-corpus-recogniser_speech.
"""

from __future__ import annotations

import collections
import dataclasses
import time

import numpy as np
import tensorflow_datasets as tfds

from ctc_jax.datasets import recogniser_text
from multiqt_jax.datasets import render
from multiqt_jax.datasets.features import FEATURES
from speechkit import asr, channel, corpus, frontend, tts

SEED = 20_250_133  # not synthetic_calls.SEED
SPLITS = ("train", "validation")
# (split, what) -> the stream k of np.random.default_rng([seed, k, index])
STREAMS = {
    ("train", "text"): 11,
    ("train", "render"): 12,
    ("validation", "text"): 21,
    ("validation", "render"): 22,
}
SYMBOLS = asr.ALPHABET + " "  # every character of a transcript
TEXT_CONFIG = recogniser_text.RecogniserTextConfig()


@dataclasses.dataclass(frozen=True)
class RecogniserSize:
    utterances: dict[str, int]  # split -> count


# Utterances last 5.4 s on average (1.3-13.4 s; the first 130 of quick's train split), so
# quick's train split holds ~3.6 h and full's ~36 h; one utterance renders in ~0.28 s on
# one core (see docs/corpora.md).
SIZES = {
    "smoke": RecogniserSize({"train": 16, "validation": 6}),
    "quick": RecogniserSize({"train": 2400, "validation": 200}),
    "full": RecogniserSize({"train": 24000, "validation": 2000}),
}


@dataclasses.dataclass(frozen=True)
class UtteranceJob:
    """What a worker renders: utterance `index` of `split`."""

    split: str
    index: int
    seed: int
    engine: str  # a training engine of render_config
    text_config: recogniser_text.RecogniserTextConfig
    render_config: render.RenderConfig


@dataclasses.dataclass(frozen=True)
class Utterance:
    """One rendered utterance, as cached between rendering and writing records."""

    features: np.ndarray  # float32 [frames, FEATURES.num_mels]
    text: str  # the transcript (recogniser_text.transcript)
    spoken: str  # the text as the synthesiser read it
    source: str  # recogniser_text.SOURCES
    sentences: int
    duration: float  # seconds
    speaker: str  # "engine:voice@warp"
    snr_db: float
    noise: str
    room: str
    stage_seconds: dict[str, float]  # text, synthesis, channel, features


def rng(seed: int, split: str, what: str, index: int) -> np.random.Generator:
    """The generator of utterance `index`'s `what` ("text" or "render") in `split`."""
    return np.random.default_rng([seed, STREAMS[(split, what)], index])


def utterance_text(
    split: str,
    index: int,
    seed: int = SEED,
    config: recogniser_text.RecogniserTextConfig = TEXT_CONFIG,
) -> recogniser_text.UtteranceText:
    """The text of utterance `index` of `split`, as the builder draws it (no audio)."""
    return recogniser_text.draw_utterance(rng(seed, split, "text", index), config)


def speaker_voices(engine: str) -> tuple[str, ...]:
    """The voices of `engine` the calls use, both roles (`render.ROLE_VOICES`), in order."""
    roles = render.ROLE_VOICES[engine]
    return tuple(dict.fromkeys(roles["dispatcher"] + roles["caller"]))


def render_one(job: UtteranceJob) -> Utterance:
    """Text, speech, channel and features of one utterance (a worker's job)."""
    seconds = dict.fromkeys(("text", "synthesis", "channel", "features"), 0.0)
    clock = time.perf_counter()
    text = utterance_text(job.split, job.index, job.seed, job.text_config)
    seconds["text"] = time.perf_counter() - clock

    clock = time.perf_counter()
    config, draw = job.render_config, rng(job.seed, job.split, "render", job.index)
    voice = tts.draw_speaker(draw, job.engine, speaker_voices(job.engine), config.speakers)
    speech = tts.synthesize(text.spoken, voice, config.sample_rate, seed=int(draw.integers(2**31)))
    silence = np.zeros(int(config.lead_s * config.sample_rate), np.float32)
    clean = np.concatenate([silence, speech.waveform, silence])
    seconds["synthesis"] = time.perf_counter() - clock

    clock = time.perf_counter()
    degraded = channel.degrade(
        clean,
        draw,
        config.channel,
        config.sample_rate,
        babble_voices=lambda voice_rng: render._babble_voices(voice_rng, job.engine, config),
    )
    seconds["channel"] = time.perf_counter() - clock

    clock = time.perf_counter()
    features = frontend.waveform_log_mel(degraded.waveform, config.features)
    seconds["features"] = time.perf_counter() - clock
    return Utterance(
        features=features,
        text=text.transcript,
        spoken=text.spoken,
        source=text.source,
        sentences=len(text.sentences),
        duration=degraded.waveform.size / config.sample_rate,
        speaker=voice.speaker,
        snr_db=degraded.snr_db,
        noise=degraded.noise,
        room=degraded.room,
        stage_seconds=seconds,
    )


def jobs(
    size: str,
    split: str,
    render_config: render.RenderConfig,
    text_config: recogniser_text.RecogniserTextConfig = TEXT_CONFIG,
    seed: int = SEED,
) -> list[UtteranceJob]:
    """Every utterance of a size's split; the training engines take turns by index."""
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    engines = render_config.training_engines
    return [
        UtteranceJob(split, i, seed, engines[i % len(engines)], text_config, render_config)
        for i in range(SIZES[size].utterances[split])
    ]


class RecogniserSpeechConfig(tfds.core.BuilderConfig):
    """A size and an engine set (`speechkit.tts.ENGINE_SETS`): its render and text
    settings. `render_config.heldout_engine` is never spoken."""

    def __init__(self, *, size: str, engine_set: str = "pip", seed: int = SEED, **kwargs):
        if size not in SIZES:
            raise ValueError(f"size: expected one of {sorted(SIZES)}, got {size!r}")
        kwargs.setdefault("name", tts.corpus_config_name(size, engine_set))
        super().__init__(**kwargs)
        engines, heldout = tts.ENGINE_SETS[engine_set]
        self.size, self.seed = size, seed
        self.render_config = render.RenderConfig(engines=engines, heldout_engine=heldout)
        self.text_config = TEXT_CONFIG


class RecogniserSpeech(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder):
    """Transcribed synthetic utterances for the character CTC recogniser."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "first version"}
    # Where this builder lived before ctc_jax: corpora prepared then name it
    # (`speechkit.prepared.builder_modules`) and are the same records.
    FORMER_MODULES = ("multiqt_jax.datasets.recogniser_speech",)
    BUILDER_CONFIGS = [
        RecogniserSpeechConfig(
            size=size,
            engine_set=engine_set,
            description=f"{size} size, training engines of engine set {engine_set}",
        )
        for size in SIZES
        for engine_set in tts.ENGINE_SETS
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict(
                {
                    "audio": tfds.features.Tensor(
                        shape=(None, FEATURES.num_mels), dtype=np.float32
                    ),
                    "text": tfds.features.Text(),
                    "utterance_id": tfds.features.Text(),
                    "speaker": tfds.features.Text(),
                    "source": tfds.features.Text(),
                    "sentences": np.int32,
                    "duration": np.float32,
                    "snr_db": np.float32,
                    "noise": tfds.features.Text(),
                }
            ),
            metadata=tfds.core.MetadataDict(alphabet=SYMBOLS),
        )

    def _split_generators(self, dl_manager):
        config = self.builder_config
        settings = (config.render_config, config.text_config)
        cache = corpus.cache_dir(
            self, str(self.VERSION), config.size, SIZES[config.size], config.seed, settings
        )
        for engine in config.render_config.training_engines:
            tts.require_engine(engine)
        generators = {}
        for split in SPLITS:
            utterances = corpus.render_cached(
                render_one,
                jobs(config.size, split, *settings, config.seed),
                f"{cache}/{split}",
                f"recogniser_speech/{config.name} {split}",
                types=(Utterance,),
            )
            generators[split] = self._generate_examples(split, utterances)
        return generators

    def _generate_examples(self, split, utterances):
        for index, utterance in enumerate(utterances):
            utterance_id = f"{split}-{index:06d}"
            yield (
                utterance_id,
                {
                    "audio": utterance.features,
                    "text": utterance.text,
                    "utterance_id": utterance_id,
                    "speaker": utterance.speaker,
                    "source": utterance.source,
                    "sentences": utterance.sentences,
                    "duration": utterance.duration,
                    "snr_db": utterance.snr_db,
                    "noise": utterance.noise,
                },
            )


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def corpus_report(source) -> dict:
    """A split's build-report entry: utterances, hours, mean utterance duration (s),
    speakers and utterances per engine, characters (total, per second of audio, and each
    symbol's share of `SYMBOLS`), words, and the share of sentences per source."""
    seconds, words, symbols = 0.0, 0, collections.Counter()
    speakers: dict[str, set[str]] = {}
    per_engine: collections.Counter = collections.Counter()
    sentences: collections.Counter = collections.Counter()
    for index in range(len(source)):
        record = source[index]
        text, speaker = _text(record["text"]), _text(record["speaker"])
        engine = speaker.split(":", 1)[0]
        speakers.setdefault(engine, set()).add(speaker)
        per_engine[engine] += 1
        sentences[_text(record["source"])] += int(record["sentences"])
        seconds += float(record["duration"])
        words += len(text.split())
        symbols.update(text)
    characters = sum(symbols.values())
    return {
        "utterances": len(source),
        "hours": seconds / 3600,
        "mean_duration_s": seconds / max(len(source), 1),
        "engines": {
            engine: {"utterances": per_engine[engine], "speakers": len(names)}
            for engine, names in sorted(speakers.items())
        },
        "characters": characters,
        "characters_per_second": characters / max(seconds, 1e-9),
        "symbol_share": {s: symbols[s] / max(characters, 1) for s in SYMBOLS},
        "other_symbols": sorted(set(symbols) - set(SYMBOLS)),
        "words": words,
        "sentence_share": {
            s: sentences[s] / max(sum(sentences.values()), 1) for s in recogniser_text.SOURCES
        },
    }
