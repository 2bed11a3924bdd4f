"""The recogniser runner end to end on the smoke corpora (train, score beside pocketsphinx,
bundle), and a killed training run resuming to the same parameters."""

import json

import jax
import numpy as np
import pytest

from ctc_jax import bundle, decode
from experiments import recogniser
from experiments.configs import recogniser as recogniser_configs

pytestmark = pytest.mark.slow


def test_the_smoke_run_scores_every_split_and_saves_a_bundle(run_experiment, tmp_path):
    run_experiment("recogniser", tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["dataset"] == "recogniser_speech/smoke"
    assert {"validation", "calls", "heldout_calls"} <= set(results)
    for split in ("validation", "calls", "heldout_calls"):
        ctc, searched = results[split]["ctc"], results[split]["ctc_beam"]
        assert ctc["words"] > 0 and ctc["cer"] >= 0 and ctc["wer"] >= 0, split
        assert searched["words"] == ctc["words"] and searched["cer"] >= 0, split  # beside greedy
    assert (tmp_path / "words.arpa").is_file()  # the beam's word model, from the training text
    for split in ("calls", "heldout_calls"):  # pocketsphinx on the same audio, beside it
        heard = results[split]["pocketsphinx"]
        assert 0 < heard["wer"] < 1 and heard["lag_words"] > 0 and heard["lag_median_s"] > 0
        assert heard["words"] == results[split]["ctc"]["words"]
    assert 0 < results["rtf"] < 1 and results["train_hours"] > 0
    net, params, info = bundle.load(tmp_path / "bundle")
    assert info.corpus == "recogniser_speech/smoke"
    audio = np.zeros((1, 100, 40), np.float32)
    emit, symbol = decode.greedy(net.apply(params, {"audio": audio})[0]["logits"])
    assert emit.shape == (1, 50)


class _Killed(Exception):
    pass


def test_a_killed_run_resumes_to_the_same_parameters(smoke_build, tmp_path, monkeypatch):
    """Killed after step 4 (checkpoint at 3), the rerun restores step 3 and the
    iterator's position and ends where an uninterrupted run does, bit for bit."""
    data_dir, _ = smoke_build
    config = recogniser_configs.get_config("smoke")
    config.data_dir = str(data_dir)
    config.train.steps, config.train.checkpoint_every, config.train.log_every = 6, 3, 3
    source = recogniser.load_corpus(config)["train"]
    net = recogniser.model.CtcRecogniser(
        recogniser.common.build(recogniser.model.CtcConfig, config.model, "model")
    )
    straight = recogniser.train_recogniser(net, config, source, str(tmp_path / "straight"))

    batches = recogniser.input_pipeline.batches
    calls = []

    def dying(*args, **kwargs):
        dataset = batches(*args, **kwargs)
        if not calls:  # the first run only: its iterator dies on the fifth batch
            calls.append(1)
            original_iter = type(dataset).__iter__

            class Dying(type(dataset)):
                def __iter__(self):
                    inner = original_iter(self)
                    real_next = type(inner).__next__
                    count = [0]

                    class Wrapped(type(inner)):
                        def __next__(self):
                            count[0] += 1
                            if count[0] > 4:
                                raise _Killed
                            return real_next(self)

                    inner.__class__ = Wrapped
                    return inner

            dataset.__class__ = Dying
        return dataset

    monkeypatch.setattr(recogniser.input_pipeline, "batches", dying)
    with pytest.raises(_Killed):
        recogniser.train_recogniser(net, config, source, str(tmp_path / "resumed"))
    resumed = recogniser.train_recogniser(net, config, source, str(tmp_path / "resumed"))
    for a, b in zip(
        jax.tree_util.tree_leaves(straight.params),
        jax.tree_util.tree_leaves(resumed.params),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
