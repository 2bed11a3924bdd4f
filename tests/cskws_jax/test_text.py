"""cskws_jax.datasets.text: seeded n-gram sentences with a drawn number of keywords."""

import numpy as np

from cskws_jax import keywords
from cskws_jax.datasets import text


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
    _, vocabulary = text._model_and_vocabulary(config.vocabulary_size)
    allowed = set(vocabulary) | set(kws)
    for words, wanted in first:
        assert 0 <= wanted <= config.max_keywords
        assert sum(w in kws for w in words) == wanted
        assert config.min_words <= len(words) <= config.max_words + config.max_keywords
        assert set(words) <= allowed


def test_the_model_is_used_with_its_history():
    # "states" after "united" must be far likelier than after an unrelated word.
    model, vocabulary = text._model_and_vocabulary(3000)
    states = vocabulary.index("states")
    after_united = text._next_word_probabilities(model, vocabulary, ["<s>", "the", "united"])
    after_fish = text._next_word_probabilities(model, vocabulary, ["<s>", "the", "fish"])
    assert after_united[states] > 100 * after_fish[states]
