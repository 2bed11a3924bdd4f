r"""The streaming character CTC recogniser: train it, score it, bundle it.

    python -m experiments.recogniser --config=experiments/configs/recogniser.py:quick \
        --workdir=/tmp/recogniser
    python -m experiments.recogniser --config=experiments/configs/recogniser.py:quick \
        --config.score_bundle=ctc_jax/models/quick --workdir=/tmp/recogniser-beam

Trains `ctc_jax.model.CtcRecogniser` on `recogniser_speech` with
`experiments.training.run_loop`, scores greedy and beam decoding with
`experiments.scoring.evaluators.transcription` beside pocketsphinx, and writes
`WORKDIR/results.json`, curves, checkpoints, the bundle and its word model;
`--config.score_bundle` scores a trained bundle without training.

Specification: docs/experiments.md#recogniser-runner.
"""

from __future__ import annotations

import functools
import os
import time

import jax
import ml_collections
import numpy as np

from ctc_jax import beam, bundle, decode, input_pipeline, model, train
from ctc_jax.recognise import Recogniser
from experiments import common, corpora, training
from experiments.scoring import corpora as scoring_corpora
from experiments.scoring import evals
from experiments.scoring.evaluators import transcription
from speechkit import asr, augment, files, lm, prepared, streaming
from speechkit.optim import OptimizerConfig

log = common.logger("recogniser")


def load_corpus(config) -> dict:
    """{"train", "validation"}: the data sources of `config.dataset` (built first when it
    is a recogniser_speech corpus and `config.build_missing`)."""
    data_dir = common.data_dir(config)
    if config.build_missing:
        from ctc_jax.datasets import recogniser_speech

        corpora.build_missing(config.dataset, recogniser_speech.RecogniserSpeech, data_dir)
    return corpora.splits(config.dataset, data_dir, ("train", "validation"))


def _texts(values) -> list[str]:
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]


def references(record) -> list[asr.TimedWord]:
    """What was said: a call's `spoken_*` words with their times, else the `text` words
    (no times)."""
    if "spoken_word" in record:
        ends = np.asarray(record["spoken_end"], float)
        starts = np.asarray(record["spoken_start"], float)
        words = _texts(record["spoken_word"])
        return [
            asr.TimedWord(w, float(s), float(e))
            for w, s, e in zip(words, starts, ends, strict=True)
        ]
    text = input_pipeline.record_text(record)
    return [asr.TimedWord(word, None, None) for word in text.split()]


def pocketsphinx_words(record) -> list[asr.TimedWord]:
    """The words pocketsphinx heard in a call (its `asr_*` fields, with emission times)."""
    fields = ("asr_start", "asr_end", "asr_emitted")
    start, end, emitted = (np.asarray(record[name], float) for name in fields)
    words = _texts(record["asr_word"])
    return [
        asr.TimedWord(w, float(s), float(e), float(t))
        for w, s, e, t in zip(words, start, end, emitted, strict=True)
    ]


def score_split(recogniser: Recogniser, source, config, word_model=None) -> dict:
    """The recogniser's scores on one split, greedy ("ctc") and, given a word model
    (`speechkit.lm.NgramModel`), beam search ("ctc_beam"); pocketsphinx's beside them
    where the records carry its words (calls)."""
    records = [source[i] for i in range(len(source))]
    features = [r["audio"] for r in records]
    transcripts = recogniser.transcribe(
        features, config.eval.batch_size, config.pipeline.pad_multiple
    )
    said = [references(r) for r in records]
    scores = {"ctc": transcription.evaluate([t.words for t in transcripts], said)}
    searched = None
    if word_model is not None:
        searched = beam_transcripts(recogniser, features, config, word_model)
        scores["ctc_beam"] = transcription.evaluate([t.words for t in searched], said)
    if records and "asr_word" in records[0]:
        heard = [pocketsphinx_words(r) for r in records]
        scores["pocketsphinx"] = transcription.evaluate(heard, said)
    scores["examples"] = [
        _example(said[i], transcripts[i], None if searched is None else searched[i])
        for i in range(min(3, len(records)))
    ]
    scores["hours"] = sum(np.shape(r["audio"])[0] for r in records) * model.AUDIO_HOP_S / 3600
    return scores


