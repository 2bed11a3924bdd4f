"""TFDS builder `synthetic_calls`: emergency-call-like dialogues, made on this machine.

Configs are `{task}-{size}` (task `questions` or `symptoms`; size `smoke`, `quick` or
`full`) and `{task}-{size}-festival`; both tasks label the same calls, rendered once into
a cache. Calls are spoken by the training engines; a `heldout` split by the held-out
engine (Piper by default). Written as ArrayRecord, read with `tfds.data_source`:

    builder = SyntheticCalls(config="questions-smoke", data_dir=DIR, file_format="array_record")
    builder.download_and_prepare()
    source = tfds.data_source("synthetic_calls/questions-smoke", data_dir=DIR)

Specification (engines, channel, scripts, record fields):
docs/corpora.md#synthetic-calls-multiqt.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow_datasets as tfds

from multiqt_jax import labels
from multiqt_jax.datasets import dialogue, render
from multiqt_jax.datasets.features import NUM_FOLDS, call_features, spoken_fields, word_fields
from speechkit import asr, checks, corpus, lm, tts


@dataclasses.dataclass(frozen=True)
class CorpusSize:
    calls: int
    protocol_questions: tuple[int, int]  # per call (min, max)
    lm_calls: int  # scripts in the language-model text pool
    heldout_calls: int  # calls of the heldout split


SIZES = {
    "smoke": CorpusSize(calls=5, protocol_questions=(1, 2), lm_calls=200, heldout_calls=2),
    "quick": CorpusSize(calls=100, protocol_questions=(3, 5), lm_calls=2000, heldout_calls=30),
    "full": CorpusSize(calls=1000, protocol_questions=(3, 6), lm_calls=5000, heldout_calls=200),
}
SEED = 20_201_110
PLAIN_SCRIPTS = dialogue.ScriptConfig()  # today's scripts (`ScriptConfig(varied=True)`)


class CallsConfig(tfds.core.BuilderConfig):
    def __init__(
        self,
        *,
        task: str,
        size: str,
        engine_set: str = "pip",
        variation: str = "plain",
        render_config=None,
        **kwargs,
    ):
        name = tts.corpus_config_name(f"{task}-{size}", engine_set, variation)
        super().__init__(name=name, **kwargs)
        self.task, self.size = task, size
        engines, heldout = tts.ENGINE_SETS[engine_set]
        self.render_config = render_config or render.RenderConfig(
            engines=engines, heldout_engine=heldout, speaker_stage=tts.variation_stage(variation)
        )
        self.script = dialogue.ScriptConfig(varied=variation == "varied")


def build_language_model(size: str, path: str, seed: int = SEED, order: int = 3) -> str:
    """The recogniser's n-gram model (trigram by default) from the "lm" phrase pool
    (never the calls' text)."""
    sentences = dialogue.language_model_text(np.random.default_rng([seed, 1]), SIZES[size].lm_calls)
    lm.train_arpa([asr.normalise_words(s) for s in sentences], path, order=order)
    return path


def _script(index: int, size: str, seed: int, script: dialogue.ScriptConfig = PLAIN_SCRIPTS):
    """(turns, render generator) of script `index`: the one source of a call's text and
    of every random draw that renders it, so a call rendered again is the same call."""
    turns = dialogue.generate_call(
        np.random.default_rng([seed, 2, index]), SIZES[size].protocol_questions, script=script
    )
    return turns, np.random.default_rng([seed, 3, index])


def scripts_report(size: str, script: dialogue.ScriptConfig = PLAIN_SCRIPTS) -> dict:
    """`dialogue.script_report` of a size's training calls' scripts (text only, fast)."""
    return dialogue.script_report(
        [_script(i, size, SEED, script)[0] for i in range(SIZES[size].calls)]
    )


def _render_one(job) -> render.RenderedCall:
    index, size, config, seed, engine, script = job
    return render.render_call(*_script(index, size, seed, script), config, engine)


def _recognise_one(job) -> render.VariantRecognition:
    index, size, config, seed, engine, script, variant, unigram_language_model = job
    return render.recognise_variant(
        *_script(index, size, seed, script), config, engine, variant, unigram_language_model
    )


def _call_jobs(
    size: str,
    config: render.RenderConfig,
    seed: int,
    split: str,
    script: dialogue.ScriptConfig = PLAIN_SCRIPTS,
) -> list[tuple]:
    """(script index, size, config, seed, engine, script config) of every call of a
    split. Training calls take the training engines in turn; heldout calls (script
    indices after the training ones) the held-out engine."""
    calls = SIZES[size].calls
    if split == "train":
        engines = config.training_engines
        return [(i, size, config, seed, engines[i % len(engines)], script) for i in range(calls)]
    if split == "heldout":
        if config.heldout_engine is None:
            raise ValueError("split 'heldout': RenderConfig.heldout_engine is None")
        return [
            (calls + i, size, config, seed, config.heldout_engine, script)
            for i in range(SIZES[size].heldout_calls)
        ]
    raise ValueError(f"split: expected 'train' or 'heldout', got {split!r}")


def render_calls(
    size: str,
    cache_dir: str,
    config: render.RenderConfig,
    seed: int = SEED,
    workers: int | None = None,
    split: str = "train",
    script: dialogue.ScriptConfig = PLAIN_SCRIPTS,
) -> list[render.RenderedCall]:
    """All calls of a size's split (from scripts as `script` says), rendered once and
    cached (`speechkit.corpus.render_cached`)."""
    return corpus.render_cached(
        _render_one,
        _call_jobs(size, config, seed, split, script),
        os.path.join(cache_dir, split),
        f"synthetic_calls/{size} {split}",
        workers,
        types=(render.RenderedCall, asr.TimedWord),
    )


def recognise_calls(
    size: str,
    cache_dir: str,
    config: render.RenderConfig,
    variant: str,
    seed: int = SEED,
    workers: int | None = None,
    split: str = "train",
    script: dialogue.ScriptConfig = PLAIN_SCRIPTS,
) -> list[tuple[asr.TimedWord, ...]]:
    """The words recogniser `variant` (a name of `render.RECOGNISER_VARIANTS`) heard in
    every call of a size's split, in `render_calls` order: the calls' audio rendered
    again and recognised, once, cached in cache_dir/<split>-asr-<variant> (the unigram
    language model in cache_dir/calls-unigram.arpa)."""
    checks.require_choice("recogniser variant", variant, tuple(render.RECOGNISER_VARIANTS))
    unigram_language_model = None
    if render.RECOGNISER_VARIANTS[variant].language_model == "unigram":
        unigram_language_model = os.path.join(cache_dir, "calls-unigram.arpa")
        if not os.path.exists(unigram_language_model):
            build_language_model(size, unigram_language_model, seed, order=1)
    jobs = [
        (*job, render.RECOGNISER_VARIANTS[variant], unigram_language_model)
        for job in _call_jobs(size, config, seed, split, script)
    ]
    done = corpus.render_cached(
        _recognise_one,
        jobs,
        os.path.join(cache_dir, f"{split}-asr-{variant}"),
        f"synthetic_calls/{size} {split} recogniser {variant}",
        workers,
        types=(render.VariantRecognition, asr.TimedWord),
    )
    return [item.words for item in done]


def call_id(split: str, index: int) -> str:
    """The record key of a split's index-th call."""
    return f"call-{index:05d}" if split == "train" else f"{split}-{index:05d}"


class SyntheticCalls(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder):
    """Synthetic emergency calls for question and symptom tracking."""

    VERSION = tfds.core.Version("2.1.0")
    RELEASE_NOTES = {
        "2.1.0": "spoken_word / spoken_start / spoken_end: the words said, at their "
        "synthesised times (an oracle transcript)",
        "2.0.0": "several synthesisers, speed perturbation, rooms and microphones; a "
        "heldout split spoken by an engine never heard in train",
        "1.0.1": "render cache files renamed (speechkit.corpus)",
        "1.1.0": "recogniser endpoints utterances at pauses and emits words as they settle",
    }
    BUILDER_CONFIGS = [
        CallsConfig(
            task=task,
            size=size,
            engine_set=engine_set,
            variation=variation,
            description=f"{task} labels, {size} size, engine set {engine_set}, {variation} speech",
        )
        for size in SIZES
        for task in labels.TASKS
        for engine_set in tts.ENGINE_SETS
        for variation in tts.VARIATIONS
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=call_features(with_spoken_words=True),
            metadata=tfds.core.MetadataDict(classes=list(labels.classes(self.builder_config.task))),
        )

    def render_setup(self) -> tuple[str, render.RenderConfig]:
        """(render cache folder, render config with the recogniser's language model) of
        this config; builds the language model on first use."""
        config = self.builder_config
        # The recogniser's language model path is built here, not a setting.
        recogniser = dataclasses.replace(config.render_config.recogniser, language_model=None)
        settings = dataclasses.replace(config.render_config, recogniser=recogniser)
        cache = corpus.cache_dir(
            self, str(self.VERSION), config.size, SIZES[config.size], settings, SEED, config.script
        )
        lm_path = os.path.join(cache, "calls.arpa")
        if not os.path.exists(lm_path):
            os.makedirs(cache, exist_ok=True)
            build_language_model(config.size, lm_path)
        return cache, dataclasses.replace(
            config.render_config,
            recogniser=dataclasses.replace(config.render_config.recogniser, language_model=lm_path),
        )

    def variant_words(self, variant: str, split: str = "train") -> dict[str, tuple]:
        """call_id -> the `asr.TimedWord`s that recogniser `variant`
        (`render.RECOGNISER_VARIANTS`) heard in that call of `split`: the same audio as
        the records', recognised again (`recognise_calls`; computed on first use, about
        as long as the split's own rendering, then cached beside the corpus)."""
        cache, render_config = self.render_setup()
        config = self.builder_config
        words = recognise_calls(
            config.size, cache, render_config, variant, split=split, script=config.script
        )
        return {call_id(split, i): call_words for i, call_words in enumerate(words)}

    def _split_generators(self, dl_manager):
        config = self.builder_config
        cache, render_config = self.render_setup()
        for engine in render_config.engines:
            tts.require_engine(engine)
        splits = ("train", "heldout") if render_config.heldout_engine else ("train",)
        return {
            split: self._generate_examples(
                render_calls(config.size, cache, render_config, split=split, script=config.script),
                config.task,
                split,
            )
            for split in splits
        }

    def _generate_examples(self, calls, task, split="train"):
        for index, call in enumerate(calls):
            key = call_id(split, index)
            yield (
                key,
                {
                    "audio": call.features,
                    "labels": call.labels[task],
                    **word_fields(call.asr_words),
                    **spoken_fields(call.spoken_words),
                    "transcript": call.transcript,
                    "fold": index % NUM_FOLDS,
                    "call_id": key,
                    "duration": call.duration,
                    "snr_db": call.snr_db,
                    "noise": call.noise,
                    "speakers": "|".join(call.speakers),
                },
            )
