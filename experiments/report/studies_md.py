"""studies.md, the studies' report (`report`): the papers' claims with their verdicts,
then a section of tables and a figure per study, from the payload of
`experiments.studies` (its studies.json)."""

from __future__ import annotations

from experiments.report.claims import cell_scores
from experiments.report.markdown import header, interval_text, point_text, row
from experiments.report.markdown import mean_std_text as _ms


def report(payload: dict, paths: dict) -> str:
    """studies.md: the verdicts first, then one section per study (`paths`: {study:
    figure}, as `experiments.report.figures.study_figures` returns them)."""
    records = payload["studies"]
    lines = [
        "# Studies",
        "",
        f"Preset `{payload['preset']}`; corpora `{payload['corpora']['multiqt']}` and "
        f"`{payload['corpora']['cskws']}`"
        + "".join(f", `{name}`" for name in payload["corpora"].get("cskws_larger", ()))
        + f". MultiQT scores are mean ± std over "
        f"{payload['num_folds']} folds (each fold's model on its own test fold); AF-KWS "
        "scores are on the test split, with the 95 % bootstrap interval over test "
        "utterances where the experiment measured one. Seconds per study: "
        + ", ".join(f"{k} {v:.0f}" for k, v in payload["seconds"].items())
        + ".",
        "",
        "## The papers' claims on this data",
        "",
        *header("claim", "verdict", "evidence"),
    ]
    for claim in payload["claims"]:
        figure = f" ([figure]({claim['figure']}))" if claim["figure"] else ""
        lines.append(row(claim["claim"], f"**{claim['verdict']}**", claim["evidence"] + figure))
    lines += [
        "",
        'Verdicts: MultiQT, "holds" when the difference of means exceeds the two '
        'stds over folds together, "reversed" the other way, "not shown" within '
        "that spread; AF-KWS unknown class, a win is a mAP above the other model's "
        "95 % interval.",
        "",
    ]
    for study, section in SECTIONS.items():
        if study in records:
            lines += section(records[study], payload, paths)
    return "\n".join(lines) + "\n"


def _asr_quality(r: dict, payload: dict, paths: dict) -> list[str]:
    lines = [
        "## ASR quality: word error rate of the text stream",
        "",
        "The oracle stream is the transcript the synthesiser spoke, each word emitted "
        "at its true end (a perfect streaming recogniser); substituted streams replace "
        "that share of its words by other words of the same call. The worse "
        "recognisers hear the same call audio through a narrow-band telephone line, "
        "decode it with smaller beams, or with a unigram language model of the "
        "same text (`multiqt_jax.datasets.render.RECOGNISER_VARIANTS`). "
        "WER is measured against the oracle words over every call of the corpus. "
        "Each stream's models are trained and tested on it.",
        "",
        *header(
            "text stream | causal | WER | multimodal TIMESTEP F1 | text-only TIMESTEP F1 | "
            "multimodal INSTANCE F1 | text-only INSTANCE F1"
        ),
    ]
    for stream in r["rows"]:
        lines.append(
            row(
                stream["stream"],
                "yes" if stream["causal"] else "no",
                f"{stream['wer']:.3f}",
                *(
                    _ms(stream[m][f])
                    for f in ("timestep_f1", "instance_f1")
                    for m in ("multimodal", "text")
                ),
            )
        )
    return lines + [
        "",
        f"Audio-only (reads no text): TIMESTEP F1 {_ms(r['audio']['timestep_f1'])}.",
        *_figure("ASR quality", paths["asr_quality"]),
    ]


TEXT_LAG_NOTE = (
    "Every recognised word reaches the models this many seconds after the recogniser "
    "emitted it (trained and tested so). The audio-only model reads no text (its row "
    "repeats the base model)."
)


def _text_lag(r: dict, payload: dict, paths: dict) -> list[str]:
    return [
        "## ASR timing: word emission lag",
        "",
        TEXT_LAG_NOTE,
        "",
        *_curve_table(r["points"], r["curves"]["timestep_f1"], "TIMESTEP F1, lag"),
        "",
        "Offline text (words at their recognised times, not causal): "
        + ", ".join(f"{m} {_ms(v['timestep_f1'])}" for m, v in r["offline"].items()),
        *_figure("text lag", paths["text_lag"]),
    ]


def _noise(r: dict, payload: dict, paths: dict) -> list[str]:
    return [
        "## Noise at test time",
        "",
        "Feature-domain noise (`speechkit.augment.mix_noise`) at each SNR "
        "relative to the call's mean band energy; only the audio is degraded, "
        "the text stream stays as the corpus's recogniser produced it. "
        f"Noise-trained: {r['matched_snr_db'][0]:g}-{r['matched_snr_db'][1]:g} dB "
        "in every training call.",
        "",
        *_curve_table(r["points"], r["curves"]["timestep_f1"], "TIMESTEP F1,"),
        *_figure("noise", paths["noise"]),
    ]


def _data_size(r: dict, payload: dict, paths: dict) -> list[str]:
    lines = ["## Training-data size", "", "Share of each fold's training calls.", ""]
    lines += _curve_table(r["points"], r["curves"]["timestep_f1"], "TIMESTEP F1,")
    if r["heldout_curves"]["timestep_f1"]:
        lines += ["", "On the held-out engine's calls:", ""]
        lines += _curve_table(r["points"], r["heldout_curves"]["timestep_f1"], "TIMESTEP F1,")
    return lines + _figure("data size", paths["data_size"])