def _example(said, greedy: decode.Transcript, searched: decode.Transcript | None) -> dict:
    """One example of results.json: what was said and what each decoder wrote."""
    example = {"said": " ".join(w.word for w in said), "ctc": greedy.text}
    if searched is not None:
        example["ctc_beam"] = searched.text
    return example


def beam_transcripts(recogniser: Recogniser, features, config, word_model) -> list:
    """`ctc_jax.beam.transcribe` of each recording (`config.beam`, the word model)."""
    settings = common.build(beam.BeamConfig, config.beam, "config.beam")
    hop_s = recogniser.net.config.output_hop_s
    log_probs = recogniser.log_probabilities(
        features, config.eval.batch_size, config.pipeline.pad_multiple
    )
    return [beam.transcribe(lp, settings, hop_s=hop_s, lm=word_model) for lp in log_probs]


def training_sentences(config, train_source=None) -> list[list[str]]:
    """The words of every training utterance of `config.dataset`: the transcripts of
    `train_source` (its train split) when given, else drawn without audio as the
    recogniser_speech builder draws them (`recogniser_speech.utterance_text`)."""
    if train_source is not None:
        return [
            input_pipeline.record_text(train_source[i]).split() for i in range(len(train_source))
        ]
    from ctc_jax.datasets import recogniser_speech

    builder, _, name = config.dataset.partition("/")
    corpus = recogniser_speech.RecogniserSpeech.builder_configs.get(name)
    if builder != "recogniser_speech" or corpus is None:
        raise ValueError(
            f"config.dataset: {config.dataset!r} is not a recogniser_speech corpus, whose "
            "training text can be drawn without it; build it, or score on one"
        )
    count = recogniser_speech.SIZES[corpus.size].utterances["train"]
    return [
        recogniser_speech.utterance_text(
            "train", i, corpus.seed, corpus.text_config
        ).transcript.split()
        for i in range(count)
    ]


def word_language_model(config, sentences, path: str) -> lm.NgramModel:
    """Trains the word n-gram model of `config.word_lm` on `sentences` into the ARPA file
    `path` and reads it back."""
    settings = config.word_lm
    lm.train_arpa(sentences, path, order=settings.order, discount=settings.discount)
    return lm.read_arpa(path, unknown_log10=settings.unknown_log10)


def _log_scores(name: str, scores: dict) -> None:
    ctc = scores["ctc"]
    line = f"{name}: CTC CER {ctc['cer']:.3f} WER {ctc['wer']:.3f}"
    if "ctc_beam" in scores:
        searched = scores["ctc_beam"]
        line += f"; beam CER {searched['cer']:.3f} WER {searched['wer']:.3f}"
    if "pocketsphinx" in scores:
        line += f"; pocketsphinx WER {scores['pocketsphinx']['wer']:.3f}"
    log(line)


def streaming_rtf(net, params, seconds: float, block_outputs: int = 5) -> float:
    """Seconds of step time per second of audio, one stream fed `block_outputs` output
    frames (100 ms by default) at a time, after compilation (random features: the cost
    does not depend on the values)."""
    runner = streaming.BlockRunner.for_model(net, params, block_outputs)
    frames = runner.block_frames["audio"]
    blocks = max(1, int(seconds / (frames * model.AUDIO_HOP_S)))
    rng = np.random.default_rng(0)
    audio = rng.normal(size=(blocks, 1, frames, net.config.features)).astype(np.float32)
    state = runner.initial_state(1)
    jax.block_until_ready(runner.step({"audio": audio[0]}, None, state))  # compile
    started = time.perf_counter()
    for block in audio:
        outputs, _, state = runner.step({"audio": block}, None, state)
    jax.block_until_ready(outputs)
    return (time.perf_counter() - started) / (blocks * frames * model.AUDIO_HOP_S)


