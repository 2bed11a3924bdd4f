"""The MultiQT runner's (`experiments.multiqt`) settings and corpora, read from its config.

The run's corpus (`load_corpus`: the train split's calls, each with its fold) and its
evaluations' corpora (`evaluation_sources`, `config.evals`); with
`config.text_recogniser` a pocketsphinx variant's, the evaluations of the run's own
corpus are skipped (their calls would need their synthesiser again); "ctc" (and
"ctc_posteriors") recognises every split from its stored features (`with_ctc`). The
config checks and readings shared by the runner and its fold machinery
(`experiments.multiqt_folds`): model settings, text stream and alterations, text
recogniser, row names, smoothing and call batching.
"""

from __future__ import annotations

import jax
from jax.experimental import multihost_utils

from experiments import common, corpora
from experiments.scoring import calls, evals, text_inputs
from experiments.scoring import corpora as scoring_corpora
from multiqt_jax import decode, input_pipeline, labels, model
from multiqt_jax.datasets import render, synthetic_calls
from multiqt_jax.datasets.features import RecognisedBy
from speechkit import tts

NEURAL = {"multimodal": ("audio", "text"), "audio": ("audio",), "text": ("text",)}

log = common.logger("multiqt")


def load_corpus(config):
    """(source, index): the calls of the train split (every call, with its fold) and their
    `input_pipeline.CorpusIndex`; with `config.text_recogniser`, that recogniser's words
    in place of the corpus's."""
    data_dir, corpus = common.data_dir(config), own_corpus(config)
    if config.build_missing and jax.process_index() == 0:
        corpora.build_missing(corpus, synthetic_calls.SyntheticCalls, data_dir)
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices("corpus ready")
    source = corpora.splits(corpus, data_dir, ("train",))["train"]
    source = evals.of_engines(source, config.get("engines") or "", "config.engines")
    recogniser = text_recogniser(config)
    if recogniser in text_inputs.CTC_TEXT:
        source = with_ctc(config, source, corpus, "train")
    elif recogniser:
        builder = synthetic_calls.SyntheticCalls(config=corpus_name(config), data_dir=data_dir)
        words = None  # process 0 recognises; the others read its cache
        if jax.process_index() == 0:
            words = builder.variant_words(config.text_recogniser, "train")
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices("recogniser variant")
        if words is None:
            words = builder.variant_words(config.text_recogniser, "train")
        source = RecognisedBy(source, words)
    return source, input_pipeline.CorpusIndex.read(source)


def with_ctc(config, source, corpus: str, split: str):
    """`source` with the CTC recogniser `config.ctc_bundle`'s text
    (`experiments.scoring.text_inputs.ctc_text`): its words, and for text_recogniser
    "ctc_posteriors" also its character posteriors."""
    posteriors = text_recogniser(config) == text_inputs.CTC_POSTERIORS
    data_dir = common.data_dir(config)
    return text_inputs.ctc_text(source, corpus, split, data_dir, config.ctc_bundle, posteriors)


def evaluation_sources(config) -> dict:
    """{evaluation name: (source, index)} of `config.evals`
    (`experiments.scoring.corpora.evaluation_sources`), with their
    `input_pipeline.CorpusIndex`; with `config.text_recogniser` a pocketsphinx variant's,
    those of the run's own corpus are left out (their calls would need their slow
    synthesiser again), with "ctc" the recogniser's text read in (`with_ctc`)."""
    own = own_corpus(config)
    recogniser = text_recogniser(config)

    def leave_out(evaluation, corpus) -> str | None:
        if recogniser and recogniser not in text_inputs.CTC_TEXT and corpus == own:
            return f"config.text_recogniser={config.text_recogniser!r}"
        return None

    declared = {evaluation.name: evaluation for evaluation in evals.evaluations(config)}
    found = {}
    for name, source in scoring_corpora.evaluation_sources(config, own, log, leave_out).items():
        if recogniser in text_inputs.CTC_TEXT:
            source = with_ctc(config, source, declared[name].corpus(own), declared[name].split)
        found[name] = (source, input_pipeline.CorpusIndex.read(source))
    return found


def corpus_name(config) -> str:
    """The synthetic_calls config: `<task>-<size>`, `-<engine set>` unless "pip",
    `-<variation>` unless "plain"."""
    variation = config.get("variation") or "plain"
    return tts.corpus_config_name(f"{config.task}-{config.size}", config.engine_set, variation)


