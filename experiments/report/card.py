"""Model cards: what a trained bundle was trained on, how to rebuild it, how well it
scored where, and what it is not for, beside the bundle as card.json and card.md.

    card = kws_card(name, entry, run)     # a results.json model entry and the run's facts
    card = calls_card(name, scores, run)  # a MultiQT bundle's scores and the run's facts
    write(bundle_folder, card)            # bundle_folder/card.json, bundle_folder/card.md

The bundle loaders read bundle.json and params.npz only; the card is for people (and
for tests that compare a rebuilt model's scores with it).
"""

from __future__ import annotations

import os

from experiments.report import markdown
from experiments.report.models import KWS_NAMES, MULTIQT_NAMES
from speechkit import files

CARD_JSON, CARD_MD = "card.json", "card.md"
LEFT_OUT_HEARD = (
    " Every engine trained it: its recipe's leave-one-engine-out figures are the only "
    "measure here of how it hears a voice from outside its training."
)


def kws_not_for(chosen_on: str, splits, left_out: bool = False) -> list[str]:
    """What an AF-KWS model of this toolkit is not for; `chosen_on`: the split its operating
    points were chosen on; `splits`: the splits it was scored on; `left_out`: whether the
    card has its recipe's leave-one-engine-out figures."""
    if chosen_on != "test":
        chosen = f"the operating points were chosen on the {chosen_on} split and measured on "
        chosen += "the others"
    else:
        chosen = "the operating points were chosen on the test split their test figures are "
        chosen += "read on (met there by construction)"
        if len(splits) > 1:
            chosen += "; the other splits' figures are the out-of-sample check"
    heard = (
        " The held-out engine's score is the only measure here of how it hears a voice from "
        "outside its training."
        if "heldout" in splits
        else LEFT_OUT_HEARD
        if left_out
        else " It was not scored on an engine it never heard."
    )
    return [
        "Recorded speech: it was trained and scored on synthetic speech only (the engines "
        "named above, through simulated rooms, microphones and noise)." + heard,
        f"A false-alarm rate promised on your audio: {chosen}, all on synthetic speech.",
        "Decisions about people, or always-on use, without an evaluation on your own "
        "recordings (python -m experiments.evaluate scores a bundle on a folder of them).",
    ]


def kws_card(name: str, entry: dict, run: dict, left_out: list[dict] | None = None) -> dict:
    """The card of an AF-KWS model: `entry` is its results.json entry
    (`experiments.cskws`: scores, "intervals", the held-out split's scores,
    "operating_points", "seconds"); `run` the facts the results do not hold: "keywords",
    "corpus" (name, size, engines, held-out engine, utterances per split),
    "training" (steps, batch size, init bundle or None), "seconds" (corpus building
    and the whole run) and "command"; `left_out`: its recipe's leave-one-engine-out rows
    (`experiments.leave_one_out`), if any."""
    splits = {"test": _split_scores(entry)}
    for key, value in entry.items():  # the evaluations (experiments.scoring.evals)
        if isinstance(value, dict) and "mAP" in value and "intervals" in value:
            splits[key] = _split_scores(value)
    points = entry.get("operating_points", {})
    chosen_on = points.get("chosen_on", "test")
    return {
        "model": name,
        "title": KWS_NAMES.get(name, name),
        "task": "cskws",
        "keywords": list(run["keywords"]),
        "corpus": run["corpus"],
        "training": {**run["training"], "seconds": entry.get("seconds")},
        "seconds": run["seconds"],
        "command": run["command"],
        "scores": splits,
        "transfer": entry.get("transfer"),
        "operating_points": [_budget(budget) for budget in points.get("budgets", [])],
        "chosen_on": chosen_on,
        **({"leave_one_engine_out": left_out} if left_out else {}),
        "not_for": kws_not_for(chosen_on, list(splits), bool(left_out)),
    }


