"""speechkit.lm.read_arpa: ARPA files as `NgramModel`s (backoff scoring, <s> / </s>,
unknown words), and ARPA files from others refused with an error naming the file."""

import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speechkit import lm

SENTENCES = [
    ["is", "the", "patient", "breathing"],
    ["is", "the", "patient", "awake"],
    ["is", "he", "breathing"],
    ["the", "patient", "is", "awake"],
]

# A hand-written bigram model: P(b | a) is held, P(a | b) backs off through b's weight.
BIGRAMS = """some words before the header are allowed
\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-1.0\t<s>\t-0.3
-0.5\ta\t-0.2
-0.7\tb\t-0.4
-0.9\t</s>

\\2-grams:
-0.1\t<s> a
-0.2\ta b

\\end\\
"""


def reference_log10(prob, backoff, gram):
    """ARPA's backoff rule, recursively, on log10 tables."""
    if gram in prob:
        return prob[gram]
    return backoff.get(gram[:-1], 0.0) + reference_log10(prob, backoff, gram[1:])


def test_train_arpa_round_trips_and_every_history_sums_to_one(tmp_path):
    path = tmp_path / "model.arpa"
    lm.train_arpa(SENTENCES, path, order=3)
    model = lm.read_arpa(path)
    assert model.order == 3 and "patient" in model and "cat" not in model
    vocabulary = [g[0] for g in model.log10_probs if len(g) == 1 and g[0] != lm.BOS]
    histories = {g[:-1] for g in model.log10_probs if len(g) > 1} | {()}
    for history in histories:
        total = sum(10 ** model.log10_prob(w, history) for w in vocabulary)
        assert math.isclose(total, 1.0, abs_tol=1e-4), (history, total)
        for word in vocabulary:
            expected = reference_log10(model.log10_probs, model.log10_backoffs, (*history, word))
            assert model.log10_prob(word, history) == pytest.approx(expected)


def test_backoff_bos_eos_and_longer_histories(tmp_path):
    path = tmp_path / "bigram.arpa"
    path.write_text(BIGRAMS)
    model = lm.read_arpa(path)
    assert model.order == 2
    assert model.log10_prob("a", [lm.BOS]) == pytest.approx(-0.1)
    assert model.log10_prob("b", ["x", "y", "a"]) == pytest.approx(-0.2)  # last word only
    assert model.log10_prob("a", ["b"]) == pytest.approx(-0.4 - 0.5)  # b's backoff weight
    assert model.log10_prob(lm.EOS, ["a"]) == pytest.approx(-0.2 - 0.9)
    assert model.log10_prob("a", ["never-seen"]) == pytest.approx(-0.5)  # no weight: 0
    assert model.sentence_log10_prob(["a", "b"]) == pytest.approx(-0.1 - 0.2 - 0.4 - 0.9)
    assert model.log_prob("a", [lm.BOS]) == pytest.approx(-0.1 * math.log(10))


def test_unknown_words_score_unk_or_the_penalty(tmp_path):
    path = tmp_path / "bigram.arpa"
    path.write_text(BIGRAMS)
    assert lm.read_arpa(path).log10_prob("zebra", ["a"]) == lm.UNKNOWN_LOG10
    assert lm.read_arpa(path, unknown_log10=-3.0).log10_prob("zebra") == -3.0
    with_unk = BIGRAMS.replace("ngram 1=4", "ngram 1=5").replace(
        "-0.9\t</s>", "-0.9\t</s>\n-2.5 <unk>"
    )
    path.write_text(with_unk)
    assert lm.read_arpa(path).log10_prob("zebra", ["a"]) == pytest.approx(-0.2 - 2.5)
    with pytest.raises(ValueError, match="unknown_log10"):
        lm.read_arpa(path, unknown_log10=1.0)


