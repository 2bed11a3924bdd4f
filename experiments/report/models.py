"""The models the reports speak of: their names in the experiments' results and in the
documents, and a MultiQT model's scores over folds as {"mean", "std"}."""

from __future__ import annotations

from experiments.scoring.evals import HELDOUT
from experiments.scoring.evaluators import tracking

NEURAL = ("multimodal", "audio", "text")  # the MultiQT models the studies train
KWS_MODELS = ("afkws", "afkws_no_unknown")  # the AF-KWS models the studies train
MULTIQT_NAMES = {
    "multimodal": "MultiQT (audio + text)",
    "audio": "MultiQT (audio only)",
    "text": "MultiQT (text only)",
    "rf": "Random forest (segments, sliding)",
    "fnn": "Feed-forward net (segments, sliding)",
}
KWS_NAMES = {
    "afkws": "AF-KWS",
    "afkws_no_unknown": "AF-KWS without unknown class",
    "sliding_window": "Sliding-window CNN classifier",
}


def mean_std(summary: dict, score: str, part: str = "f1") -> dict:
    """One part of a score in a MultiQT model's results ("timestep", "f1") as
    {"mean", "std"} over its folds."""
    return {"mean": summary["mean"][score][part], "std": summary["std"][score][part]}


def fold_summary(results: dict, name: str, heldout: bool = False) -> dict:
    """A MultiQT results.json model's TIMESTEP / INSTANCE F1 as {metric: {mean, std}}
    (its held-out engine's scores when `heldout`; {} when it has none)."""
    summary = results["models"][name]
    if heldout:
        summary = summary.get(HELDOUT)
        if summary is None:
            return {}
    return {f"{score}_f1": mean_std(summary, score) for score in tracking.SCORES}
