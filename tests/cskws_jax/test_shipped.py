"""The AF-KWS models that ship with the toolkit (cskws_jax.models): each loads by name,
runs from the command line, and still scores on the smoke corpus what its card says."""

import json
import os
from pathlib import Path

import pytest
import soundfile as sf

from cskws_jax import bundle, detect, models
from experiments import ship
from experiments.report import card as card_lib
from speechkit import tts


def test_the_toolkit_ships_the_top20_detector():
    assert "afkws-top20" in models.names()
    with pytest.raises(ValueError, match="no shipped AF-KWS model 'nope'; the toolkit ships"):
        models.path("nope")


@pytest.mark.parametrize("name", models.names())
def test_a_shipped_model_scores_on_the_smoke_corpus_what_its_card_says(name, smoke_build):
    data_dir, _ = smoke_build
    folder = models.path(name)
    net, _, info = bundle.load(folder)
    with open(os.path.join(folder, card_lib.CARD_JSON)) as saved:
        card = json.load(saved)
    assert card["name"] == name and list(info.labels) == card["keywords"]
    assert os.path.getsize(os.path.join(folder, "params.npz")) < 2_000_000
    check = card["smoke_check"]
    again = ship.smoke_score(folder, check["corpus"], str(data_dir))
    assert again["mAP"] == pytest.approx(check["mAP"], abs=1e-3)
    assert again["AP@0.05"] == pytest.approx(check["AP@0.05"], abs=1e-3)


def test_detect_runs_a_shipped_model_by_name(tmp_path, capsys):
    speech = tts.synthesize("there were about twenty people", tts.EspeakVoice(variant="m3"))
    audio = tmp_path / "call.wav"
    sf.write(audio, speech.waveform, 16_000)
    argv = ["--model", "afkws-top20", str(audio), "--format", "jsonl", "--all-peaks"]
    assert detect.main(argv) == 0
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {"about", "people", "twenty"} <= {d["keyword"] for d in found}


def test_the_shipped_sample_prints_only_keywords_spoken_in_it(capsys):
    """By default detect runs the model's middle operating point, says so on stderr with
    what it measured, and prints on the shipped sample only keywords spoken in it."""
    catalogue = models.CATALOGUE
    facts = json.loads((Path(catalogue.path("afkws-top20")) / "sample.json").read_text())
    argv = ["--model", "afkws-top20", catalogue.sample("afkws-top20"), "--format=jsonl"]
    assert detect.main(argv) == 0
    printed = capsys.readouterr()
    found = [json.loads(line) for line in printed.out.splitlines()]
    assert found and {d["keyword"] for d in found} <= {word for word, _, _ in facts["keywords"]}
    assert "note: operating point 5 false alarms per hour" in printed.err
    point = bundle.load(catalogue.path("afkws-top20"))[2].decoding.default_point()
    assert f"measured {point.measured.fa_per_hour:.1f} FA/h" in printed.err


def test_detect_names_the_shipped_models_or_asks_for_a_model(tmp_path, capsys):
    assert detect.main(["--model", "nope", str(tmp_path)]) == 2
    assert "--model: no shipped AF-KWS model 'nope'" in capsys.readouterr().err
    assert detect.main([str(tmp_path / "call.wav")]) == 2  # one positional: the model
    assert detect.main([]) == 2
    assert "no MODEL" in capsys.readouterr().err


def test_the_shipped_config_chooses_its_operating_points_on_a_development_slice():
    from experiments import cskws
    from experiments.configs import shipped

    config = shipped.get_config("afkws-top20")
    assert cskws.chosen_split(config, list(config.evals)) == "dev"
    assert (config.evals.dev.split, config.evals.final.split) == ("test[:800]", "test[800:]")
    with pytest.raises(ValueError, match="expected one of"):
        shipped.get_config("nope")
