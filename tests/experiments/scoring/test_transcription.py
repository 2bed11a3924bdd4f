"""The transcription evaluator: error rates over whole sets and emission lag of the words
a minimum-edit alignment pairs."""

import pytest

from experiments.scoring.evaluators import transcription
from speechkit.asr import TimedWord


def _words(text, ends=None, emitted=None):
    words = text.split()
    ends = ends or [None] * len(words)
    emitted = emitted or [None] * len(words)
    return [TimedWord(w, None, e, t) for w, e, t in zip(words, ends, emitted, strict=True)]


def test_aligned_pairs_match_equal_words_around_edits():
    pairs = transcription.aligned_pairs(
        ["call", "me", "back", "now"], ["all", "me", "back", "to", "now"]
    )
    assert pairs == [(1, 1), (2, 2), (3, 4)]
    assert transcription.aligned_pairs([], ["a"]) == []


def test_scores_pool_edits_over_the_set_and_time_matched_words():
    said = [_words("yes he is", [1.0, 1.5, 2.0]), _words("call me back", [3.0, 3.4, 4.0])]
    heard = [_words("yes is", emitted=[1.2, 2.5]), _words("call be back", emitted=[3.1, 3.6, 4.9])]
    scores = transcription.evaluate(heard, said)
    assert scores["wer"] == pytest.approx(2 / 6)
    assert scores["cer"] == pytest.approx((3 + 1) / (len("yes he is") + len("call me back")))
    assert scores["lag_words"] == 4  # yes, is, call, back
    assert scores["lag_median_s"] == pytest.approx(0.35)  # of 0.2, 0.5, 0.1, 0.9
    untimed = transcription.evaluate([_words("yes")], [_words("yes")])
    assert untimed["cer"] == 0 and untimed["lag_median_s"] is None


def test_unequal_lists_are_refused():
    with pytest.raises(ValueError, match="2 hypotheses, 1 references"):
        transcription.evaluate([[], []], [[]])
