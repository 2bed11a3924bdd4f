"""multiqt_jax.datasets.dialogue: scripts, class coverage, pools, determinism; default
scripts pinned to today's draws; varied scripts (`ScriptConfig(varied=True)`) and
`script_report`."""

import hashlib
from collections import Counter

import numpy as np
import pytest

from ctc_jax.datasets.recogniser_text import transcript
from multiqt_jax import labels
from multiqt_jax.datasets import dialogue
from multiqt_jax.datasets.dialogue import Turn

VARIED = dialogue.ScriptConfig(varied=True)


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


# ---------------------------------------------------------------- default scripts, pinned


def _todays_call(rng, protocol_questions=(3, 6), pool="calls"):
    """`dialogue.generate_call` as it was before `ScriptConfig`, kept verbatim: the
    built corpora and recorded results depend on its draws."""
    from multiqt_jax.datasets.dialogue import (
        CALLER_STATEMENTS,
        DISPATCHER_STATEMENTS,
        DISTRACTOR_QUESTIONS,
        QUESTIONS,
        SYMPTOMS,
        _answer,
        _half,
        _pick,
    )

    classes = list(QUESTIONS)
    count = int(rng.integers(protocol_questions[0], protocol_questions[1] + 1))
    asked = ["address"] + [str(c) for c in rng.permutation(classes[1:])][: max(0, count - 1)]
    if "what_happened" not in asked and rng.random() < 0.7:
        asked.insert(1, "what_happened")
    symptom = _pick(rng, tuple(SYMPTOMS))
    turns: list[Turn] = []
    for question in asked:
        turns.append(Turn("dispatcher", _pick(rng, _half(QUESTIONS[question], pool)), question))
        turns.append(_answer(rng, question, symptom, pool))
        roll = rng.random()
        if roll < 0.25:
            turns.append(Turn("dispatcher", _pick(rng, DISTRACTOR_QUESTIONS)))
            turns.append(Turn("caller", _pick(rng, CALLER_STATEMENTS)))
        elif roll < 0.4:
            second = _pick(rng, tuple(SYMPTOMS))
            turns.append(Turn("caller", _pick(rng, _half(SYMPTOMS[second], pool)), symptom=second))
        elif roll < 0.6:
            turns.append(Turn("dispatcher", _pick(rng, DISPATCHER_STATEMENTS)))
    turns.append(Turn("dispatcher", _pick(rng, DISPATCHER_STATEMENTS)))
    return tuple(turns)


PINNED = [
    (seed, protocol_questions, pool)
    for seed in range(50)
    for protocol_questions in ((3, 6), (1, 2), (3, 5))
    for pool in dialogue.POOLS
]
# SHA-256 of the PINNED scripts (`_digest`), taken from generate_call before ScriptConfig.
PINNED_SHA256 = "7a86cda8a3e696eb4b188fbd86a161bdc0ca6c762a202fc5feeffafd34e99506"
# SHA-256 of language_model_text(default_rng([20_201_110, 1]), 200) joined by newlines.
LM_TEXT_SHA256 = "d91e4981b6b4f8949f9a794c50ee856a2626f250eb194e6280d2e088e1a9f66f"


def _digest(scripts) -> str:
    digest = hashlib.sha256()
    for script in scripts:
        for t in script:
            digest.update(repr((t.speaker, t.text, t.question, t.symptom)).encode())
        digest.update(b"|")
    return digest.hexdigest()


def test_default_scripts_are_todays_draw_for_draw():
    # Without `varied` the other fields go unused.
    unused = dialogue.ScriptConfig(address_first=0.0, opening_turns=(2, 2), repeat=1.0, rephrase=0)
    for seed, protocol_questions, pool in PINNED:
        rng_today = np.random.default_rng(seed)
        today = _todays_call(rng_today, protocol_questions, pool)
        for script in (dialogue.ScriptConfig(), unused):
            rng = np.random.default_rng(seed)
            assert dialogue.generate_call(rng, protocol_questions, pool, script) == today
            assert rng.bit_generator.state == rng_today.bit_generator.state  # same draws
    scripts = [dialogue.generate_call(np.random.default_rng(s), q, p) for s, q, p in PINNED]
    assert _digest(scripts) == PINNED_SHA256
    text = dialogue.language_model_text(np.random.default_rng([20_201_110, 1]), 200)
    assert hashlib.sha256("\n".join(text).encode()).hexdigest() == LM_TEXT_SHA256


# ------------------------------------------------------------------------ varied scripts


