"""The runners' shared corpus helpers: `experiments.scoring.corpora.evaluation_sources` and
`split_engine` (evaluations), `experiments.corpora` (training corpora). No corpus is
built: the engines come from the builders' configs in code, the rest from stubs."""

from __future__ import annotations

import ml_collections
import pytest

from cskws_jax.datasets import synthetic_kws
from experiments import corpora as training_corpora
from experiments.scoring import corpora, evals
from multiqt_jax.datasets import synthetic_calls


def _evaluation(split="heldout", dataset="", engines=""):
    return evals.Evaluation("x", split, dataset, True, engines)


def test_split_engine_is_the_kept_engine_or_a_synthetic_corpus_held_out_one(tmp_path):
    kws = synthetic_kws.SyntheticKws.builder_configs["smoke"].render_config.heldout_engine
    calls = synthetic_calls.SyntheticCalls.builder_configs["questions-smoke"]
    own_kws, own_calls, data_dir = "synthetic_kws/smoke", "synthetic_calls/questions-smoke", ""
    assert corpora.split_engine(_evaluation(), own_kws, data_dir) == kws
    assert corpora.split_engine(_evaluation("heldout[:50%]"), own_kws, data_dir) == kws
    assert corpora.split_engine(_evaluation(), own_calls, data_dir) == (
        calls.render_config.heldout_engine
    )
    assert corpora.split_engine(_evaluation("test"), own_kws, data_dir) is None
    assert corpora.split_engine(_evaluation("test", engines="espeak"), own_kws, data_dir) == (
        "espeak"
    )
    other = _evaluation(dataset="annotated_calls/questions")
    assert corpora.split_engine(other, own_calls, data_dir) is None


def _config(tmp_path, optional: bool) -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict({"data_dir": str(tmp_path)})
    config.evals = ml_collections.ConfigDict()
    config.evals.heldout = ml_collections.ConfigDict(
        {"split": "heldout", "dataset": "", "optional": optional}
    )
    return config


def test_an_optional_evaluation_of_an_unreadable_corpus_is_left_out(tmp_path):
    lines = []
    found = corpora.evaluation_sources(
        _config(tmp_path, True), "synthetic_kws/absent", lines.append
    )
    assert found == {} and "not readable" in lines[0]
    with pytest.raises(Exception):  # noqa: B017 - whatever TFDS raises for "not built"
        corpora.evaluation_sources(_config(tmp_path, False), "synthetic_kws/absent", print)


def test_a_runners_reason_leaves_an_optional_evaluation_out_and_stops_a_required_one(tmp_path):
    def leave_out(evaluation, corpus):
        return f"not {corpus}"

    lines = []
    optional = _config(tmp_path, True)
    assert corpora.evaluation_sources(optional, "a/b", lines.append, leave_out) == {}
    assert lines == ["config.evals.heldout: skipped, not a/b"]
    with pytest.raises(ValueError, match="config.evals.heldout: not a/b"):
        corpora.evaluation_sources(_config(tmp_path, False), "a/b", print, leave_out)


class _Builder:
    """A stand-in builder class: its name, one config in code, the builds it was asked."""

    name = "fake_corpus"
    builder_configs = {"smoke": object()}
    built: list = []

    def __init__(self, config, data_dir, file_format):
        self.args = (config, data_dir, file_format)

    def download_and_prepare(self):
        _Builder.built.append(self.args)


def test_only_a_corpus_of_the_builders_configs_in_code_is_built():
    _Builder.built.clear()
    training_corpora.build_missing("fake_corpus/smoke", _Builder, "/data")
    training_corpora.build_missing("fake_corpus/my_keywords", _Builder, "/data")  # own files
    training_corpora.build_missing("other_corpus/smoke", _Builder, "/data")
    assert _Builder.built == [("smoke", "/data", "array_record")]


def test_a_split_the_run_needs_is_named_when_the_corpus_lacks_it(monkeypatch):
    monkeypatch.setattr(
        training_corpora.prepared, "data_source", lambda name, data_dir: {"train": "T"}
    )
    assert training_corpora.splits("c/d", "", ("train",)) == {"train": "T"}
    with pytest.raises(ValueError, match=r"c/d: no 'validation' split \(has \['train'\]\)"):
        training_corpora.splits("c/d", "", ("train", "validation"))