def kws_facts(config, corpus, dataset: str, data_dir: str, seconds: dict, command: str):
    """`kws_card`'s `run` facts of an `experiments.cskws` run on `dataset`, a synthetic_kws
    corpus whose builder config is `corpus` (`synthetic_kws.SyntheticKwsBuilderConfig`),
    in `data_dir`: `seconds` {"corpus", "run"}, `command` the command that reruns it."""
    from speechkit import prepared  # here: the card's page needs no TFDS

    info = prepared.builder(dataset, data_dir=data_dir).info
    render = corpus.render_config
    return {
        "keywords": list(info.metadata["keywords"]),
        "corpus": {
            "name": dataset,
            "size": corpus.size,
            "engines": [engine for engine in render.engines if engine != render.heldout_engine],
            "heldout_engine": render.heldout_engine,
            "utterances": {split: value.num_examples for split, value in info.splits.items()},
        },
        "training": {
            "steps": config.train.steps,
            "batch_size": config.train.batch_size,
            "init": config.get("init") or None,
        },
        "seconds": seconds,
        "command": command,
    }


def _split_scores(scores: dict) -> dict:
    keys = ("mAP", "AP@0.05", "FRR@5", "FRR@25", "test_hours")
    return {**{key: scores.get(key) for key in keys}, "intervals": scores.get("intervals", {})}


def _budget(budget: dict) -> dict:
    """A budget's measures ({split: FA/h, miss rate}): "test" is the split the thresholds
    were chosen on (the card's "chosen_on")."""
    measured = {
        split: {key: value[key] for key in ("fa_per_hour", "miss_rate")}
        for split, value in budget.items()
        if isinstance(value, dict) and "miss_rate" in value
    }
    return {"fa_per_hour": budget["fa_per_hour"], **measured}


CALL_SPLITS = {  # the card's splits as card.md names them
    "test": "fold {fold}, {engines}: calls it did not train on",
    "heldout": "heldout, {engine}: an engine it never heard",
}
TEXT_SOURCES = {
    "": "the corpus's pocketsphinx words",
    "ctc": "the words of the shipped CTC recogniser (ctc_jax)",
    "ctc_posteriors": "the 20 ms character posteriors of the shipped CTC recogniser (ctc_jax)",
}


def calls_not_for(modalities, heldout: bool, left_out: bool = False) -> list[str]:
    """What a MultiQT model of this toolkit is not for (`left_out`: the card has its
    recipe's leave-one-engine-out figures)."""
    heard = (
        " The held-out engine's score is the only measure here of how it hears a voice from "
        "outside its training."
        if heldout
        else LEFT_OUT_HEARD
        if left_out
        else " It was not scored on an engine it never heard."
    )
    items = [
        "Recorded calls: it was trained and scored on synthetic dialogues only (the engines "
        "named above, through simulated rooms, handsets, noise and a telephone line)." + heard,
        "Decisions about callers, or emergency dispatch, without an evaluation on your own "
        "annotated calls (python -m experiments.evaluate scores a bundle on a folder of them).",
    ]
    if "text" in modalities:
        items.append(
            "Text from another recogniser without a check: it learnt the errors and timing of "
            "the one named above (python -m multiqt_jax.track says when the kind differs)."
        )
    return items


def calls_facts(config, builder, dataset: str, seconds: dict, command: str) -> dict:
    """`calls_card`'s `run` facts of an `experiments.multiqt` run of one model and fold on
    `dataset`, a synthetic_calls corpus whose builder is `builder`: `seconds` {"corpus",
    "run"}, `command` the command that reruns it."""
    from experiments import multiqt_folds, multiqt_setup  # here: the card's page needs none of it
    from multiqt_jax import labels

    render = builder.builder_config.render_config
    return {
        "labels": list(labels.classes(config.task)),
        "corpus": {
            "name": dataset,
            "size": config.size,
            "engines": list(render.training_engines),
            "heldout_engine": render.heldout_engine,
            "calls": {split: value.num_examples for split, value in builder.info.splits.items()},
        },
        "training": {
            "fold": multiqt_folds.trained_folds(config)[0],
            "num_folds": config.num_folds,
            "steps": config.train.steps,
            "batch_size": config.train.batch_size,
            "text": multiqt_setup.text_recogniser(config) if config.models != "audio" else None,
        },
        "seconds": seconds,
        "command": command,
    }


