"""cskws_jax.datasets.text: seeded n-gram sentences with a drawn number of keywords,
varied keyword placement and confusable fillers."""

import dataclasses
import itertools
import math

import numpy as np
import pytest

from cskws_jax import keywords
from cskws_jax.datasets import text
from speechkit import lm

# The sentences of seeds [4, 0..2] at vocabulary_size 1500, as the corpus drew them
# before the sampler moved to speechkit.lm: the move kept every draw.
PINNED = [
    ("we talked for two thousand people in general which ones are right", 2),
    (
        "he was a political and economic issue like an even amount of evidence that he could "
        "live in the middle of the",
        1,
    ),
    (
        "now i guess every week and when she was in my hand to help any him what she said so "
        "it is time",
        1,
    ),
]


def test_sentences_are_seeded_and_hold_the_drawn_keyword_count():
    kws = keywords.load_keywords()
    config = text.TextConfig(vocabulary_size=1500)
    first = [
        text.sample_utterance_text(np.random.default_rng([4, i]), kws, config) for i in range(3)
    ]
    again = [
        text.sample_utterance_text(np.random.default_rng([4, i]), kws, config) for i in range(3)
    ]
    assert first == again
    assert [(" ".join(words), wanted) for words, wanted in first] == PINNED
    _, vocabulary = lm.model_and_vocabulary(config.vocabulary_size)
    allowed = set(vocabulary) | set(kws)
    for words, wanted in first:
        assert 0 <= wanted <= config.max_keywords
        assert sum(w in kws for w in words) == wanted
        assert config.min_words <= len(words) <= config.max_words + config.max_keywords
        assert set(words) <= allowed


def test_the_model_is_used_with_its_history():
    # "states" after "united" must be far likelier than after an unrelated word.
    model, vocabulary = lm.model_and_vocabulary(3000)
    states = vocabulary.index("states")
    after_united = lm.next_word_probabilities(model, vocabulary, ["<s>", "the", "united"])
    after_fish = lm.next_word_probabilities(model, vocabulary, ["<s>", "the", "fish"])
    assert after_united[states] > 100 * after_fish[states]


def test_general_sentences_keep_their_length_bounds_and_vocabulary():
    model, vocabulary = lm.model_and_vocabulary(1500)
    for i in range(5):
        words = lm.sample_words(np.random.default_rng([9, i]), model, vocabulary, 3, 8)
        assert 3 <= len(words) <= 8 and set(words) <= set(vocabulary[:-1])
    assert words == lm.sample_words(np.random.default_rng([9, 4]), model, vocabulary, 3, 8)


def _sample_before_variation(rng, keywords_, config):
    """`text.sample_utterance_text` as it was before the varied-text options, frozen:
    built corpora and recorded results depend on its draws."""
    wanted = int(rng.integers(0, config.max_keywords + 1))
    model, vocabulary = lm.model_and_vocabulary(config.vocabulary_size)
    missing = [k for k in keywords_ if k not in vocabulary]
    vocabulary = vocabulary[:-1] + missing + [lm.EOS]
    keyword_ids = np.array([vocabulary.index(k) for k in keywords_], np.int64)
    keyword_set = set(keywords_)

    def adjust(probabilities, words):
        found = sum(word in keyword_set for word in words)
        if found < wanted:
            probabilities[keyword_ids] *= config.keyword_boost
        else:
            probabilities[keyword_ids] = 0.0
        return found >= wanted

    words = lm.sample_words(rng, model, vocabulary, config.min_words, config.max_words, adjust)
    found = sum(word in keyword_set for word in words)
    for _ in range(wanted - found):
        position = int(rng.integers(0, len(words) + 1))
        words.insert(position, keywords_[int(rng.integers(len(keywords_)))])
    return words, wanted


