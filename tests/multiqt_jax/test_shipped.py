"""The MultiQT models that ship with the toolkit (multiqt_jax.models): each loads by name,
runs from the command line, and still scores on the smoke corpus what its card says."""

import json
import os

import numpy as np
import pytest
import soundfile as sf

from experiments import ship
from experiments.report import card as card_lib
from multiqt_jax import bundle, labels, models, track
from speechkit import tts

SHIPPED = ("multiqt-questions", "multiqt-questions-audio")


def test_the_toolkit_ships_the_question_trackers():
    assert set(SHIPPED) <= set(models.names())
    with pytest.raises(ValueError, match="no shipped MultiQT model 'nope'; the toolkit ships"):
        models.path("nope")


@pytest.mark.parametrize("name", models.names())
def test_a_shipped_model_scores_on_the_smoke_corpus_what_its_card_says(name, smoke_build):
    data_dir, _ = smoke_build
    folder = models.path(name)
    net, _, info = bundle.load(folder)
    with open(os.path.join(folder, card_lib.CARD_JSON)) as saved:
        card = json.load(saved)
    assert card["name"] == name and card["labels"] == list(info.labels)
    assert tuple(info.labels) == labels.classes("questions")
    assert sorted(net.config.modalities) == sorted(card["modalities"])
    assert os.path.getsize(os.path.join(folder, "params.npz")) < 2_000_000
    check = card["smoke_check"]
    again = ship.calls_smoke_score(folder, check["corpus"], str(data_dir))
    assert again["timestep_f1"] == pytest.approx(check["timestep_f1"], abs=1e-3)
    assert again["instance_f1"] == pytest.approx(check["instance_f1"], abs=1e-3)


@pytest.fixture(scope="module")
def question_call(tmp_path_factory):
    """A caller asked the dispatcher's questions, synthesised by espeak-ng."""
    voice = tts.EspeakVoice(variant="f2")
    turns = [
        "Nine one one, what is the address of your emergency?",
        "It is forty two Elm Street.",
        "Is he breathing?",
        "Yes he is breathing.",
    ]
    audio = np.concatenate(
        [np.concatenate([tts.synthesize(t, voice).waveform, np.zeros(8000)]) for t in turns]
    )
    path = tmp_path_factory.mktemp("call") / "call.wav"
    sf.write(path, audio.astype(np.float32), 16_000)
    return path


@pytest.mark.parametrize(
    ("name", "text"), [("multiqt-questions", ["--asr", "ctc"]), ("multiqt-questions-audio", [])]
)
def test_track_runs_a_shipped_model_by_name(name, text, question_call, capsys):
    assert track.main(["--model", name, str(question_call), "--format", "jsonl", *text]) == 0
    segments = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {"address", "breathing"} <= {s["label"] for s in segments}  # the two it asks


def test_track_names_the_shipped_models_or_asks_for_a_model(tmp_path, capsys):
    assert track.main(["--model", "nope", str(tmp_path)]) == 2
    assert "--model: no shipped MultiQT model 'nope'" in capsys.readouterr().err
    assert track.main([]) == 2
    err = capsys.readouterr().err
    assert "no MODEL" in err and "--model NAME" in err


@pytest.mark.parametrize(("name", "text"), [(SHIPPED[0], ["--asr", "ctc"]), (SHIPPED[1], [])])
def test_the_shipped_sample_call_gives_the_questions_asked_in_it(name, text, capsys):
    """On its shipped sample call each tracker prints the questions the dispatcher asks
    there and no other, each segment within a question's span (sample.json); today's
    models also label the first quarter second of "breathing" "conscious"."""
    folder = models.path(name)
    with open(os.path.join(folder, "sample.json")) as facts_file:
        asked = json.load(facts_file)["questions"]
    argv = ["--model", name, models.CATALOGUE.sample(name), "--format=jsonl", "--quiet", *text]
    assert track.main(argv) == 0
    segments = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {s["label"] for s in segments} == {question for question, _, _ in asked}
    for segment in segments:
        assert any(s < segment["end"] and segment["start"] < e for _, s, e in asked), segment