@pytest.fixture(scope="module")
def varied_scripts():
    """500 varied scripts of the "calls" pool, default protocol questions (3-6)."""
    return [
        dialogue.generate_call(np.random.default_rng([11, i]), script=VARIED) for i in range(500)
    ]


def test_varied_scripts_are_seeded_and_differ_from_the_default():
    for seed in range(20):
        first = dialogue.generate_call(np.random.default_rng(seed), script=VARIED)
        assert first == dialogue.generate_call(np.random.default_rng(seed), script=VARIED)
    scripts = {dialogue.generate_call(np.random.default_rng(s), script=VARIED) for s in range(20)}
    default = {dialogue.generate_call(np.random.default_rng(s)) for s in range(20)}
    assert len(scripts) == 20 and not scripts & default


def test_varied_scripts_share_within_bounds_of_the_config(varied_scripts):
    report = dialogue.script_report(varied_scripts)
    assert report["calls"] == 500
    assert abs(report["address_first"] - VARIED.address_first) < 0.07
    assert all(share > 0.03 for share in report["first_question"].values())
    low, high = VARIED.opening_turns
    turns = report["turns_before_first_question"]
    assert turns["q0"] == low and turns["q100"] == high and 1.2 < turns["mean"] < 1.8
    words = report["words_before_first_question"]
    assert words["q10"] < words["q50"] < words["q90"]
    # A call opens with the caller when it has an opening (3 of the 4 counts 0-3) and the
    # caller speaks first: 0.75 * caller_opens.
    assert 0.2 < report["caller_opens"] < 0.4
    assert 0.2 < report["rephrased"] < 0.55 and 0.05 < report["repeated"] < 0.35
    assert report["class_share"]["address"] == 1.0


def test_script_config_sets_the_shares():
    def report(**fields):
        script = dialogue.ScriptConfig(varied=True, **fields)
        scripts = [
            dialogue.generate_call(np.random.default_rng(i), script=script) for i in range(100)
        ]
        return dialogue.script_report(scripts)

    plain = report(address_first=1.0, opening_turns=(0, 0), rephrase=0, repeat=0)
    assert plain["address_first"] == 1.0 and plain["turns_before_first_question"]["q100"] == 0
    assert plain["asked_again"] == 0.0
    never = report(address_first=0.0, caller_opens=1.0, opening_turns=(1, 3), repeat=1, rephrase=0)
    assert never["address_first"] == 0.0 and never["caller_opens"] == 1.0
    assert never["repeated"] == 1.0 and never["rephrased"] == 0.0
    rephrased = report(rephrase=1.0, repeat=0.0)
    assert rephrased["rephrased"] == 1.0 and rephrased["repeated"] == 0.0


def _phrases(pool: str) -> dict[str, set[str]]:
    """What an unlabelled turn of each speaker may say in `pool`'s scripts, answers aside."""
    half = {kind: dialogue._half(p, pool) for kind, p in dialogue.VARIED_PHRASES.items()}
    dispatcher = (dialogue.DISTRACTOR_QUESTIONS, dialogue.DISPATCHER_STATEMENTS)
    caller = (dialogue.CALLER_STATEMENTS, half["caller_opening"], half["not_understood"])
    return {
        "dispatcher": set().union(
            *dispatcher, half["greeting"], half["acknowledgement"], half["dispatcher_talk"]
        ),
        "caller": set().union(*caller),
    }


@pytest.mark.parametrize("pool", dialogue.POOLS)
def test_varied_turns_come_from_their_pool_half_with_their_labels(pool):
    scripts = [
        dialogue.generate_call(np.random.default_rng([12, i]), (1, 6), pool, VARIED)
        for i in range(300)
    ]
    said = _phrases(pool)
    other = "lm" if pool == "calls" else "calls"
    others = {
        p for phrases in dialogue.VARIED_PHRASES.values() for p in dialogue._half(phrases, other)
    }
    questions = {p for phrases in dialogue.QUESTIONS.values() for p in phrases}
    for script in scripts:
        for index, turn in enumerate(script):
            assert turn.text not in others
            if turn.question != "none":
                assert turn.speaker == "dispatcher" and turn.symptom == "none"
                assert turn.text in dialogue._half(dialogue.QUESTIONS[turn.question], pool)
            elif turn.symptom != "none":
                assert turn.speaker == "caller"
                assert turn.text in dialogue._half(dialogue.SYMPTOMS[turn.symptom], pool)
            elif turn.text not in said[turn.speaker]:  # only an answer says anything else
                asked = [t for t in script[:index] if t.question != "none"]
                assert turn.speaker == "caller" and asked, turn
                assert turn.text not in questions
        asked = [t.question for t in script if t.question != "none"]
        assert "address" in asked and set(asked) <= set(dialogue.QUESTIONS)


