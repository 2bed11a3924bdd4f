"""experiments.own_keywords: a corpus of the words you type, AF-KWS trained on it (from a
trained bundle), operating points, and a bundle with its card."""

import json
import os
import shlex
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds

from cskws_jax import bundle
from cskws_jax.datasets import synthetic_kws
from experiments import common, cskws, own_keywords
from experiments.configs import own_keywords as own_keywords_config
from experiments.report import card as card_lib
from speechkit import errors

pytestmark = pytest.mark.early  # builds its own corpus: no smoke corpus needed

FROZEN_BUNDLE = Path(__file__).parents[1] / "fixtures" / "frozen" / "cskws-bundle"


def smoke_config(data_dir, **fields):
    config = own_keywords_config.get_config("smoke")
    config.keywords = "weather, morning"
    config.data_dir = str(data_dir)
    config.init = str(FROZEN_BUNDLE)  # a tiny model: the test trains in seconds
    config.train.steps = 6
    config.train.log_every = 3
    config.train.checkpoint_every = 6
    config.eval.bootstrap_resamples = 2
    for name, value in fields.items():
        section, leaf = name.split(".") if "." in name else (None, name)
        (config[section] if section else config)[leaf] = value
    return config


def test_own_keywords_end_to_end(tmp_path):
    data_dir, workdir = tmp_path / "data", tmp_path / "run"
    payload = own_keywords.train_and_evaluate(smoke_config(data_dir), str(workdir))

    assert payload["keywords"] == ["weather", "morning"]
    name = payload["dataset"]
    assert name.startswith("synthetic_kws/smoke-kw-")
    assert payload["heldout_engine"] == "piper"
    info = tfds.builder(name, data_dir=str(data_dir)).info
    assert list(info.metadata["keywords"]) == ["weather", "morning"]
    # Every labelled interval is one of the two words, and each occurrence in the text has
    # its label.
    for split, source in tfds.data_source(name, data_dir=str(data_dir)).items():
        for record in source:
            valid = np.asarray(record["keyword_valid"], bool)
            labels = np.asarray(record["keyword_label"])[valid]
            assert set(labels.tolist()) <= {0, 1}, split
            text = record["text"].decode().split()
            assert len(labels) == sum(word in ("weather", "morning") for word in text), split

    folder = workdir / "afkws" / "bundle"
    net, _, info = bundle.load(folder)
    assert list(info.labels) == ["weather", "morning"]
    frozen, _, _ = bundle.load(FROZEN_BUNDLE)
    assert net.config.stages == frozen.config.stages  # the architecture came from init
    assert net.config.num_keywords == 2
    assert len(info.decoding.operating_points) == len(smoke_config(data_dir).eval.fa_budgets)

    card = json.loads((folder / card_lib.CARD_JSON).read_text())
    assert card["keywords"] == ["weather", "morning"]
    assert card["corpus"]["engines"] == ["espeak"] and card["corpus"]["heldout_engine"] == "piper"
    assert card["corpus"]["utterances"] == synthetic_kws.SIZES["smoke"].utterances
    assert card["training"]["init"] == str(FROZEN_BUNDLE)
    for split in ("test", "heldout"):
        assert 0 <= card["scores"][split]["mAP"] <= 1
        assert card["scores"][split]["mAP"] == pytest.approx(
            payload["models"]["afkws"]["mAP"]
            if split == "test"
            else payload["models"]["afkws"]["heldout"]["mAP"]
        )
    assert "--config.keywords=" in card["command"] and "--config.init=" in card["command"]
    page = (folder / card_lib.CARD_MD).read_text()
    assert "# AF-KWS: weather, morning" in page and "## Not for" in page

    # The workdir remembers its config: other keywords there are refused before any work.
    with pytest.raises(errors.InvalidInput, match="trained with another config .*keywords"):
        own_keywords.train_and_evaluate(
            smoke_config(data_dir, keywords="tomorrow people"), str(workdir)
        )
    # A rerun finds the corpus and the scores, trains nothing, and keeps the card's times.
    again = own_keywords.train_and_evaluate(smoke_config(data_dir), str(workdir))
    assert again["models"] == payload["models"]
    assert json.loads((folder / card_lib.CARD_JSON).read_text())["seconds"] == card["seconds"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"keywords": "weather xyzzyqq"}, r"config.keywords: not in the pronouncing .*xyzzyqq"),
        ({"keywords": ""}, "config.keywords: expected 1 to"),
        ({"size": "huge"}, "config.size: expected one of"),
        ({"engine_set": "nope"}, "config.engine_set: expected one of"),
    ],
)
def test_bad_settings_stop_before_anything_is_built(tmp_path, fields, message):
    with pytest.raises(errors.InvalidInput, match=message):
        own_keywords.train_and_evaluate(smoke_config(tmp_path / "data", **fields), str(tmp_path))
    assert not os.path.exists(tmp_path / "data")


def test_corpus_names_follow_the_keywords_in_order():
    first = synthetic_kws.own_keywords_config("smoke", "weather morning")
    assert first.name == synthetic_kws.own_keywords_config("smoke", ["weather", "morning"]).name
    assert first.name != synthetic_kws.own_keywords_config("smoke", "morning weather").name
    festival = synthetic_kws.own_keywords_config("quick", "weather", "festival")
    assert festival.name.startswith("quick-festival-kw-")
    assert festival.keyword_list() == ("weather",)


def test_init_refuses_a_bundle_of_another_architecture(tmp_path):
    config = common.variant(smoke_config(tmp_path), {"models": "afkws"})  # the preset's model
    with pytest.raises(errors.InvalidInput, match=r"differs from config.model in .*stages"):
        cskws.Candidate("afkws", config, ["weather", "morning"])


def test_the_rebuild_command_names_what_differs_from_the_preset(tmp_path):
    config = smoke_config(tmp_path)
    command = own_keywords.rebuild_command(config, "/w")
    assert command.startswith(
        "python -m experiments.own_keywords --config=experiments/configs/own_keywords.py:smoke "
    )
    assert "--config.keywords='weather, morning'" in command
    assert "--config.train.steps=6" in command and command.endswith("--workdir=/w")
    assert "--config.dataset" not in command and "--config.models" not in command
    quoted = own_keywords.rebuild_command(smoke_config(tmp_path, keywords="o'clock"), "/a b")
    assert shlex.split(quoted)[-1] == "--workdir=/a b"
    assert "--config.keywords=o'clock" in shlex.split(quoted)


def test_operating_points_are_chosen_on_a_named_evaluation_or_the_test_split(tmp_path):
    config = smoke_config(tmp_path)
    assert cskws.chosen_split(config, ["heldout"]) == ""
    config.eval.choose_on = "heldout"
    assert cskws.chosen_split(config) == "heldout"
    assert cskws.chosen_split(config, ["heldout"]) == "heldout"
    with pytest.raises(errors.InvalidInput, match=r"'heldout' was skipped: .* no 'heldout' split"):
        cskws.chosen_split(config, [])
    config.eval.choose_on = "dev"
    with pytest.raises(errors.InvalidInput, match=r"choose_on: 'dev' is none of config.evals"):
        cskws.chosen_split(config)


def test_a_bad_init_bundle_is_named_before_any_corpus_is_read(tmp_path):
    config = smoke_config(tmp_path, init=str(tmp_path / "nope"))
    config.dataset = "synthetic_kws/smoke"
    with pytest.raises(errors.InvalidInput, match=r"^config.init \(.*nope\): "):
        cskws.train_and_evaluate(config, str(tmp_path / "run"))
    assert not os.path.exists(tmp_path / "run" / "afkws")