def own_corpus(config) -> str:
    """The run's corpus, by its TFDS name: synthetic_calls/`corpus_name`."""
    return f"synthetic_calls/{corpus_name(config)}"


def model_config(config, name: str, num_classes: int) -> model.MultiQTConfig:
    """config.model, field for field, for model `name` (its modalities; modality dropout
    only for the multimodal model)."""
    return common.build(
        model.MultiQTConfig,
        config.model,
        "config.model",
        num_classes=num_classes,
        modalities=NEURAL[name],
        modality_dropout=config.model.modality_dropout if name == "multimodal" else 0.0,
    )


TEXT_STREAMS = ("causal", "offline")


def causal_text(config) -> bool:
    """config.text_stream: "causal" (each recognised word from its emission time on, as
    a live recogniser shows it) or "offline" (at its recognised times: a non-causal
    reference that a streaming system cannot have)."""
    if config.text_stream not in TEXT_STREAMS:
        raise ValueError(
            f"config.text_stream: expected one of {TEXT_STREAMS}, got {config.text_stream!r}"
        )
    return config.text_stream == "causal"


def text_alterations(config) -> input_pipeline.TextAlterations:
    """The studies' alterations of the text input, from config.text_words ("recognised"
    or "spoken": the oracle transcript), config.text_lag_s and
    config.text_substitution_rate (`input_pipeline.TextAlterations`)."""
    try:
        return input_pipeline.TextAlterations(
            source=config.text_words,
            lag_s=config.text_lag_s,
            substitution_rate=config.text_substitution_rate,
        )
    except ValueError as error:
        raise ValueError(f"config: {error}") from None


def text_recogniser(config) -> str:
    """config.text_recogniser (the key keeps its spelling: results.json records it): ""
    (the corpus's recogniser), a name of `render.RECOGNISER_VARIANTS` or "ctc" (the CTC
    recogniser bundle `config.ctc_bundle`, on every split), whose words then replace the
    recognised ones; "ctc_posteriors": the same recogniser, the text input its 20 ms
    character posteriors (the paper's input; causal, nothing to alter)."""
    name = config.text_recogniser
    if name and name not in text_inputs.CTC_TEXT and name not in render.RECOGNISER_VARIANTS:
        raise ValueError(
            f"config.text_recogniser: expected '', {text_inputs.CTC!r}, "
            f"{text_inputs.CTC_POSTERIORS!r} or one of "
            f"{tuple(render.RECOGNISER_VARIANTS)}, got {name!r}"
        )
    if name == text_inputs.CTC_POSTERIORS and (
        config.text_stream != "causal" or config.text_substitution_rate or config.text_lag_s
    ):
        raise ValueError(
            f"config.text_recogniser: {name!r} needs text_stream='causal' and no "
            "text_substitution_rate or text_lag_s (posteriors are causal and not words)"
        )
    if name and config.text_words != "recognised":
        raise ValueError(
            f"config.text_recogniser: {name!r} needs text_words='recognised', "
            f"got {config.text_words!r}"
        )
    return name


def row_name(name: str, config) -> str:
    """A model's key in results.json and its folder: `name`, or `name@offline` when it
    reads the offline text stream (so the two never share checkpoints or scores)."""
    return name if causal_text(config) else f"{name}@offline"


def smoothing_config(config) -> decode.SmoothingConfig:
    """config.smoothing, field for field; the runner scores argmax labels, so without the
    probability thresholds (they need logits)."""
    settings = common.build(decode.SmoothingConfig, config.smoothing, "config.smoothing")
    if settings.hysteresis:
        raise ValueError("config.smoothing.enter: the runner smooths labels, not logits")
    return settings


def smoothing_record(config) -> dict:
    """The smoothing rule and its declared latency, as results.json reports them."""
    num_classes = len(labels.classes(config.task))
    net = model.MultiQT(model_config(config, "multimodal", num_classes))
    return calls.smoothing_record(smoothing_config(config), calls.output_hop_s(net))


def call_batching(config) -> calls.CallBatching:
    """How the runner batches calls for scoring: `config.train.batch_size` calls per
    batch, padded to `config.train.pad_multiple` frames, the text as the run streams it."""
    return calls.CallBatching(
        batch_size=config.train.batch_size,
        pad_multiple=config.train.pad_multiple,
        causal_text=causal_text(config),
        text=text_alterations(config),
    )
