"""The recogniser that ships in the repository: it loads as a checked bundle and spells
sentences espeak-ng speaks in a call voice (no channel) within the model card's CER."""

import os

import numpy as np
import pytest

from ctc_jax import bundle, decode, recognise
from speechkit import frontend, tts

# Neither in the recogniser's corpus nor in the calls: sentences a user might try.
SENTENCES = (
    "please send help to my house",
    "my neighbour is not breathing",
    "the car is on the side of the road",
)
# The model card's bound for these sentences (espeak-ng voice m3, no channel, 0.3 s of
# silence either side as in its corpus): measured 0.187 at training.
MAX_CER = 0.25
PAD = np.zeros(4800, np.float32)


def test_the_shipped_recogniser_loads_as_a_bundle_of_the_card():
    net, _, info = bundle.load(recognise.SHIPPED)
    assert info.corpus == "recogniser_speech/quick" and net.config.num_symbols == 30
    assert os.path.exists(os.path.join(recognise.SHIPPED, "MODEL_CARD.md"))


def test_the_shipped_recogniser_spells_synthesised_sentences():
    recogniser = recognise.Recogniser.load(recognise.SHIPPED)
    voice = tts.EspeakVoice(variant="m3", rate=170, pitch=50)
    waveforms = [tts.synthesize(s, voice, 16_000).waveform for s in SENTENCES]
    features = [
        frontend.waveform_log_mel(np.concatenate([PAD, w, PAD]), bundle.FEATURES) for w in waveforms
    ]
    heard = [t.text for t in recogniser.transcribe(features)]
    rates = decode.error_rates(SENTENCES, heard)
    assert rates["cer"] <= MAX_CER, (rates, heard)


@pytest.mark.parametrize("name", ["bundle.json", "params.npz"])
def test_the_shipped_files_are_small(name):
    assert os.path.getsize(os.path.join(recognise.SHIPPED, name)) < 5_000_000