def calls_card(name: str, scores: dict, run: dict, left_out: list[dict] | None = None) -> dict:
    """The card of a MultiQT model `name` ("multimodal", "audio", "text"): `scores` as
    `experiments.ship.calls_scores` gives them ({split: {"calls", "hours", "raw",
    "smoothed"}}, "test" also "training_calls"); `run` as `calls_facts` gives it;
    `left_out` its recipe's leave-one-engine-out rows, if any."""
    modalities = {"multimodal": ["audio", "text"], "audio": ["audio"], "text": ["text"]}[name]
    return {
        "model": name,
        "title": MULTIQT_NAMES.get(name, name),
        "task": "multiqt",
        "labels": run["labels"],
        "modalities": modalities,
        "corpus": run["corpus"],
        "training": run["training"],
        "seconds": run["seconds"],
        "command": run["command"],
        "scores": scores,
        **({"leave_one_engine_out": left_out} if left_out else {}),
        "not_for": calls_not_for(modalities, "heldout" in scores, bool(left_out)),
    }


def calls_markdown(card: dict) -> str:
    """card.md of a MultiQT model."""
    corpus, training = card["corpus"], card["training"]
    test = card["scores"]["test"]
    trained_on = test.get("training_calls", corpus["calls"]["train"] - test["calls"])
    text = training.get("text")
    lines = [
        f"# {card['title']}: {card.get('name', card['model'])}",
        "",
        f"Labels (class order): {', '.join(card['labels'])}. Inputs: "
        + " and ".join(card["modalities"])
        + (f"; the text is {TEXT_SOURCES.get(text, text)}" if text is not None else "")
        + ".",
        "",
        "## Training",
        "",
        f"- Corpus: `{corpus['name']}` ({corpus['size']} size), synthetic calls; the train "
        f"split spoken by {', '.join(corpus['engines'])}"
        + (
            f", the held-out split by {corpus['heldout_engine']} alone"
            if corpus.get("heldout_engine")
            else ""
        )
        + ". Calls: "
        + ", ".join(f"{split} {count}" for split, count in corpus["calls"].items())
        + ".",
        f"- Cross-validation fold {training['fold']} of {training['num_folds']}: trained on "
        f"the other folds' {trained_on} calls, {training['steps']} steps of batches of "
        f"{training['batch_size']}, from scratch.",
        *_time_and_rebuild(card),
        "## Scores",
        "",
        "Macro F1 over the classes (TIMESTEP: per 40 ms frame; INSTANCE: per question), raw "
        "labels and smoothed by the bundle's rule (what `multiqt_jax.track` prints); 95 % "
        "bootstrap intervals over calls in brackets.",
        "",
        *markdown.header(
            "calls",
            "hours",
            "TIMESTEP F1",
            "INSTANCE F1",
            "smoothed TIMESTEP F1",
            "smoothed INSTANCE F1",
        ),
    ]
    for split, scores in card["scores"].items():
        cells = [f"{_call_split_label(card, split)} ({scores['calls']})", f"{scores['hours']:.2f}"]
        for stream in ("raw", "smoothed"):
            for score in ("timestep", "instance"):
                bounds = scores[stream]["intervals"][f"{score}_f1"]
                cells.append(markdown.scored(scores[stream][score]["f1"], bounds))
        lines.append(markdown.row(*cells))
    lines += _early_frames_lines(card)
    if card.get("leave_one_engine_out"):
        lines += ["", "## Leave one engine out", "", *leave_one_out_lines(card)]
    lines += ["", "## Not for", "", *(f"- {item}" for item in card["not_for"]), ""]
    return "\n".join(lines)