def test_varied_scripts_ask_again_with_the_label(varied_scripts):
    kinds = Counter()
    for script in varied_scripts:
        seen: dict[str, str] = {}
        for index, turn in enumerate(script):
            if turn.question == "none":
                continue
            if turn.question in seen:
                between = script[seen[turn.question] + 1 : index]
                assert between and all(t.question == "none" for t in between)
                if between[0].text in dialogue._half(dialogue.NOT_UNDERSTOOD, "calls"):
                    assert turn.text == script[seen[turn.question]].text
                    kinds["repeated"] += 1
                else:
                    assert turn.text != script[seen[turn.question]].text
                    kinds["rephrased"] += 1
                kinds["talk"] += len(between) > 1
            seen[turn.question] = index
    assert kinds["repeated"] > 10 and kinds["rephrased"] > 10 and kinds["talk"] > 10


def test_varied_openings_name_no_question():
    questions = {transcript(p) for phrases in dialogue.QUESTIONS.values() for p in phrases}
    for kind, phrases in dialogue.VARIED_PHRASES.items():
        calls, lm = dialogue._half(phrases, "calls"), dialogue._half(phrases, "lm")
        assert len(calls) >= 3 and len(lm) >= 3, kind
        assert not {transcript(p) for p in calls} & {transcript(p) for p in lm}, kind
        assert not {transcript(p) for p in phrases} & questions, kind
    for kind in ("greeting", "acknowledgement", "dispatcher_talk"):
        assert not any(p.endswith("?") for p in dialogue.VARIED_PHRASES[kind]), kind


def test_script_config_errors_name_the_field():
    bad = {
        "address_first": 1.5,
        "caller_opens": -0.1,
        "symptom_opening": float("nan"),
        "talk_between": 2,
        "repeat": 1.1,
        "opening_turns": (3, 1),
    }
    for field, value in bad.items():
        with pytest.raises(ValueError, match=f"ScriptConfig.{field}"):
            dialogue.ScriptConfig(**{field: value})
    with pytest.raises(ValueError, match="ScriptConfig.opening_turns: expected an int >= 0"):
        dialogue.ScriptConfig(opening_turns=(-1, 2))
    with pytest.raises(TypeError, match="ScriptConfig.opening_turns: expected an int"):
        dialogue.ScriptConfig(opening_turns=(0.5, 2))
    with pytest.raises(ValueError, match=r"ScriptConfig.rephrase: expected <= 1 - ScriptConfig"):
        dialogue.ScriptConfig(repeat=0.6, rephrase=0.6)
    with pytest.raises(TypeError, match="ScriptConfig.varied: expected a bool"):
        dialogue.ScriptConfig(varied="yes")


# ------------------------------------------------------------------------- script_report


def test_script_report_of_known_scripts():
    ask = Turn("dispatcher", "Where are you right now?", "address")
    other = Turn("dispatcher", "What is the address there?", "address")
    age = Turn("dispatcher", "How old is he?", "age")
    hello = Turn("caller", "Hello? I need help.")
    sorry = Turn("caller", "Sorry?")
    scripts = [
        (hello, ask, sorry, ask, Turn("caller", "Main street.")),  # repeated
        (Turn("dispatcher", "Emergency services."), hello, age, other, ask),  # rephrased
        (Turn("dispatcher", "Okay."),),  # no question
    ]
    report = dialogue.script_report(scripts)
    assert report["calls"] == 3
    assert report["address_first"] == 0.5
    assert report["first_question"]["age"] == 0.5 and report["first_question"]["breathing"] == 0
    expected = {"mean": 1.5, "q0": 1.0, "q10": 1.1, "q50": 1.5, "q90": 1.9, "q100": 2.0}
    assert report["turns_before_first_question"] == pytest.approx(expected)
    assert report["words_before_first_question"]["q0"] == 4  # "Hello? I need help."
    assert report["words_before_first_question"]["q100"] == 6
    assert report["caller_opens"] == pytest.approx(1 / 3)
    assert report["repeated"] == pytest.approx(1 / 3) and report["rephrased"] == pytest.approx(
        1 / 3
    )
    assert report["asked_again"] == pytest.approx(2 / 3)
    assert report["class_share"]["address"] == pytest.approx(2 / 3)
    assert report["class_share"]["age"] == pytest.approx(1 / 3)
    assert set(report["class_share"]) == set(dialogue.QUESTIONS)
    with pytest.raises(ValueError, match="scripts: expected at least one"):
        dialogue.script_report([])
