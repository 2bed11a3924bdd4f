"""Model cards: what a trained bundle was trained on, how to rebuild it, how well it
scored where, and what it is not for, beside the bundle as card.json and card.md.

    card = kws_card(name, entry, run)     # a results.json model entry and the run's facts
    write(bundle_folder, card)            # bundle_folder/card.json, bundle_folder/card.md

The bundle loaders read bundle.json and params.npz only; the card is for people (and
for tests that compare a rebuilt model's scores with it).
"""

from __future__ import annotations

import os

from experiments.report import markdown
from experiments.report.models import KWS_NAMES
from speechkit import files

CARD_JSON, CARD_MD = "card.json", "card.md"

KWS_NOT_FOR = (
    "Recorded speech: it was trained and scored on synthetic speech only (the engines "
    "named above, through simulated rooms, microphones and noise). The held-out engine's "
    "score is the only measure here of how it hears a voice from outside its training.",
    "A false-alarm rate promised on your audio: the operating points were chosen on the "
    "test split their test figures are read on (met there by construction); the held-out "
    "figures are the out-of-sample check, on synthetic speech.",
    "Decisions about people, or always-on use, without an evaluation on your own "
    "recordings (python -m experiments.evaluate scores a bundle on a folder of them).",
)


def kws_card(name: str, entry: dict, run: dict) -> dict:
    """The card of an AF-KWS model: `entry` is its results.json entry
    (`experiments.cskws`: scores, "intervals", the held-out split's scores,
    "operating_points", "seconds"); `run` the facts the results do not hold: "keywords",
    "corpus" (name, size, engines, held-out engine, utterances per split),
    "training" (steps, batch size, init bundle or None), "seconds" (corpus building
    and the whole run) and "command"."""
    splits = {"test": _split_scores(entry)}
    if isinstance(entry.get("heldout"), dict):
        splits["heldout"] = _split_scores(entry["heldout"])
    budgets = entry.get("operating_points", {}).get("budgets", [])
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
        "operating_points": [_budget(budget) for budget in budgets],
        "not_for": list(KWS_NOT_FOR),
    }


def _split_scores(scores: dict) -> dict:
    keys = ("mAP", "AP@0.05", "FRR@5", "FRR@25", "test_hours")
    return {**{key: scores.get(key) for key in keys}, "intervals": scores.get("intervals", {})}


def _budget(budget: dict) -> dict:
    measured = {
        split: {key: budget[split][key] for key in ("fa_per_hour", "miss_rate")}
        for split in ("test", "heldout")
        if split in budget
    }
    return {"fa_per_hour": budget["fa_per_hour"], **measured}


def markdown_text(card: dict) -> str:
    """card.md: the card as a page a person reads."""
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
        f"- Time on the machine that trained it: building the corpus "
        f"{_minutes(card['seconds']['corpus'])}, training and scoring "
        f"{_minutes(training['seconds'])}, the whole run {_minutes(card['seconds']['run'])}.",
        "",
        "Rebuild it with:",
        "",
        f"    {card['command']}",
        "",
        "## Scores",
        "",
        "95 % bootstrap intervals over utterances in brackets.",
        "",
        *markdown.header("split", "hours", "mAP", "FRR@5", "FRR@25"),
    ]
    for split, scores in card["scores"].items():
        label = (
            "test (engines it trained on, unheard voices)"
            if split == "test"
            else (f"held out ({corpus.get('heldout_engine') or 'another engine'}, never heard)")
        )
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
    if card["operating_points"]:
        lines += [
            "",
            "## Operating points",
            "",
            "Per-keyword thresholds stored in the bundle (`--fa-per-hour BUDGET`), chosen "
            "on the test split; false alarms per hour and miss rate measured:",
            "",
            *markdown.header(
                "budget (FA/h)", "test FA/h", "test miss", "held-out FA/h", "held-out miss"
            ),
        ]
        for point in card["operating_points"]:
            cells = [f"{point['fa_per_hour']:g}"]
            for split in ("test", "heldout"):
                measured = point.get(split)
                cells += (
                    [f"{measured['fa_per_hour']:.1f}", f"{measured['miss_rate']:.2f}"]
                    if measured
                    else ["n/a", "n/a"]
                )
            lines.append(markdown.row(*cells))
    lines += ["", "## Not for", "", *(f"- {item}" for item in card["not_for"]), ""]
    return "\n".join(lines)


def _minutes(seconds) -> str:
    return "n/a" if seconds is None else f"{seconds / 60:.1f} min"


def kept_times(card: dict, folder: str | os.PathLike) -> dict:
    """`card` with the times of the card already in `folder` when that card is of the same
    trained model (its training seconds are the same: a rerun that found the model's
    scores and trained nothing), so that a rerun does not replace the times it took to
    build the corpus and train with its own few seconds."""
    old = files.read_json(os.path.join(folder, CARD_JSON))
    if old is None or old.get("training", {}).get("seconds") != card["training"]["seconds"]:
        return card
    return {**card, "seconds": old["seconds"]}


def write(folder: str | os.PathLike, card: dict) -> None:
    """`folder`/card.json and `folder`/card.md (each written whole or not at all)."""
    files.write_json(os.path.join(folder, CARD_JSON), card)
    with files.atomic_open(os.path.join(folder, CARD_MD)) as out:
        out.write(markdown_text(card))
