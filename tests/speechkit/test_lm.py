"""speechkit.lm: ARPA n-gram models that normalise and load in pocketsphinx."""

import math
import pathlib
import re
from collections import defaultdict

import pytest

from speechkit import asr, error_rates, lm, tts

SENTENCES = [
    ["is", "the", "patient", "breathing"],
    ["is", "the", "patient", "awake"],
    ["is", "he", "breathing"],
    ["the", "patient", "is", "awake"],
]


def _read_arpa(path):
    prob, backoff, order = {}, {}, 0
    for line in pathlib.Path(path).read_text().splitlines():
        header = re.match(r"\\(\d)-grams:", line)
        if header:
            order = int(header.group(1))
            continue
        fields = line.split("\t")
        if order and len(fields) >= 2:
            gram = tuple(fields[1].split())
            prob[gram] = 10 ** float(fields[0])
            if len(fields) == 3:
                backoff[gram] = 10 ** float(fields[2])
    return prob, backoff


def _p(prob, backoff, gram):
    if gram in prob:
        return prob[gram]
    return backoff.get(gram[:-1], 1.0) * _p(prob, backoff, gram[1:])


def test_every_history_is_a_distribution(tmp_path):
    path = tmp_path / "model.arpa"
    sizes = lm.train_arpa(SENTENCES, path, order=3)
    assert sizes[1] == 7  # 6 words + </s>
    prob, backoff = _read_arpa(path)
    vocabulary = [g[0] for g in prob if len(g) == 1 and g[0] != lm.BOS]
    histories = defaultdict(set)
    for gram in prob:
        if len(gram) > 1:
            histories[gram[:-1]].add(gram)
    for history in [(), *histories]:
        total = sum(_p(prob, backoff, (*history, w)) for w in vocabulary)
        assert math.isclose(total, 1.0, abs_tol=1e-4), (history, total)


def test_domain_model_makes_recognition_better(tmp_path):
    path = tmp_path / "calls.arpa"
    lm.train_arpa(SENTENCES * 5, path)
    speech = tts.synthesize("Is the patient breathing?", tts.EspeakVoice(variant="m3"))
    general = asr.recognise(speech.waveform).text.split()
    domain = asr.recognise(speech.waveform, asr.RecogniserConfig(language_model=str(path))).text
    truth = ["is", "the", "patient", "breathing"]
    assert error_rates.error_rate([truth], [domain.split()]) < error_rates.error_rate(
        [truth], [general]
    )


def test_train_arpa_refuses_no_sentences():
    with pytest.raises(ValueError, match="no words"):
        lm.train_arpa([], "/tmp/never.arpa")