@pytest.mark.parametrize(
    "config",
    [
        text.TextConfig(vocabulary_size=1000),
        text.TextConfig(vocabulary_size=1000, min_words=2, max_words=6, max_keywords=5),
        text.TextConfig(
            vocabulary_size=1000,
            edge_keyword_probability=0.0,
            adjacent_keywords_probability=0.0,
            confusable_filler_probability=0.0,
        ),
    ],
)
def test_default_text_keeps_every_draw_of_the_text_before_variation(config):
    # The render stage goes on with the same generator, so its state must match too.
    kws = keywords.load_keywords()
    for i in range(12):
        now, before = np.random.default_rng([5, i]), np.random.default_rng([5, i])
        assert text.sample_utterance_text(now, kws, config) == _sample_before_variation(
            before, kws, config
        )
        assert now.bit_generator.state == before.bit_generator.state


VARIED = dataclasses.replace(text.VARIED_TEXT, vocabulary_size=1000)
DRAWS = 300


@pytest.fixture(scope="module")
def varied_and_plain():
    """(varied, plain): DRAWS (words, wanted) of `VARIED` and of its options off, seeds
    [6, i]."""
    kws = keywords.load_keywords()
    plain = dataclasses.replace(text.TextConfig(), vocabulary_size=VARIED.vocabulary_size)
    return tuple(
        [text.sample_utterance_text(np.random.default_rng([6, i]), kws, c) for i in range(DRAWS)]
        for c in (VARIED, plain)
    )


def test_varied_text_is_seeded_and_differs_from_plain_text(varied_and_plain):
    kws = keywords.load_keywords()
    varied, plain = varied_and_plain
    again = [
        text.sample_utterance_text(np.random.default_rng([6, i]), kws, VARIED) for i in range(5)
    ]
    assert again == varied[:5]
    assert varied != plain


def test_varied_text_holds_exactly_the_drawn_keywords(varied_and_plain):
    kws = set(keywords.load_keywords())
    for words, wanted in varied_and_plain[0]:
        assert sum(word in kws for word in words) == wanted
        assert 0 <= wanted <= VARIED.max_keywords
        assert VARIED.min_words <= len(words) <= VARIED.max_words + VARIED.max_keywords


def _within(share: float, low: float, high: float, count: int) -> bool:
    """low - 3 sd <= share <= high + 3 sd for a share of `count` utterances."""
    margin = 3 * math.sqrt(0.25 / count)
    return low - margin <= share <= high + margin


def test_varied_text_shares_lie_around_their_probabilities(varied_and_plain):
    # Each share is at least its probability (less the placements dropped where an
    # utterance has too few keywords for all that was drawn), and at most that plus what
    # plain text has by chance.
    kws = keywords.load_keywords()
    varied, plain = ([words for words, _ in draws] for draws in varied_and_plain)
    report, chance = text.text_report(varied, kws), text.text_report(plain, kws)
    with_keywords = sum(wanted >= 1 for _, wanted in varied_and_plain[0])
    with_two = sum(wanted >= 2 for _, wanted in varied_and_plain[0])
    edge, pair, filler = (
        VARIED.edge_keyword_probability,
        VARIED.adjacent_keywords_probability,
        VARIED.confusable_filler_probability,
    )
    for key, p, count, dropped in (
        ("keyword_first", edge, with_keywords, edge**2 / 2),
        ("keyword_last", edge, with_keywords, edge**2 / 2),
        ("adjacent_keywords", pair, with_two, pair * edge**2 / 3),
        ("confusable_filler", filler, DRAWS, 0.0),
    ):
        ceiling = 1 - (1 - p) * (1 - chance[key])
        assert _within(report[key], p - dropped, ceiling, count), (key, report, chance)
    assert report["mean_keywords"] == chance["mean_keywords"]  # wanted is drawn first


@pytest.mark.parametrize(
    "option",
    ["edge_keyword_probability", "adjacent_keywords_probability", "confusable_filler_probability"],
)
def test_a_certain_option_shapes_every_utterance(option):
    kws = keywords.load_keywords()
    keyword_set = set(kws)
    confusable = set().union(*text.shipped_confusables(tuple(kws)).values())
    config = text.TextConfig(vocabulary_size=1000, **{option: 1.0})
    for i in range(40):
        words, wanted = text.sample_utterance_text(np.random.default_rng([8, i]), kws, config)
        assert sum(word in keyword_set for word in words) == wanted
        first, last = words[0] in keyword_set, words[-1] in keyword_set
        if option == "edge_keyword_probability" and wanted:
            assert (first and last) if wanted >= 2 else (first or last), words
        if option == "adjacent_keywords_probability" and wanted >= 2:
            assert any(a in keyword_set and b in keyword_set for a, b in itertools.pairwise(words))
        if option == "confusable_filler_probability":
            assert confusable & set(words), words