def train_recogniser(net, config, source, workdir: str, frames=None):
    """Trains `net` to `config.train.steps` (resuming from `workdir`'s checkpoints);
    returns the train state. frames: `input_pipeline.lengths(source)` when already read."""
    pipeline = common.build(
        input_pipeline.PipelineConfig,
        config.pipeline,
        "config.pipeline",
        batch_size=config.train.batch_size,
        num_epochs=config.train.steps * config.train.batch_size // len(source) + 2,
    )
    dataset = input_pipeline.batches(source, pipeline, seed=config.seed, frames=frames)
    masks = common.build(augment.MaskConfig, config.masks, "config.masks")
    optimizer = common.build(
        OptimizerConfig, config.optimizer, "config.optimizer", total_steps=config.train.steps
    )
    state = train.create_train_state(net, optimizer, jax.random.key(config.seed), dataset[0])
    train_step = jax.jit(functools.partial(train.train_step, net, masks=masks), donate_argnums=0)
    base_key = jax.random.key(config.seed + 1)

    def step(state, batches, index):
        return train_step(state, batches[0], jax.random.fold_in(base_key, index))

    return training.run_loop(
        name="recogniser",
        workdir=workdir,
        loop=config.train,
        config=config,
        state=state,
        iterators=[iter(dataset)],
        step=step,
        log=log,
        describe=lambda state: model.describe(net.config, state.params),
    )


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    if config.score_bundle:
        return score_bundle(config, workdir)
    os.makedirs(workdir, exist_ok=True)
    evals.evaluations(config)  # checked before any training
    net = model.CtcRecogniser(common.build(model.CtcConfig, config.model, "config.model"))
    sources = load_corpus(config)
    sources.update(scoring_corpora.evaluation_sources(config, config.dataset, log))
    log(", ".join(f"{name}: {len(source)} records" for name, source in sources.items()))
    started = time.perf_counter()
    frames = input_pipeline.lengths(sources["train"])
    state = train_recogniser(net, config, sources["train"], workdir, frames)
    trained = time.perf_counter() - started
    recogniser = Recogniser(net, state.params, digest="this run")
    sentences = training_sentences(config, sources["train"])
    word_model = word_language_model(config, sentences, os.path.join(workdir, "words.arpa"))
    results = {
        "dataset": config.dataset,
        "model": model.describe(net.config, state.params),
        "train_hours": float(frames.sum()) * model.AUDIO_HOP_S / 3600,
        "train_seconds": trained,
    }
    for name, source in sources.items():
        if name == "train":
            continue
        results[name] = score_split(recogniser, source, config, word_model)
        _log_scores(name, results[name])
    results["rtf"] = streaming_rtf(net, state.params, config.eval.rtf_seconds)
    bundle.save(os.path.join(workdir, "bundle"), net, jax.device_get(state.params), config.dataset)
    files.write_json(os.path.join(workdir, "results.json"), results)
    return results


def score_bundle(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Scores the trained bundle `config.score_bundle` greedy and with the beam search,
    without training (see the module docstring); writes `WORKDIR/results.json` and the
    word model `WORKDIR/words.arpa`."""
    os.makedirs(workdir, exist_ok=True)
    sources = scoring_corpora.evaluation_sources(config, config.dataset, log)
    validation = _built_split(config, "validation")
    if validation is not None:
        sources = {"validation": validation, **sources}
    if not sources:
        raise ValueError("config.score_bundle: no split to score (validation, config.evals)")
    recogniser = Recogniser.load(config.score_bundle)
    train_split = _built_split(config, "train")
    word_model = word_language_model(
        config, training_sentences(config, train_split), os.path.join(workdir, "words.arpa")
    )
    results = {"bundle": config.score_bundle, "dataset": config.dataset}
    for name, source in sources.items():
        results[name] = score_split(recogniser, source, config, word_model)
        _log_scores(name, results[name])
    files.write_json(os.path.join(workdir, "results.json"), results)
    return results


def _built_split(config, split: str):
    """`config.dataset`'s `split` when the corpus is built in the data folder, else None
    (never built here)."""
    try:
        sources = prepared.data_source(config.dataset, data_dir=common.data_dir(config))
    except Exception:  # noqa: BLE001 - TFDS raises several kinds for "not built"
        return None
    return sources.get(split)


if __name__ == "__main__":
    common.main(train_and_evaluate)
