"""The papers' claims that the studies speak to, each with its verdict worked out from
the studies' records (`claims`): MultiQT's by `compare` (means against the spread over
folds), AF-KWS's unknown class by wins above the other model's 95 % interval."""

from __future__ import annotations

import numpy as np

from experiments.report.markdown import mean_std_text as _ms
from experiments.report.models import NEURAL, fold_summary


def compare(a: dict, b: dict) -> str:
    """ "holds" when a's mean exceeds b's by more than both stds together, "reversed" in
    the other direction, else "not shown" (within the spread over folds)."""
    spread = a["std"] + b["std"]
    if a["mean"] - b["mean"] > spread:
        return "holds"
    if b["mean"] - a["mean"] > spread:
        return "reversed"
    return "not shown"


def claims(records: dict, base: dict | None) -> list[dict]:
    """The papers' claims that the studies run here speak to, each with its verdict and
    the numbers behind it."""
    found = []

    def add(claim, verdict, evidence, figure=None):
        found.append({"claim": claim, "verdict": verdict, "evidence": evidence, "figure": figure})

    if base is not None:
        mm, audio, text = (fold_summary(base, m)["timestep_f1"] for m in NEURAL)
        verdict = compare(mm, audio)
        add(
            "MultiQT: text and audio together beat audio alone (in-engine)",
            verdict,
            f"TIMESTEP F1 multimodal {_ms(mm)}, audio-only {_ms(audio)}, text-only {_ms(text)}",
        )
        held = [fold_summary(base, m, heldout=True).get("timestep_f1") for m in NEURAL]
        if all(held):
            add(
                "MultiQT: text and audio together beat audio alone on an unheard synthesiser",
                compare(held[0], held[1]),
                f"held-out engine TIMESTEP F1 multimodal {_ms(held[0])}, audio-only "
                f"{_ms(held[1])}, text-only {_ms(held[2])}",
            )
    if "asr_quality" in records:
        r = records["asr_quality"]
        oracle, recognised = (
            r["rows"][0],
            next(row for row in r["rows"] if row["variant"] == "base"),
        )
        add(
            "MultiQT: better transcripts make the text modality useful",
            compare(oracle["text"]["timestep_f1"], recognised["text"]["timestep_f1"]),
            f"text-only TIMESTEP F1 {_ms(oracle['text']['timestep_f1'])} on the oracle "
            f"transcript (WER {oracle['wer']:.2f}) against "
            f"{_ms(recognised['text']['timestep_f1'])} on the recogniser's causal stream "
            f"(WER {recognised['wer']:.2f}); multimodal {_ms(oracle['multimodal']['timestep_f1'])}"
            f" against {_ms(recognised['multimodal']['timestep_f1'])}; audio-only "
            f"{_ms(r['audio']['timestep_f1'])}"
            + "".join(
                f"; {row['stream']} (WER {row['wer']:.2f}): text-only "
                f"{_ms(row['text']['timestep_f1'])}"
                for row in r["rows"]
                if row["variant"].startswith("asr-")
            ),
            "figures/asr_quality.png",
        )
    if "noise" in records:
        r = records["noise"]
        curves = r["curves"]["timestep_f1"]
        last = len(r["points"]) - 1
        at = lambda m, i: {"mean": curves[m]["mean"][i], "std": curves[m]["std"][i]}  # noqa: E731
        add(
            f"MultiQT: text keeps the multimodal model up when the audio is noisy "
            f"({r['points'][last]} dB)",
            compare(at("multimodal", last), at("audio", last)),
            f"TIMESTEP F1 at {r['points'][last]} dB: multimodal {_ms(at('multimodal', last))}, "
            f"audio-only {_ms(at('audio', last))} (clean: {_ms(at('multimodal', 0))} and "
            f"{_ms(at('audio', 0))})",
            "figures/noise.png",
        )
    if "text_lag" in records:
        r = records["text_lag"]
        text = r["curves"]["timestep_f1"]["text"]
        first = {"mean": text["mean"][0], "std": text["std"][0]}
        last = {"mean": text["mean"][-1], "std": text["std"][-1]}
        add(
            f"MultiQT: the text modality's value depends on when words arrive "
            f"({r['points'][0]:g} s against {r['points'][-1]:g} s of lag)",
            compare(first, last),
            f"text-only TIMESTEP F1 {_ms(first)} -> {_ms(last)}; offline text "
            f"{_ms(r['offline']['text']['timestep_f1'])}",
            "figures/text_lag.png",
        )
    if "missing_modality" in records:
        rows = records["missing_modality"]["rows"]
        dropout, plain = (rows[k] for k in list(rows)[:2])
        add(
            "MultiQT: modality dropout keeps the multimodal model working when its text is missing",
            compare(dropout["text missing"]["timestep_f1"], plain["text missing"]["timestep_f1"]),
            f"text missing: {_ms(dropout['text missing']['timestep_f1'])} with dropout, "
            f"{_ms(plain['text missing']['timestep_f1'])} without; audio missing: "
            f"{_ms(dropout['audio missing']['timestep_f1'])} and "
            f"{_ms(plain['audio missing']['timestep_f1'])}",
        )
    if "smoothing" in records:
        r = records["smoothing"]
        f1 = r["curves"]["instance_f1"]["multimodal"]
        best = int(np.argmax(f1["mean"]))
        add(
            "MultiQT: a causal minimum-duration rule repairs INSTANCE precision at a small "
            "latency cost",
            compare(
                {"mean": f1["mean"][best], "std": f1["std"][best]},
                {"mean": f1["mean"][0], "std": f1["std"][0]},
            ),
            f"multimodal INSTANCE F1 raw {f1['mean'][0]:.3f} -> {f1['mean'][best]:.3f} at "
            f"{r['points'][best]} frames (declared latency "
            f"{r['declared_latency_s'][best] * 1000:.0f} ms)",
            "figures/smoothing.png",
        )
    if "unknown_class" in records:
        cells = records["unknown_class"]["cells"]
        for claim, key, split in (
            ("AF-KWS: the unknown class improves mAP", "mAP", "test"),
            (
                "AF-KWS: the unknown class improves mAP on an unheard synthesiser",
                "heldout_mAP",
                "held-out engine",
            ),
        ):
            pairs = [
                (c, cell_scores(c["afkws"], key), cell_scores(c["afkws_no_unknown"], key))
                for c in cells
            ]
            pairs = [(c, a, b) for c, a, b in pairs if None not in (a["mAP"], b["mAP"])]
            if not pairs:
                continue
            signs = [
                f"{c['training_utterances']} utterances, {c['steps']} steps: "
                f"{a['mAP']:.3f} vs {b['mAP']:.3f}"
                for c, a, b in pairs
            ]
            wins = sum(_beats(a, b) for _, a, b in pairs)
            losses = sum(_beats(b, a) for _, a, b in pairs)
            verdict = (
                "holds"
                if wins == len(pairs)
                else "reversed"
                if losses == len(pairs)
                else ("depends on scale" if wins and losses else "not shown")
            )
            add(
                claim,
                verdict,
                f"{split} mAP with vs without: " + "; ".join(signs) + f" (of {len(pairs)} "
                f"cells, with it above the other's 95 % interval in {wins}, without it in "
                f"{losses})",
                "figures/unknown_class.png",
            )
    if "lookahead" in records:
        rows = records["lookahead"]["rows"]
        gain = rows[-1]["mAP"] - rows[0]["mAP"]
        add(
            "AF-KWS: more look-ahead buys accuracy at the cost of latency",
            "holds" if gain > 0.02 else "reversed" if gain < -0.02 else "not shown",
            ", ".join(
                f"delay {r['delay']}: mAP {r['mAP']:.3f} at "
                f"{r['algorithmic_latency_s'] * 1000:.0f} ms"
                for r in rows
            ),
            "figures/lookahead.png",
        )
    return found


def cell_scores(model: dict, key: str) -> dict:
    """An unknown-class cell's model entry as {"mAP", "mAP_interval"} of the test split
    (key "mAP") or the held-out engine (key "heldout_mAP")."""
    if key == "mAP":
        return model
    return {"mAP": model.get(key), "mAP_interval": model.get(f"{key}_interval")}


def _beats(a: dict, b: dict) -> bool:
    """a's mAP above b's 95 % interval (or above b's mAP where there is none)."""
    interval = b.get("mAP_interval")
    return a["mAP"] > (interval[1] if interval else b["mAP"])
