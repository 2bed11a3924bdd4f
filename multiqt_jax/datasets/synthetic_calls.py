"""TFDS builder `synthetic_calls`: emergency-call-like dialogues, made on this machine.

Configs are `{task}-{size}`: task `questions` or `symptoms`, size `smoke` (tests,
seconds), `quick` (the main job's default) or `full`. Both tasks label the same calls:
each call is rendered once (synthesis, channel, recognition, features) into a cache
beside the dataset and both configs read it. Written as ArrayRecord, read with
`tfds.data_source`, no TensorFlow needed:

    builder = SyntheticCalls(config="questions-smoke", data_dir=DIR, file_format="array_record")
    builder.download_and_prepare()
    source = tfds.data_source("synthetic_calls/questions-smoke", data_dir=DIR)

Every record: `audio` float32 [frames, 40] log-mel at 10 ms, `labels` int32 [frames]
class ids at 10 ms, the recognised words (`asr_word`, `asr_start`, `asr_end`,
`asr_emitted` in seconds; the input pipeline turns them into character frames),
`transcript`, `fold` (0-4, for 5-fold CV), `call_id`, `duration` (s), `snr_db`, `noise`.
Same seed and size -> identical records.
"""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing
import os
import pickle
import sys
import time

import numpy as np
import tensorflow_datasets as tfds

from multiqt_jax import labels
from multiqt_jax.datasets import dialogue, render
from multiqt_jax.datasets.features import NUM_FOLDS, call_features, word_fields
from speechkit import asr, lm


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


def _cache_key(size: str, config: render.RenderConfig, seed: int, version: str) -> str:
    """Names the render cache after everything that changes the rendered calls (bump the
    builder's VERSION when the scripts or the rendering change)."""
    recognizer = dataclasses.replace(config.recognizer, language_model=None)
    settings = dataclasses.replace(config, recognizer=recognizer)
    text = repr((version, size, SIZES[size], settings, seed))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def build_language_model(size: str, path: str, seed: int = SEED) -> str:
    """The recogniser's trigram model from the "lm" phrase pool (never the calls' text)."""
    sentences = dialogue.language_model_text(np.random.default_rng([seed, 1]), SIZES[size].lm_calls)
    lm.train_arpa([asr.normalise(s) for s in sentences], path)
    return path


def _render_one(job) -> tuple[int, render.RenderedCall]:
    index, size, config, seed = job
    turns = dialogue.generate_call(
        np.random.default_rng([seed, 2, index]), SIZES[size].protocol_questions
    )
    return index, render.render_call(turns, np.random.default_rng([seed, 3, index]), config)


def render_calls(
    size: str,
    cache_dir: str,
    config: render.RenderConfig,
    seed: int = SEED,
    workers: int | None = None,
) -> list[render.RenderedCall]:
    """All calls of a size, rendered once and cached as pickles (one per call)."""
    os.makedirs(cache_dir, exist_ok=True)
    paths = [os.path.join(cache_dir, f"call-{i:05d}.pkl") for i in range(SIZES[size].calls)]
    todo = [i for i, p in enumerate(paths) if not os.path.exists(p)]
    workers = workers or min(os.cpu_count() or 1, max(1, len(todo)))
    started, totals = time.perf_counter(), {}
    if todo:
        jobs = [(i, size, config, seed) for i in todo]
        context = multiprocessing.get_context("forkserver")
        with context.Pool(workers) as pool:
            for done, (index, call) in enumerate(pool.imap_unordered(_render_one, jobs), 1):
                temporary = paths[index] + ".tmp"
                with open(temporary, "wb") as out:
                    pickle.dump(call, out)
                os.replace(temporary, paths[index])
                for stage, seconds in call.stage_seconds.items():
                    totals[stage] = totals.get(stage, 0.0) + seconds
                print(
                    f"\r[synthetic_calls/{size}] rendered {done}/{len(todo)} calls "
                    f"({time.perf_counter() - started:.0f} s)",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        print(
            f"\n[synthetic_calls/{size}] stage seconds (summed over workers): "
            + ", ".join(f"{k} {v:.1f}" for k, v in totals.items()),
            file=sys.stderr,
        )
    calls = []
    for path in paths:
        with open(path, "rb") as source:
            calls.append(pickle.load(source))
    return calls


class SyntheticCalls(tfds.core.GeneratorBasedBuilder):
    """Synthetic emergency calls for question and symptom tracking."""

    VERSION = tfds.core.Version("1.0.0")
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

    def _dataset_root(self) -> str:
        """<data_dir>/synthetic_calls, shared by every config (data_dir may point into a
        config's temporary folder while it is being prepared)."""
        root = os.path.abspath(self.data_dir)
        while os.path.basename(root) != self.name and os.path.dirname(root) != root:
            root = os.path.dirname(root)
        return root

    def _split_generators(self, dl_manager):
        config = self.builder_config
        cache = os.path.join(
            self._dataset_root(),
            "render_cache",
            f"{config.size}-"
            + _cache_key(config.size, config.render_config, SEED, str(self.VERSION)),
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
