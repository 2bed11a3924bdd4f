"""cskws_jax.datasets.text: seeded n-gram sentences with a drawn number of keywords."""

import numpy as np

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
