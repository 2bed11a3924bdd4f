r"""What ships beside each model's bundle: its export folder and a sample recording.

    python -m experiments.ship_files --model afkws-top20     # export/ and the sample again
    python -m experiments.ship_files --model multiqt-questions-audio --only export

The export (`export/`, `speechkit.export`: StableHLO for `EXPORT_PLATFORMS` and ONNX)
is what the light install runs (`speechkit.shipped.Catalogue.runnable`). The sample is
`sample.wav` (16-bit PCM, 16 kHz) with `sample.json`: the text, the engine and voices,
and the spoken keywords or the asked questions with their start and end in seconds.
AF-KWS: `KWS_SENTENCE` said by espeak-ng (`KWS_VOICE`), with half a second of silence
either side. MultiQT: one synthetic call script (`multiqt_jax.datasets.dialogue`, seed
`CALL_SEED`) rendered as the corpora render calls (espeak-ng voices, the call channel).
The same seed gives the same sample on this machine (the synthesis server is
deterministic). `python -m experiments.ship` writes both when it ships a model.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import soundfile

from cskws_jax import export as kws_export
from cskws_jax import models as kws_models
from multiqt_jax import export as calls_export
from multiqt_jax import models as calls_models
from speechkit import export, files, shipped, tts

KWS_SENTENCE = "there were only a hundred of them because it was raining"
KWS_VOICE = "m3"
CALL_SEED = 0
CALL_QUESTIONS = (3, 4)  # protocol questions asked (min, max)
SAMPLE_RATE = 16000
PAD_S = 0.5
EXPORT_PLATFORMS = ("cpu", "cuda", "tpu")  # the StableHLO runs on any of them
PARTS = ("export", "sample")


def kws_sample(labels) -> tuple[np.ndarray, dict]:
    """(waveform float32 [samples] at 16 kHz, facts) of the AF-KWS sample: facts hold
    the text, the voice and `keywords`, [keyword, start s, end s] of each of `labels`
    spoken."""
    speech = tts.synthesize(KWS_SENTENCE, tts.EspeakVoice(variant=KWS_VOICE), SAMPLE_RATE)
    pad = np.zeros(int(PAD_S * SAMPLE_RATE), np.float32)
    waveform = np.concatenate([pad, np.asarray(speech.waveform, np.float32), pad])
    spoken = [
        [word.text.lower(), round(word.start + PAD_S, 3), round(word.end + PAD_S, 3)]
        for word in speech.words
        if word.text.lower() in labels
    ]
    facts = {"text": KWS_SENTENCE, "engine": "espeak", "voice": KWS_VOICE, "keywords": spoken}
    return waveform, facts


def call_sample() -> tuple[np.ndarray, dict]:
    """(waveform float32 [samples] at 16 kHz, facts) of the MultiQT sample call: facts
    hold its transcript, engine, speakers and `questions`, [question, start s, end s]
    of each asked."""
    from multiqt_jax.datasets import dialogue, render  # the synthesisers: full install

    rng = np.random.default_rng(CALL_SEED)
    turns = dialogue.generate_call(rng, CALL_QUESTIONS)
    call = render.render_audio(turns, rng, render.RenderConfig(), "espeak")
    questions = [
        [turn.question, round(start, 3), round(end, 3)]
        for turn, start, end in call.spans
        if turn.question != "none"
    ]
    facts = {
        "text": " ".join(turn.text for turn in turns),
        "engine": "espeak",
        "speakers": list(call.speakers),
        "seed": CALL_SEED,
        "questions": questions,
    }
    return np.asarray(call.waveform, np.float32), facts


def write(folder: str, waveform: np.ndarray, facts: dict) -> str:
    """Writes `sample.wav` and `sample.json` into the model folder `folder` -> the WAV."""
    path = os.path.join(folder, shipped.SAMPLE)
    with files.atomic_open(path, "wb") as out:
        soundfile.write(out, waveform, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    files.write_json(os.path.join(folder, shipped.SAMPLE_FACTS), facts)
    return path


def write_sample(folder: str, task: str) -> str:
    """Writes the sample of the model whose bundle is `folder` (of `task`, "cskws" or
    "multiqt") into it -> the WAV's path."""
    if task == "cskws":
        labels = files.load_json(os.path.join(folder, "bundle.json"))["labels"]
        return write(folder, *kws_sample(labels))
    return write(folder, *call_sample())


def write_export(folder: str, task: str) -> str:
    """Exports the bundle `folder` (of `task`) into its `export/` -> that folder."""
    exporter = {"cskws": kws_export, "multiqt": calls_export}[task]
    out = os.path.join(folder, shipped.EXPORT)
    export.export_folder(exporter.export_bundle, folder, out, platforms=EXPORT_PLATFORMS)
    return out


def write_parts(folder: str, task: str, parts=PARTS) -> list[str]:
    """Writes `parts` ("export", "sample") beside the bundle `folder` -> their paths."""
    writers = {"export": write_export, "sample": write_sample}
    return [writers[part](folder, task) for part in parts]


def main(argv=None) -> int:
    parse = argparse.ArgumentParser(
        prog="python -m experiments.ship_files",
        description="Write a shipped model's export folder and sample recording again.",
    )
    tasks = {name: "cskws" for name in kws_models.names()}
    tasks.update({name: "multiqt" for name in calls_models.names()})
    parse.add_argument("--model", choices=sorted(tasks), required=True, help="a shipped model")
    parse.add_argument("--only", choices=PARTS, default=None, help="one part (default: both)")
    args = parse.parse_args(argv)
    catalogue = kws_models.CATALOGUE if tasks[args.model] == "cskws" else calls_models.CATALOGUE
    parts = PARTS if args.only is None else (args.only,)
    for path in write_parts(catalogue.path(args.model), tasks[args.model], parts):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
