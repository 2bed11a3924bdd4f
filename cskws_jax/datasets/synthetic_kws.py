"""TFDS builder `synthetic_kws`: continuous synthetic speech with keywords, made here.

Each utterance is 2-10 s of text sampled from pocketsphinx's trigram model with 0-3 of
the 20 keywords (`cskws_jax.keywords`), spoken by one of several synthesisers, with word
intervals from forced alignment cross-checked against the engine's own word timings,
then a room, a microphone, noise, gain and optionally a telephone line. Splits `train`,
`test` (voices never used in `train`) and `heldout` (the held-out engine). Configs are
sizes (smoke, quick, medium, large, full) and engine sets (`-festival`, `-no-espeak`, ...).

    builder = SyntheticKws(config="quick", data_dir=DIR, file_format="array_record")
    builder.download_and_prepare()
    source = tfds.data_source("synthetic_kws/quick", data_dir=DIR)  # train, test, heldout

Records follow `cskws_jax.datasets.features`; same size and seed -> identical records
(specification: docs/corpora.md#keyword-spotting-corpora-cs-kws).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time

import numpy as np
import tensorflow_datasets as tfds

from cskws_jax import keywords as keyword_list
from cskws_jax.datasets import render, text
from cskws_jax.datasets.features import FEATURES, Word, interval_fields, kws_features
from speechkit import corpus, frontend, tts

SPLITS = render.SPLITS  # "heldout" only when the render config holds an engine out
SEED = 20_220_808
MAX_ATTEMPTS = 10  # text redraws for an utterance outside duration_s


@dataclasses.dataclass(frozen=True)
class KwsSize:
    utterances: dict[str, int]  # split -> count


SIZES = {
    "smoke": KwsSize({"train": 8, "test": 4, "heldout": 4}),
    "quick": KwsSize({"train": 640, "test": 160, "heldout": 160}),
    # quick's test and heldout utterances (each utterance draws from its own generator,
    # so the same index is the same utterance) under 4x its training utterances, of which
    # quick's are the first 640: a larger-data point scored on the same test audio
    "medium": KwsSize({"train": 2560, "test": 160, "heldout": 160}),
    "full": KwsSize({"train": 8000, "test": 2000, "heldout": 2000}),
    # medium's training utterances under a test split of about 3.2 hours (quick's 160
    # first) and 4x quick's heldout: a development part of the test split to choose
    # operating points on (its first 800 utterances, about 1.1 hours) and about 2.1 hours
    # to measure them on; the shipped AF-KWS model's corpus (experiments/configs/shipped.py)
    "large": KwsSize({"train": 2560, "test": 2400, "heldout": 640}),
}


@dataclasses.dataclass(frozen=True)
class Utterance:
    """One rendered utterance, as cached between rendering and writing records."""

    features: np.ndarray  # float32 [frames, FEATURES.num_mels]
    words: tuple[render.WordInterval, ...]
    text: str
    duration: float  # seconds
    speaker: str  # "engine:voice@warp" (speechkit.tts voices' `speaker`)
    snr_db: float
    noise: str
    room: str
    attempts: int  # text draws until the duration fitted and every interval was trusted
    stage_seconds: dict[str, float]  # text, synthesis, alignment, channel, features


@dataclasses.dataclass(frozen=True)
class UtteranceJob:
    split: str
    index: int
    seed: int
    keywords: tuple[str, ...]
    duration_s: tuple[float, float]
    text_config: text.TextConfig
    render_config: render.KwsRenderConfig


def render_one(job: UtteranceJob) -> Utterance:
    """Text, speech, intervals, channel and features of one utterance (a worker's job)."""
    seconds = dict.fromkeys(("text", "synthesis", "alignment", "channel", "features"), 0.0)
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([job.seed, SPLITS.index(job.split), job.index, attempt])
        clock = time.perf_counter()
        words, _ = text.sample_utterance_text(rng, list(job.keywords), job.text_config)
        seconds["text"] += time.perf_counter() - clock
        spoken = render.render_utterance(words, rng, job.split, job.render_config)
        for stage, spent in spoken.stage_seconds.items():
            seconds[stage] += spent
        trusted = all(w.source != "estimate" for w in spoken.words)
        if trusted and job.duration_s[0] <= spoken.duration <= job.duration_s[1]:
            break
    else:
        raise RuntimeError(
            f"synthetic_kws {job.split}[{job.index}]: no utterance within {job.duration_s} s "
            f"with every word interval trusted in {MAX_ATTEMPTS} attempts (last "
            f"{spoken.duration:.2f} s, trusted: {trusted}); widen duration_s or change "
            "TextConfig.min_words / max_words"
        )
    return cached_utterance(spoken, attempt + 1, seconds)


def cached_utterance(spoken: render.RenderedUtterance, attempts: int, seconds: dict) -> Utterance:
    """The `Utterance` of a rendered one: its log-mel features (their time added to
    `seconds["features"]`) and what it was."""
    clock = time.perf_counter()
    features = frontend.waveform_log_mel(spoken.waveform, FEATURES)
    seconds["features"] += time.perf_counter() - clock
    return Utterance(
        features=features,
        words=spoken.words,
        text=spoken.text,
        duration=spoken.duration,
        speaker=spoken.voice.speaker,
        snr_db=spoken.snr_db,
        noise=spoken.noise,
        room=spoken.room,
        attempts=attempts,
        stage_seconds=seconds,
    )


class SyntheticKwsBuilderConfig(tfds.core.BuilderConfig):
    """A TFDS builder config of `SyntheticKws` (a corpus size, its keywords and render
    settings; the model's config is `cskws_jax.config.AfKwsConfig`). `name` defaults to
    the size; `keywords` (class order) to the embedded list (`cskws_jax.keywords`)."""

    def __init__(
        self,
        *,
        size: str,
        render_config: render.KwsRenderConfig | None = None,
        text_config: text.TextConfig | None = None,
        duration_s: tuple[float, float] = (2.0, 10.0),
        seed: int = SEED,
        keywords: tuple[str, ...] | None = None,
        **kwargs,
    ):
        if size not in SIZES:
            raise ValueError(f"size: expected one of {sorted(SIZES)}, got {size!r}")
        kwargs.setdefault("name", size)
        super().__init__(**kwargs)
        self.size, self.duration_s, self.seed = size, duration_s, seed
        self.render_config = render_config or render.KwsRenderConfig()
        self.text_config = text_config or text.TextConfig()
        self.keywords = None if keywords is None else tuple(keywords)

    def keyword_list(self) -> tuple[str, ...]:
        """The corpus's keywords in class order."""
        return tuple(keyword_list.load_keywords()) if self.keywords is None else self.keywords


OWN_KEYWORDS_TAG = "-kw-"


def own_keywords_config(size: str, keywords, engine_set: str = "pip") -> SyntheticKwsBuilderConfig:
    """The `SyntheticKws` config of a size and engine set (`render.KWS_ENGINE_SETS`) whose
    keywords are `keywords` (checked by `keyword_list.check_keywords`), named
    `<size>[-<engine set>]-kw-<8 hex digits of the keywords>`. TFDS reads the prepared
    corpus back by that name (`tfds.data_source("synthetic_kws/" + name, data_dir=...)`)
    from its files, as it reads any config it has no code for."""
    keywords = keyword_list.check_keywords(keywords)
    engines, heldout = render.KWS_ENGINE_SETS[engine_set]
    digest = hashlib.sha256(" ".join(keywords).encode()).hexdigest()[:8]
    return SyntheticKwsBuilderConfig(
        size=size,
        name=f"{render.kws_config_name(size, engine_set)}{OWN_KEYWORDS_TAG}{digest}",
        render_config=render.KwsRenderConfig(engines=engines, heldout_engine=heldout),
        keywords=keywords,
        description=f"{size} size, keywords {', '.join(keywords)}, engines "
        f"{', '.join(engines)} ({heldout} held out)",
    )


class SyntheticKws(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder):
    """Synthetic continuous speech with keyword intervals, for CS-KWS."""

    VERSION = tfds.core.Version("2.0.0")  # bump when text or rendering change
    RELEASE_NOTES = {
        "2.0.0": "several synthesisers, speed perturbation, rooms and microphones; a "
        "heldout split spoken by an engine never heard in train or test",
    }
    BUILDER_CONFIGS = [
        SyntheticKwsBuilderConfig(
            size=size,
            name=render.kws_config_name(size, engine_set, variation),
            render_config=render.KwsRenderConfig(
                engines=engines,
                heldout_engine=heldout,
                speaker_stage=tts.variation_stage(variation),
            ),
            text_config=text.VARIED_TEXT if variation == "varied" else text.TextConfig(),
            description=f"{size} size, engines {', '.join(engines)} ({heldout} held out), "
            f"{variation} speech",
        )
        for size in SIZES
        for engine_set, (engines, heldout) in render.KWS_ENGINE_SETS.items()
        for variation in tts.VARIATIONS
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=kws_features(),
            metadata=tfds.core.MetadataDict(
                keywords=list(self.builder_config.keyword_list()),
                heldout_engine=self.builder_config.render_config.heldout_engine,
            ),
        )

    def _split_generators(self, dl_manager):
        config = self.builder_config
        keywords = config.keyword_list()
        settings = (config.duration_s, config.text_config, config.render_config, keywords)
        cache = corpus.cache_dir(
            self, str(self.VERSION), config.size, SIZES[config.size], config.seed, settings
        )
        generators = {}
        splits = SPLITS if config.render_config.heldout_engine else SPLITS[:2]
        for engine in config.render_config.engines:
            tts.require_engine(engine)
        for split in splits:
            jobs = [
                UtteranceJob(split, i, config.seed, keywords, *settings[:3])
                for i in range(SIZES[config.size].utterances[split])
            ]
            utterances = render_split(
                render_one, jobs, cache, f"synthetic_kws/{config.name}", split
            )
            generators[split] = self._generate_examples(split, utterances, keywords)
        return generators

    def _generate_examples(self, split, utterances, keywords):
        for index, utterance in enumerate(utterances):
            utterance_id = f"{split}-{index:06d}"
            words = [Word(w.word, w.start, w.end) for w in utterance.words]
            sources = [w.source for w in utterance.words]
            fields = interval_fields(words, keywords, utterance_id)
            aligned = sources.count("alignment") / len(sources)
            yield utterance_id, record(utterance_id, utterance, fields, aligned)


def render_split(render_one, jobs, cache: str, name: str, split: str) -> list[Utterance]:
    """`render_one(job)` of every job of a split, cached under `cache/split`."""
    types = (Utterance, render.WordInterval)
    return corpus.render_cached(
        render_one, jobs, f"{cache}/{split}", f"{name} {split}", types=types
    )


def record(utterance_id: str, utterance: Utterance, intervals: dict, aligned: float) -> dict:
    """A KWS record (`features.kws_features`) of an utterance and its interval fields."""
    return {
        "audio": utterance.features,
        **intervals,
        "text": utterance.text,
        "duration": utterance.duration,
        "utterance_id": utterance_id,
        "speaker": utterance.speaker,
        "snr_db": utterance.snr_db,
        "noise": utterance.noise,
        "aligned_fraction": aligned,
    }
