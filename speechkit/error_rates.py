"""Word and character error rates: `error_rate` (total edits over total reference length)
and the `edit_distance` it sums.

    error_rates.error_rate([["a", "b", "c"]], [["a", "c"]])   # WER over word lists: 1/3
    error_rates.error_rate(["abc", "de"], ["abd", "de"])      # CER over strings: 1/5
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def edit_distance(reference: Sequence, hypothesis: Sequence) -> int:
    """Levenshtein distance (substitutions, insertions, deletions all cost 1)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, start=1):
        current = [i]
        for j, hyp in enumerate(hypothesis, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def error_rate(references: Iterable[Sequence], hypotheses: Iterable[Sequence]) -> float:
    """Total edit distance over total reference length (WER for word lists, CER for
    character strings)."""
    errors = length = 0
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        errors += edit_distance(reference, hypothesis)
        length += len(reference)
    if length == 0:
        raise ValueError("error_rate: the references are empty")
    return errors / length
