"""TFDS builder `synthetic_calls`: emergency-call-like dialogues, made on this machine.

Configs are `{task}-{size}`: task `questions` or `symptoms`, size `smoke` (tests,
seconds), `quick` (the main job's default) or `full`. Both tasks label the same calls:
each call is rendered once (synthesis, channel, recognition, features) into a cache
beside the dataset and both configs read it. Written as ArrayRecord, read with
`tfds.data_source`, no TensorFlow needed:

    builder = SyntheticCalls(config="questions-smoke", data_dir=DIR, file_format="array_record")
    builder.download_and_prepare()
    source = tfds.data_source("synthetic_calls/questions-smoke", data_dir=DIR)

Every record: `audio` float32 [frames, 40] log-mel at 10 ms (`features.FEATURES`),
`labels` int32 [frames] class ids at 10 ms, the recognised words (`asr_word`,
`asr_start`, `asr_end`, `asr_emitted` in seconds; the input pipeline turns them into
character frames), `transcript`, `fold` (0-4, for 5-fold CV), `call_id`, `duration` (s),
`snr_db`, `noise`.
Same seed and size -> identical records.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow_datasets as tfds

from multiqt_jax import labels
from multiqt_jax.datasets import dialogue, render
from multiqt_jax.datasets.features import NUM_FOLDS, call_features, word_fields
from speechkit import asr, corpus, lm


@dataclasses.dataclass(frozen=True)
class CorpusSize:
    calls: int
    protocol_questions: tuple[int, int]  # per call (min, max)
    lm_calls: int  # scripts in the language-model text pool


SIZES = {
    "smoke": CorpusSize(calls=5, protocol_questions=(1, 2), lm_calls=200),
    "quick": CorpusSize(calls=100, protocol_questions=(3, 5), lm_calls=2000),
    "full": CorpusSize(calls=1000, protocol_questions=(3, 6), lm_calls=5000),
}
SEED = 20_201_110


class CallsConfig(tfds.core.BuilderConfig):
    def __init__(self, *, task: str, size: str, render_config=None, **kwargs):
        super().__init__(name=f"{task}-{size}", **kwargs)
        self.task, self.size = task, size
        self.render_config = render_config or render.RenderConfig()


def build_language_model(size: str, path: str, seed: int = SEED) -> str:
    """The recogniser's trigram model from the "lm" phrase pool (never the calls' text)."""
    sentences = dialogue.language_model_text(np.random.default_rng([seed, 1]), SIZES[size].lm_calls)
    lm.train_arpa([asr.normalise(s) for s in sentences], path)
    return path


def _render_one(job) -> render.RenderedCall:
    index, size, config, seed = job
    turns = dialogue.generate_call(
        np.random.default_rng([seed, 2, index]), SIZES[size].protocol_questions
    )
    return render.render_call(turns, np.random.default_rng([seed, 3, index]), config)


def render_calls(
    size: str,
    cache_dir: str,
    config: render.RenderConfig,
    seed: int = SEED,
    workers: int | None = None,
) -> list[render.RenderedCall]:
    """All calls of a size, rendered once and cached (`speechkit.corpus.render_cached`)."""
    jobs = [(i, size, config, seed) for i in range(SIZES[size].calls)]
    return corpus.render_cached(_render_one, jobs, cache_dir, f"synthetic_calls/{size}", workers)


class SyntheticCalls(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder):
    """Synthetic emergency calls for question and symptom tracking."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {
        "1.0.1": "render cache files renamed (speechkit.corpus)",
        "1.1.0": "recogniser endpoints utterances at pauses and emits words as they settle",
    }
    BUILDER_CONFIGS = [
        CallsConfig(task=task, size=size, description=f"{task} labels, {size} size")
        for size in SIZES
        for task in labels.TASKS
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=call_features(),
            metadata=tfds.core.MetadataDict(classes=list(labels.classes(self.builder_config.task))),
        )

    def _split_generators(self, dl_manager):
        config = self.builder_config
        # The recogniser's language model path is built here, not a setting.
        recognizer = dataclasses.replace(config.render_config.recognizer, language_model=None)
        settings = dataclasses.replace(config.render_config, recognizer=recognizer)
        cache = corpus.cache_dir(
            self, str(self.VERSION), config.size, SIZES[config.size], settings, SEED
        )
        lm_path = os.path.join(cache, "calls.arpa")
        if not os.path.exists(lm_path):
            os.makedirs(cache, exist_ok=True)
            build_language_model(config.size, lm_path)
        render_config = dataclasses.replace(
            config.render_config,
            recognizer=dataclasses.replace(config.render_config.recognizer, language_model=lm_path),
        )
        calls = render_calls(config.size, cache, render_config)
        return {"train": self._generate_examples(calls, config.task)}

    def _generate_examples(self, calls, task):
        for index, call in enumerate(calls):
            call_id = f"call-{index:05d}"
            yield (
                call_id,
                {
                    "audio": call.features,
                    "labels": call.labels[task],
                    **word_fields(call.asr_words),
                    "transcript": call.transcript,
                    "fold": index % NUM_FOLDS,
                    "call_id": call_id,
                    "duration": call.duration,
                    "snr_db": call.snr_db,
                    "noise": call.noise,
                },
            )