def _call_split_label(card: dict, split: str) -> str:
    corpus = card["corpus"]
    return CALL_SPLITS.get(split, split).format(
        fold=card["training"]["fold"],
        engines=", ".join(corpus["engines"]),
        engine=corpus.get("heldout_engine"),
    )


def _early_frames_lines(card: dict) -> list[str]:
    """card.md's early question frames of each split, raw and smoothed; nothing for a card
    whose scores have none (cards scored before they were counted)."""
    found = [
        (f"{_call_split_label(card, split)}{suffix}", scores[stream]["early_frames"])
        for split, scores in card["scores"].items()
        for stream, suffix in (("raw", ""), ("smoothed", ", smoothed"))
        if "early_frames" in scores[stream]
    ]
    if not found:
        return []
    return [
        "",
        f"Early question frames: the share of each class's predicted frames more than "
        f"{found[0][1]['margin_s']:g} s before it is first spoken in the call (all of them "
        "where the call never has it), with early / predicted frames; near 0 for a tracker "
        "that follows the speech rather than the clock of the call.",
        "",
        *markdown.header("calls", "all classes", *card["labels"][1:]),
        *(
            markdown.row(
                label,
                markdown.early_share_text(early),
                *(markdown.early_share_text(early, c) for c in range(1, len(card["labels"]))),
            )
            for label, early in found
        ),
    ]


def markdown_text(card: dict) -> str:
    """card.md: the card as a page a person reads."""
    if card["task"] == "multiqt":
        return calls_markdown(card)
    corpus, training = card["corpus"], card["training"]
    lines = [
        f"# {card['title']}: {', '.join(card['keywords'])}",
        "",
        f"Keywords (class order): {', '.join(card['keywords'])}.",
        "",
        "## Training",
        "",
        f"- Corpus: `{corpus['name']}` ({corpus['size']} size), synthetic speech; "
        f"training and test splits spoken by {', '.join(corpus['engines'])}"
        + (
            f", the held-out split by {corpus['heldout_engine']} alone"
            if corpus.get("heldout_engine")
            else ""
        )
        + ". Utterances: "
        + ", ".join(f"{split} {count}" for split, count in corpus["utterances"].items())
        + ".",
        f"- {training['steps']} steps of batches of {training['batch_size']}"
        + (
            f", starting from the bundle `{training['init']}`"
            if training.get("init")
            else ", from scratch"
        )
        + ".",
        *_time_and_rebuild(card),
        "## Scores",
        "",
        "95 % bootstrap intervals over utterances in brackets.",
        "",
        *markdown.header("split", "hours", "mAP", "FRR@5", "FRR@25"),
    ]
    for split, scores in card["scores"].items():
        label = {
            "test": "test (engines it trained on, voices it never heard)",
            "heldout": f"heldout ({corpus.get('heldout_engine') or 'an engine'} it never heard)",
        }.get(split, split)
        bounds = scores["intervals"]
        lines.append(
            markdown.row(
                label,
                f"{scores['test_hours']:.2f}",
                markdown.scored(scores["mAP"], bounds.get("mAP")),
                markdown.scored(scores["FRR@5"], bounds.get("FRR@5")),
                markdown.scored(scores["FRR@25"], bounds.get("FRR@25")),
            )
        )
    if card.get("transfer") is not None:
        lines += ["", f"Held-out mAP / test mAP: {markdown.ratio(card['transfer'])}."]
    if card.get("leave_one_engine_out"):
        lines += ["", "## Leave one engine out", "", *leave_one_out_lines(card)]
    if card["operating_points"]:
        lines += ["", "## Operating points", "", *_points_lines(card)]
    lines += ["", "## Not for", "", *(f"- {item}" for item in card["not_for"]), ""]
    return "\n".join(lines)


