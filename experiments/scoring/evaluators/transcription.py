"""Transcription evaluator: error rates and emission lag of a streaming recogniser.

    scores = transcription.evaluate(hypotheses, references)

`hypotheses` and `references` are per utterance (or call) lists of `speechkit.asr.TimedWord`
(a reference word's `end` is when it was said, a hypothesis word's `emitted` when the
recogniser had it); a reference without times (a transcript only) uses `end` None and
counts for the error rates, not the lag. Returns {"cer", "wer", "words",
"lag_median_s", "lag_p90_s", "lag_words"}: CER over the words joined by single spaces,
WER over the words (`speechkit.error_rates.error_rate`: total edits / total reference length, so
long calls weigh what they hold), and the lag `emitted - end` of every hypothesis word
that the minimum-edit alignment pairs with an equal reference word (None without any).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from speechkit import asr, error_rates


def aligned_pairs(reference: Sequence[str], hypothesis: Sequence[str]) -> list[tuple[int, int]]:
    """(reference index, hypothesis index) of the equal words a minimum-edit alignment
    pairs (ties: matches first)."""
    rows, cols = len(reference) + 1, len(hypothesis) + 1
    cost = np.zeros((rows, cols), np.int64)
    cost[:, 0], cost[0, :] = np.arange(rows), np.arange(cols)
    for i in range(1, rows):
        for j in range(1, cols):
            same = reference[i - 1] == hypothesis[j - 1]
            cost[i, j] = min(
                cost[i - 1, j] + 1, cost[i, j - 1] + 1, cost[i - 1, j - 1] + (not same)
            )
    pairs, i, j = [], rows - 1, cols - 1
    while i > 0 and j > 0:
        same = reference[i - 1] == hypothesis[j - 1]
        if cost[i, j] == cost[i - 1, j - 1] + (not same):
            if same:
                pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif cost[i, j] == cost[i - 1, j] + 1:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def evaluate(
    hypotheses: Sequence[Sequence[asr.TimedWord]], references: Sequence[Sequence[asr.TimedWord]]
) -> dict:
    """See the module docstring."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"transcription.evaluate: {len(hypotheses)} hypotheses, {len(references)} references"
        )
    ref_words = [[w.word for w in words] for words in references]
    hyp_words = [[w.word for w in words] for words in hypotheses]
    lags = []
    for ref, hyp, ref_timed, hyp_timed in zip(
        ref_words, hyp_words, references, hypotheses, strict=True
    ):
        for i, j in aligned_pairs(ref, hyp):
            said, emitted = ref_timed[i].end, hyp_timed[j].emitted
            if said is not None and emitted is not None:
                lags.append(emitted - said)
    return {
        "cer": error_rates.error_rate(
            [" ".join(w) for w in ref_words], [" ".join(w) for w in hyp_words]
        ),
        "wer": error_rates.error_rate(ref_words, hyp_words),
        "words": sum(len(w) for w in ref_words),
        "lag_median_s": float(np.median(lags)) if lags else None,
        "lag_p90_s": float(np.percentile(lags, 90)) if lags else None,
        "lag_words": len(lags),
    }