def test_standard_layout_spaces_and_no_backoff_column(tmp_path):
    """Fields separated by spaces, blank lines anywhere, no backoff on the highest order."""
    text = "\\data\\\nngram 1 = 2\n\n\\1-grams:\n-0.3  a   -0.1\n\n-0.2 </s>\n\\end\\\n"
    path = tmp_path / "spaces.arpa"
    path.write_text(text)
    model = lm.read_arpa(path)
    assert model.order == 1 and model.log10_prob("a", ["a"]) == pytest.approx(-0.3)


BAD = {
    "no \\\\data\\\\ line": "ngram 1=1\n",
    "expected 'ngram 2=COUNT'": "\\data\\\nngram 1=1\nngram 3=1\n\\1-grams:\n-1 a\n\\end\\\n",
    "ends in its": "\\data\\\nngram 1=1\n",
    "fewer 1-grams": "\\data\\\nngram 1=3\n\\1-grams:\n-1 a\n-1 b\n\\end\\\n",
    "after 1 1-grams": "\\data\\\nngram 1=1\n\\1-grams:\n-1 a\n-1 b\n\\end\\\n",
    "expected '\\\\\\\\end": "\\data\\\nngram 1=1\n\\1-grams:\n-1 a\n",
    "not a number": "\\data\\\nngram 1=1\n\\1-grams:\nx a\n\\end\\\n",
    "not a number within": "\\data\\\nngram 1=1\n\\1-grams:\nnan a\n\\end\\\n",
    "above 0": "\\data\\\nngram 1=1\n\\1-grams:\n0.5 a\n\\end\\\n",
    "twice": "\\data\\\nngram 1=2\n\\1-grams:\n-1 a\n-1 a\n\\end\\\n",
    "fields": "\\data\\\nngram 1=1\n\\1-grams:\n-1 a b c\n\\end\\\n",
    "no unigrams": "\\data\\\nngram 1=0\n\\1-grams:\n\\end\\\n",
    "more than 9 orders": "\\data\\\n" + "".join(f"ngram {n}=0\n" for n in range(1, 11)),
}


@pytest.mark.parametrize("message", sorted(BAD))
def test_bad_files_are_named_errors(tmp_path, message):
    path = tmp_path / "bad.arpa"
    path.write_text(BAD[message])
    with pytest.raises(lm.ArpaError, match=message) as raised:
        lm.read_arpa(path)
    assert str(path) in str(raised.value)


def test_size_kind_and_encoding_are_checked_before_parsing(tmp_path):
    path = tmp_path / "model.arpa"
    path.write_text(BIGRAMS)
    with pytest.raises(lm.ArpaError, match="limit of 100 bytes"):
        lm.read_arpa(path, limit=100)
    with pytest.raises(lm.ArpaError, match="not a regular file"):
        lm.read_arpa(tmp_path)
    with pytest.raises(lm.ArpaError, match="not readable"):
        lm.read_arpa(tmp_path / "missing.arpa")
    path.write_bytes(BIGRAMS.encode() + b"\xff\xfe")
    with pytest.raises(lm.ArpaError, match="not UTF-8"):
        lm.read_arpa(path)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.arpa")
        with pytest.raises(lm.ArpaError, match="FIFO"):
            lm.read_arpa(tmp_path / "fifo.arpa")


@settings(max_examples=300, deadline=None)
@given(
    position=st.integers(0, len(BIGRAMS)),
    cut=st.integers(0, 12),
    insert=st.sampled_from(["", "\\", "-", "1", " ", "\n", "\t", "x", "nan", "1e999", "=", "#"]),
)
def test_mutated_files_read_or_raise_arpa_errors(position, cut, insert):
    """Any splice of a valid file is a model or an `ArpaError`: never another exception."""
    text = BIGRAMS[:position] + insert + BIGRAMS[position + cut :]
    try:
        model = lm.parse_arpa(text, where="mutated")
    except lm.ArpaError as err:
        assert str(err).startswith("mutated")
        return
    for word in ("a", "b", lm.EOS, "zebra"):
        assert math.isfinite(model.log10_prob(word, [lm.BOS, "a"]))
