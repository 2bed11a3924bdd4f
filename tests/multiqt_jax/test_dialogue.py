"""multiqt_jax.datasets.dialogue: scripts, class coverage, pools, determinism."""

from collections import Counter

import numpy as np

from multiqt_jax import labels
from multiqt_jax.datasets import dialogue


def test_classes_have_paraphrases_in_both_pools():
    assert set(dialogue.QUESTIONS) == set(labels.QUESTION_CLASSES[1:])
    assert set(dialogue.SYMPTOMS) == set(labels.SYMPTOM_CLASSES[1:])
    for table in (dialogue.QUESTIONS, dialogue.SYMPTOMS):
        for phrases in table.values():
            calls, lm = dialogue._half(phrases, "calls"), dialogue._half(phrases, "lm")
            assert len(calls) >= 3 and len(lm) >= 3 and not set(calls) & set(lm)


def test_scripts_cover_every_class_and_are_seeded():
    scripts = [dialogue.generate_call(np.random.default_rng(i)) for i in range(60)]
    questions = Counter(t.question for s in scripts for t in s)
    symptoms = Counter(t.symptom for s in scripts for t in s)
    assert set(questions) == set(labels.QUESTION_CLASSES)
    assert set(symptoms) == set(labels.SYMPTOM_CLASSES)
    assert all(s[0].question == "address" for s in scripts)  # calls open with the address
    assert any(t.question == "none" and t.text.endswith("?") for s in scripts for t in s)
    assert dialogue.generate_call(np.random.default_rng(7)) == dialogue.generate_call(
        np.random.default_rng(7)
    )


def test_language_model_text_never_uses_call_paraphrases():
    call_phrases = {
        p.lower()
        for table in (dialogue.QUESTIONS, dialogue.SYMPTOMS)
        for phrases in table.values()
        for p in dialogue._half(phrases, "calls")
    }
    text = dialogue.language_model_text(np.random.default_rng(0), 50)
    assert text and not call_phrases & set(text)