def _missing_modality(r: dict, payload: dict, paths: dict) -> list[str]:
    lines = _table_start("Missing modality at test time", "model", *r["conditions"])
    for name, scores in r["rows"].items():
        cells = [_ms(scores[c]["timestep_f1"]) if c in scores else "" for c in r["conditions"]]
        lines.append(row(name, *cells))
    return lines + ["", "(TIMESTEP F1; the single-modality models as trained, for comparison.)", ""]


def _smoothing(r: dict, payload: dict, paths: dict) -> list[str]:
    lines = _table_start(
        "INSTANCE fragmentation: minimum-duration smoothing",
        "model | min_frames | declared latency | INSTANCE P | INSTANCE R | INSTANCE F1 | "
        "TIMESTEP F1 | tracking latency median / p90",
    )
    metrics = ("instance_precision", "instance_recall", "instance_f1", "timestep_f1")
    for name in r["curves"]["instance_f1"]:
        for i, k in enumerate(r["points"]):
            lines.append(
                row(
                    name,
                    str(k),
                    f"{r['declared_latency_s'][i] * 1000:.0f} ms",
                    *(f"{r['curves'][metric][name]['mean'][i]:.3f}" for metric in metrics),
                    _latency_text(r["latency"][name][i]),
                )
            )
    return lines + [
        "",
        "Tracking latency: gold onset to the first frame labelled with the "
        "instance's class, over the found instances of every fold "
        "(`metrics.tracking_latency`).",
        *_figure("smoothing", paths["smoothing"]),
    ]


UNKNOWN_CLASS_TABLE = (
    "AF-KWS: unknown class against scale",
    "corpus | data share (utterances) | steps | afkws mAP | no-unknown mAP | "
    "afkws held-out mAP | no-unknown held-out mAP",
)
LOOKAHEAD_TABLE = (
    "AF-KWS: look-ahead",
    "delay (frames) | algorithmic latency | mAP | AP@0.05 | FRR@5 | detection latency median / p90",
)


def _unknown_class(r: dict, payload: dict, paths: dict) -> list[str]:
    lines = _table_start(*UNKNOWN_CLASS_TABLE)
    for c in r["cells"]:
        corpus = c.get("dataset", payload["corpora"]["cskws"])
        share = f"{c['train_fraction']:g} ({c['training_utterances']})"
        maps = [
            _map_text(cell_scores(c[model], key))
            for key in ("mAP", "heldout_mAP")
            for model in ("afkws", "afkws_no_unknown")
        ]
        lines.append(row(corpus, share, str(c["steps"]), *maps))
    return lines + _figure("unknown class", paths["unknown_class"])


def _lookahead(r: dict, payload: dict, paths: dict) -> list[str]:
    lines = _table_start(*LOOKAHEAD_TABLE)
    for scores in r["rows"]:
        lines.append(
            row(
                str(scores["delay"]),
                f"{scores['algorithmic_latency_s'] * 1000:.0f} ms",
                *(f"{scores[key]:.3f}" for key in ("mAP", "AP@0.05", "FRR@5")),
                _latency_text(scores["latency"]),
            )
        )
    return lines + [
        "",
        "Detection latency: emission by the streaming detector minus the "
        "keyword's true end (`metrics.detection_latency`, IoU 0.05 matches).",
        *_figure("look-ahead", paths["lookahead"]),
    ]


def _kws_noise(r: dict, payload: dict, paths: dict) -> list[str]:
    points = [p if isinstance(p, str) else f"{p:g} dB" for p in r["points"]]
    lines = _table_start("AF-KWS: noise at test time", "model", *points)
    for name, rows in r["rows"].items():
        lines.append(row(name, *(f"{scores['mAP']:.3f}" for scores in rows)))
    return lines + [
        "",
        f"(mAP. Noise-trained: every crop at {r['matched_snr_db'][0]:g}-"
        f"{r['matched_snr_db'][1]:g} dB; the base models draw 5-30 dB on half "
        "their crops.)",
        *_figure("kws noise", paths["kws_noise"]),
    ]


# study -> its section of studies.md (record, payload, figure paths -> lines), in order
SECTIONS = {
    "asr_quality": _asr_quality,
    "text_lag": _text_lag,
    "noise": _noise,
    "data_size": _data_size,
    "missing_modality": _missing_modality,
    "smoothing": _smoothing,
    "unknown_class": _unknown_class,
    "lookahead": _lookahead,
    "kws_noise": _kws_noise,
}


def _table_start(title: str, *columns: str) -> list[str]:
    """A section's heading and its table's first lines (`header`)."""
    return [f"## {title}", "", *header(*columns)]


def _figure(alt: str, path: str) -> list[str]:
    """A study's figure, set off by blank lines."""
    return ["", f"![{alt}]({path})", ""]


def _curve_table(points: list, curves: dict, title: str) -> list[str]:
    """One row per model of mean ± std at each swept point; columns "<title> <point>"."""
    lines = header("model", *(f"{title} {point_text(p)}" for p in points))
    for name, curve in curves.items():
        cells = [
            _ms({"mean": m, "std": s}) for m, s in zip(curve["mean"], curve["std"], strict=True)
        ]
        lines.append(row(name, *cells))
    return lines


def _latency_text(latency: dict) -> str:
    if latency["median_s"] is None:
        return "n/a"
    return f"{latency['median_s']:.2f} / {latency['p90_s']:.2f} s"


def _map_text(scores: dict) -> str:
    """A mAP with its bootstrap interval; "n/a" when there is none."""
    if scores["mAP"] is None:
        return "n/a"
    return f"{scores['mAP']:.3f}" + interval_text(scores.get("mAP_interval"))
