"""The text a MultiQT model trained on the CTC recogniser's output reads: that
recogniser's words (and character posteriors) of a call corpus split, recognised from the
calls' stored features and cached beside the corpus.

    source = text_inputs.ctc_text(source, "synthetic_calls/questions-quick", "train",
                                  data_dir, recogniser="", posteriors=False)

The runner (`experiments.multiqt`, `config.text_recogniser` "ctc" / "ctc_posteriors")
trains and scores on it, and bundle scoring (`experiments.scoring.bundle_calls`) gives it
to a bundle whose bundle.json names that recogniser.
"""

from __future__ import annotations

import functools
import os

import jax
from jax.experimental import multihost_utils

from ctc_jax import bundle as ctc_bundle
from ctc_jax.recognise import Recogniser, cached_outputs, features_digest
from multiqt_jax.datasets.features import RecognisedBy, WithPosteriors, record_call_id

CTC = "ctc"  # config.text_recogniser: ctc_jax's recogniser (config.ctc_bundle)
CTC_POSTERIORS = "ctc_posteriors"  # the same recogniser's 20 ms character posteriors
CTC_TEXT = (CTC, CTC_POSTERIORS)  # the text_recogniser values that run config.ctc_bundle


def ctc_text(source, corpus: str, split: str, data_dir: str, recogniser: str, posteriors: bool):
    """`source` (split `split` of `corpus`) with the words of the CTC recogniser bundle at
    `recogniser` in its asr_* fields and, with `posteriors`, its character posteriors as
    the records' `text_posteriors` (what the text input then reads): recognised from the
    calls' stored features (no synthesis again) in one pass, once, and cached in
    DATA_DIR/<dataset>/<ctc_words|ctc_posteriors>/<split>-<calls digest>-<parameter
    digest>.npz (`ctc_cache_path`), so corpora holding the same calls (the MultiQT
    tasks) share it."""
    records = (source[i] for i in range(len(source)))  # each record read once
    features = {record_call_id(r): r["audio"] for r in records}
    loaded = ctc_recogniser(recogniser)
    calls = features_digest(features)
    place = (data_dir, corpus, split, calls, loaded.digest)
    words_path = ctc_cache_path(*place, "ctc_words")
    posteriors_path = ctc_cache_path(*place, "ctc_posteriors") if posteriors else None
    paths = (words_path, posteriors_path)
    words, found = _ctc_outputs(loaded, features, paths, f"{corpus} {split}")
    if not posteriors:
        return RecognisedBy(source, words)
    return WithPosteriors(RecognisedBy(source, words), found)


def ctc_cache_path(data_dir, corpus: str, split: str, calls: str, recogniser: str, kind: str):
    """Where `ctc_text` keeps a recogniser's outputs ("ctc_words" or "ctc_posteriors") for
    the calls of digest `calls` (`ctc_jax.recognise.features_digest`): beside the
    dataset's configs, named by the split and both digests."""
    dataset = corpus.split("/")[0]
    return os.path.join(data_dir, dataset, kind, f"{split}-{calls[:16]}-{recogniser[:12]}.npz")


def _ctc_outputs(loaded: Recogniser, features: dict, paths: tuple, what: str):
    """(words, posteriors or None) of the recogniser for the calls' `features` {call id:
    [frames, 40]}, cached at `paths` (words path, posteriors path or None;
    `ctc_jax.recognise.cached_outputs`; process 0 writes them, the others wait)."""
    found = None
    if jax.process_index() == 0:
        found = cached_outputs(loaded, features, *paths)
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(f"ctc outputs {what}")
    if found is None:
        found = cached_outputs(loaded, features, *paths)
    return found


@functools.cache
def ctc_recogniser(path: str) -> Recogniser:
    """The CTC recogniser bundle at `path` ("": the shipped one,
    `ctc_jax.bundle.SHIPPED`), loaded once per process."""
    return Recogniser.load(os.path.expanduser(path or ctc_bundle.SHIPPED))
