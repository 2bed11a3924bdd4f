"""TFDS builder `keyword_free`: synthetic continuous speech without any keyword, made
here, to count a detector's false alarms on many hours.

Splits `dev` (to choose operating points on) and `final` (to measure them on), spoken by
the config's engines in turn with their test voices; the text is `KEYWORD_FREE_TEXT`.
Nothing is labelled: `other_*` are the engine's word timings and there are no keywords.
Configs `smoke` (tests) and `full` (6,600 per split, about 10.4 hours).

    builder = KeywordFree(config="full", data_dir=DIR)
    builder.download_and_prepare()
    source = tfds.data_source("keyword_free/full", data_dir=DIR)  # dev, final

Same config and seed, identical records (each utterance draws from its own generator).
Specification: docs/corpora.md#speech-without-keywords-keyword_free.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import tensorflow_datasets as tfds

from cskws_jax import keywords as keyword_list
from cskws_jax.datasets import render, synthetic_kws, text
from cskws_jax.datasets.features import Word, interval_fields, kws_features
from cskws_jax.datasets.synthetic_kws import MAX_ATTEMPTS, Utterance
from speechkit import corpus, tts

SPLITS = ("dev", "final")
SEED = 20_261_207
ENGINES = tts.ENGINE_SETS["all"][0]
KEYWORD_FREE_TEXT = text.TextConfig(
    min_words=12, max_words=40, max_keywords=0, confusable_filler_probability=0.5
)
DURATION_S = (2.0, 30.0)


@dataclasses.dataclass(frozen=True)
class SpeechJob:
    split: str
    index: int
    seed: int
    keywords: tuple[str, ...]  # barred from the text
    render_config: render.KwsRenderConfig  # one engine, no held-out one


class KeywordFreeConfig(tfds.core.BuilderConfig):
    """A `KeywordFree` config: utterances per split and the engines that take turns."""

    def __init__(self, *, utterances: int, engines: tuple[str, ...] = ENGINES, **kwargs):
        super().__init__(**kwargs)
        self.utterances, self.engines = utterances, engines

    def engine_of(self, index: int) -> str:
        """The engine that speaks utterance `index` of a split."""
        return self.engines[index % len(self.engines)]


CONFIGS = (
    KeywordFreeConfig(name="smoke", utterances=4, engines=("espeak", "piper")),  # CI's engines
    KeywordFreeConfig(name="full", utterances=6_600),
)


def render_config(engine: str) -> render.KwsRenderConfig:
    return render.KwsRenderConfig(
        engines=(engine,), heldout_engine=None, speaker_stage=tts.SpeakerStage()
    )


def render_one(job: SpeechJob) -> Utterance:
    """Text, speech (no alignment), channel and features of one utterance."""
    seconds = dict.fromkeys(("text", "synthesis", "alignment", "channel", "features"), 0.0)
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([job.seed, SPLITS.index(job.split), job.index, attempt])
        clock = time.perf_counter()
        words, _ = text.sample_utterance_text(rng, list(job.keywords), KEYWORD_FREE_TEXT)
        seconds["text"] += time.perf_counter() - clock
        spoken = render.render_utterance(words, rng, "test", job.render_config, align=False)
        for stage, spent in spoken.stage_seconds.items():
            seconds[stage] += spent
        if DURATION_S[0] <= spoken.duration <= DURATION_S[1]:
            break
    else:
        raise RuntimeError(
            f"keyword_free {job.split}[{job.index}]: no utterance within {DURATION_S} s in "
            f"{MAX_ATTEMPTS} attempts (last {spoken.duration:.2f} s)"
        )
    return synthetic_kws.cached_utterance(spoken, attempt + 1, seconds)


def report(records, keywords) -> dict:
    """What a split holds, per engine ("engine" of each record's speaker): utterances,
    hours, distinct voices, mean seconds; and over all: hours, keyword occurrences (0 by
    construction) and `text.text_report`'s share of utterances with a confusable word."""
    engines: dict[str, dict] = {}
    texts = []
    for record in records:
        speaker = _text(record["speaker"])
        engine = corpus.speaker_engine(speaker)
        entry = engines.setdefault(engine, {"utterances": 0, "seconds": 0.0, "voices": set()})
        entry["utterances"] += 1
        entry["seconds"] += float(record["duration"])
        entry["voices"].add(speaker.split(":", 1)[1].split("@", 1)[0].split("~", 1)[0])
        texts.append(_text(record["text"]).split())
    words = text.text_report(texts, keywords)
    return {
        "hours": sum(e["seconds"] for e in engines.values()) / 3600,
        "keyword_occurrences": round(words["mean_keywords"] * len(texts)),
        "confusable_filler": words["confusable_filler"],
        "engines": {
            engine: {
                "utterances": e["utterances"],
                "hours": e["seconds"] / 3600,
                "voices": len(e["voices"]),
                "mean_seconds": e["seconds"] / e["utterances"],
            }
            for engine, e in sorted(engines.items())
        },
    }


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class KeywordFree(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder):
    """Synthetic speech without keywords, from every engine, for false-alarm rates."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "dev and final splits, espeak-ng, Festival and Piper in turn"}
    BUILDER_CONFIGS = list(CONFIGS)

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=kws_features(),
            metadata=tfds.core.MetadataDict(
                keywords=list(keyword_list.load_keywords()),
                engines=list(self.builder_config.engines),
            ),
        )

    def _split_generators(self, dl_manager):
        config = self.builder_config
        keywords = tuple(keyword_list.load_keywords())
        configs = tuple(render_config(engine) for engine in config.engines)
        settings = (SEED, KEYWORD_FREE_TEXT, DURATION_S, keywords, configs)
        cache = corpus.cache_dir(self, str(self.VERSION), config.name, settings)
        for engine in config.engines:
            tts.require_engine(engine)
        generators = {}
        for split in SPLITS:
            jobs = [
                SpeechJob(split, i, SEED, keywords, render_config(config.engine_of(i)))
                for i in range(config.utterances)
            ]
            name = f"keyword_free/{config.name}"
            utterances = synthetic_kws.render_split(render_one, jobs, cache, name, split)
            generators[split] = self._generate_examples(split, utterances, keywords)
        return generators

    def _generate_examples(self, split, utterances, keywords):
        for index, utterance in enumerate(utterances):
            utterance_id = f"{split}-{index:06d}"
            words = [Word(w.word, w.start, w.end) for w in utterance.words]
            fields = interval_fields(words, keywords, utterance_id)
            if fields["keyword_valid"].any():  # the text sampler bars keywords
                raise RuntimeError(f"keyword_free {utterance_id}: a keyword in {utterance.text!r}")
            yield utterance_id, synthetic_kws.record(utterance_id, utterance, fields, 0.0)