def leave_one_out_lines(card: dict) -> list[str]:
    """card.md's leave-one-engine-out table (`experiments.leave_one_out` rows)."""
    rows = card["leave_one_engine_out"]
    metric = rows[0]["metric"]
    spread = (
        "95 % bootstrap intervals over utterances"
        if metric == "mAP"
        else "the range over the folds trained"
    )
    lines = [
        "Every engine trained this model, so none is held out from it. These figures are "
        "the same recipe's (corpus, steps, seed), trained once more without each engine: "
        "scored on the engines it trained on, on records it did not train on (in-engine), "
        f"and on every training record of the engine it never heard (held out); {metric} "
        f"with {spread} in brackets.",
        "",
    ]
    early = any(entry.get("early_frames") for entry in rows)
    columns = ["held out", "trained on", "in-engine", "held out", "held out / in"]
    lines += markdown.header(*columns, *(["early frames, in / held out"] if early else []))
    for entry in rows:
        cells = [
            entry["heldout_engine"],
            ", ".join(entry["training_engines"]),
            *(
                markdown.scored(entry[part]["score"], entry[part]["interval"])
                for part in ("in_engine", "heldout")
            ),
            markdown.ratio(entry["transfer"]),
        ]
        if early:
            shares = entry.get("early_frames") or {}
            cells.append(
                " / ".join(
                    markdown.early_share_text(shares[part]) if shares.get(part) else "-"
                    for part in ("in_engine", "heldout")
                )
            )
        lines.append(markdown.row(*cells))
    transfers = [entry["transfer"] for entry in rows if entry["transfer"] is not None]
    if transfers:
        mean = sum(transfers) / len(transfers)
        lines += ["", f"Mean held out / in-engine: {markdown.ratio(mean)}."]
    seconds = [entry.get("seconds") for entry in rows]
    if None not in seconds:
        lines += [
            f"Training and scoring the {len(rows)} took {_minutes(sum(seconds))} on the "
            "machine that trained the model (the same command trains them)."
        ]
    return lines


def _points_lines(card: dict) -> list[str]:
    """card.md's operating points: how they were chosen, and the table of what each
    budget measured per split (with `with_measured_points`' rules and earlier points)."""
    chosen = card.get("points")
    if chosen is None:
        intro = (
            "Per-keyword thresholds stored in the bundle (`--fa-per-hour BUDGET`), chosen on "
            f"the {_split_name(card, 'test')} split (each keyword an equal share of the "
            "budget); false alarms per hour and miss rate measured on each split:"
        )
    else:
        intro = (
            "Per-keyword thresholds stored in the bundle (`--fa-per-hour BUDGET`), chosen by "
            f"the rule `{chosen['rule']}` on dev, {chosen['dev']['split']} "
            f"({chosen['dev']['hours']:.1f} h of speech without keywords), and measured on "
            f"final, {chosen['final']['split']} ({chosen['final']['hours']:.1f} h, "
            f"{chosen['final']['keywords_spoken']} keywords spoken); final's figures per "
            "engine follow:"
        )
    lines = [intro, "", *_budget_table(card, card["operating_points"])]
    if chosen is None:
        return lines
    from cskws_jax import operating_points  # here: a card's page needs no JAX otherwise

    return lines + [
        "",
        "Every rule (`cskws_jax.operating_points.RULES`), chosen on dev and measured on final:",
        "",
        operating_points.comparison_markdown(chosen["rules"]),
        "",
        "Before (the points the card listed until they were measured this way):",
        "",
        *_budget_table({"chosen_on": "dev"}, chosen["before"]),
        "",
        "Measured with:",
        "",
        f"    {chosen['command']}",
    ]


def _budget_table(card: dict, budgets: list[dict]) -> list[str]:
    splits = [key for key in budgets[0] if key != "fa_per_hour"]
    lines = markdown.header(
        "budget (FA/h)", *(f"{_split_name(card, s)} FA/h | miss" for s in splits)
    )
    for point in budgets:
        cells = [f"{point['fa_per_hour']:g}"]
        for split in splits:
            miss = point[split]["miss_rate"]
            cells += [
                f"{point[split]['fa_per_hour']:.1f}",
                "n/a" if miss is None else f"{miss:.2f}",
            ]
        lines.append(markdown.row(*cells))
    return lines