def test_confusable_words_open_with_the_keywords_first_syllable():
    dictionary = lm.read_pronunciations(lm.shipped_model_paths()[1])
    kws = keywords.load_keywords()
    openings = {
        "about": ["AH", "B"],  # ab-out
        "people": ["P", "IY", "P"],
        "something": ["S", "AH", "M"],
    }
    for keyword, opening in openings.items():
        assert [p.rstrip("012") for p in dictionary[keyword][: len(opening)]] == opening
        words = text.confusable_words(keyword, dictionary, kws)
        assert len(words) >= 3
        for word in words:
            phones = [p.rstrip("012") for p in dictionary[word]]
            assert phones[: len(opening)] == opening, (keyword, word, phones)
            assert word.isalpha() and word not in kws and keyword not in word
    about = text.confusable_words("about", dictionary, kws)
    assert {"abound", "above", "abuse"} <= set(about)
    assert "abbey" not in about  # AE B IY: spelt like "about", heard otherwise
    assert "peep" in text.confusable_words("people", dictionary, kws)
    assert "some" in text.confusable_words("something", dictionary, kws)
    assert not {"hour", "hours"} & set(text.confusable_words("our", dictionary, kws))
    assert text.confusable_words("nosuchwordhere", dictionary, kws) == ()


def test_first_syllable_is_closed_by_the_next_consonant():
    assert text.first_syllable(["AH0", "B", "AW1", "T"]) == ("AH", "B")
    assert text.first_syllable(["G", "OW1", "IH0", "NG"]) == ("G", "OW")
    assert text.first_syllable(["HH", "AH1", "N", "D", "R", "AH0", "D"]) == ("HH", "AH", "N")
    assert text.first_syllable(["AW1", "ER0"]) == ("AW",)


def test_shipped_fillers_are_common_speakable_words_and_never_keywords():
    kws = keywords.load_keywords()
    confusables = text.shipped_confusables(tuple(kws))
    common = lm.model_and_vocabulary(text.CONFUSABLE_VOCABULARY)[1]
    dictionary = lm.read_pronunciations(lm.shipped_model_paths()[1])
    assert set(confusables) == set(kws)
    assert sum(bool(words) for words in confusables.values()) >= 10
    for keyword, words in confusables.items():
        assert not set(words) & set(kws)
        assert set(words) <= set(common)
        assert all(w.isalpha() and w in dictionary and keyword not in w for w in words)
    for keyword in ("about", "into", "our"):
        common_only = text.confusable_words(keyword, dictionary, kws, common)
        assert confusables[keyword] == common_only


def test_text_report_counts_each_share():
    kws = ["about", "people"]
    confusables = {"about": ("above",), "people": ()}
    utterances = [
        ["about", "people", "came"],  # first, adjacent
        ["we", "saw", "above", "about"],  # last, confusable
        ["nothing", "here"],
        ["people", "said", "about", "it"],  # first, two keywords apart
    ]
    report = text.text_report(utterances, kws, confusables)
    assert report == {
        "utterances": 4,
        "mean_keywords": 5 / 4,
        "keyword_first": 2 / 3,
        "keyword_last": 1 / 3,
        "adjacent_keywords": 1 / 2,
        "confusable_filler": 1 / 4,
    }
    assert text.text_report([], kws, confusables)["keyword_first"] == 0.0


@pytest.mark.parametrize(
    "field",
    ["edge_keyword_probability", "adjacent_keywords_probability", "confusable_filler_probability"],
)
@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan"), "0.3", True])
def test_bad_probabilities_are_refused_naming_the_field(field, value):
    with pytest.raises((TypeError, ValueError), match=f"TextConfig.{field}"):
        text.TextConfig(**{field: value})