def with_measured_points(card: dict, result: dict, command: str) -> dict:
    """An AF-KWS `card` with the operating points `experiments.measure_points` chose and
    measured (`result`, its points.json): "operating_points" per budget on dev, on final
    and on final's part spoken by each engine; "points": the rule, the data, every rule's
    table, the card's points before (kept from the first such update) and `command`."""
    entries = []
    for point in result["points"]:
        budget = point["fa_per_hour"]
        dev = next(
            row
            for row in result["rules"]
            if row["rule"] == result["rule"] and row["budget"] == budget
        )
        engines = result["per_engine"][f"{budget:g}"]
        entries.append(
            {
                "fa_per_hour": budget,
                "dev": {"fa_per_hour": dev["dev_fa_per_hour"], "miss_rate": dev["dev_miss_rate"]},
                "final": {key: point["measured"][key] for key in ("fa_per_hour", "miss_rate")},
                **{
                    engine: {key: found[key] for key in ("fa_per_hour", "miss_rate")}
                    for engine, found in engines.items()
                },
            }
        )
    before = card.get("points", {}).get("before", card["operating_points"])
    points = {
        "rule": result["rule"],
        "dev": result["dev"],
        "final": result["final"],
        "engine_hours": result["engine_hours"],
        "rules": result["rules"],
        "before": before,
        "command": command,
        "seconds": result["seconds"],
    }
    return {**card, "operating_points": entries, "chosen_on": "dev", "points": points}


def _split_name(card: dict, split: str) -> str:
    """A budget entry's split as the page names it ("test" is the one chosen on)."""
    return card.get("chosen_on", "test") if split == "test" else split


def _time_and_rebuild(card: dict) -> list[str]:
    """card.md's lines on the run's times and the command that rebuilds the model."""
    return [
        f"- Time on the machine that trained it: building the corpus "
        f"{_corpus_minutes(card['seconds'])}, training and scoring "
        f"{_minutes(card['training']['seconds'])}, the whole run "
        f"{_run_minutes(card['seconds'])}.",
        "",
        "Rebuild it with:",
        "",
        f"    {card['command']}",
        "",
    ]


def _corpus_minutes(seconds: dict) -> str:
    """The corpus's build time, and where it was read when another run measured it."""
    source = seconds.get("corpus_from")
    read = f" (python -m experiments.build_data, {source})" if source else ""
    return _minutes(seconds["corpus"]) + read


def _run_minutes(seconds: dict) -> str:
    """The whole run's time; without the corpus's when another run built it."""
    built_before = seconds.get("corpus_from") or seconds.get("corpus") is None
    return _minutes(seconds["run"]) + (" (the corpus built before)" if built_before else "")


def _minutes(seconds) -> str:
    return "n/a (built before)" if seconds is None else f"{seconds / 60:.1f} min"


def kept_times(card: dict, folder: str | os.PathLike) -> dict:
    """`card` with the times of the card already in `folder` when that card is of the same
    trained model (its training seconds are the same: a rerun that found the model's
    scores and trained nothing), so that a rerun does not replace the times it took to
    build the corpus and train with its own few seconds (a corpus time the old card
    lacked is taken from a build report the new one read, "corpus_from")."""
    old = files.read_json(os.path.join(folder, CARD_JSON))
    if old is None or old.get("training", {}).get("seconds") != card["training"]["seconds"]:
        return card
    seconds = dict(old["seconds"])
    if card["seconds"].get("corpus_from") and seconds.get("corpus") is None:
        seconds.update({k: v for k, v in card["seconds"].items() if k != "run"})
    return {**card, "seconds": seconds}


def write(folder: str | os.PathLike, card: dict) -> None:
    """`folder`/card.json and `folder`/card.md (each written whole or not at all)."""
    files.write_json(os.path.join(folder, CARD_JSON), card)
    with files.atomic_open(os.path.join(folder, CARD_MD)) as out:
        out.write(markdown_text(card))
