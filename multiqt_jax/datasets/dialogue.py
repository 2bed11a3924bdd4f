"""Emergency-call scripts: who says what, and which turns are questions or symptoms.

A call is a list of `Turn`s between a dispatcher and a caller. The dispatcher asks
protocol questions (the question classes of `multiqt_jax.labels`), each in one of many
paraphrases, plus distractor questions and statements that are background; the caller
answers, reports symptoms (the symptom classes) and says other things. Everything is
drawn from the `np.random.Generator` passed in. Each phrase pool is split in two halves
by `pool`: "calls" for the calls and "lm" for the recogniser's text.

`ScriptConfig()` asks `address` first in every call; `ScriptConfig(varied=True)` draws
scripts that do not give the answer away, and `script_report` measures what a model
could memorise of a set of scripts. Specification (the varied scripts' openings, orders,
repeats and their rates): docs/corpora.md#synthetic-calls-multiqt ("Scripts").
"""

from __future__ import annotations

import dataclasses

import numpy as np

from speechkit import checks

QUESTIONS: dict[str, tuple[str, ...]] = {
    "address": (
        "What is the address of the emergency?",
        "Where are you right now?",
        "What is your exact location?",
        "Can you tell me the address?",
        "Where exactly are you calling from?",
        "What street are you on?",
        "Where is the patient now?",
        "What is the address there?",
        "Which town are you in?",
        "What is the nearest cross street?",
        "Give me the address where you are.",
        "Where should we send the ambulance?",
    ),
    "phone_number": (
        "What is the phone number you are calling from?",
        "Can I get your phone number?",
        "What number can we reach you at?",
        "What is your call back number?",
        "Can you give me a number to call you back?",
        "What is the best number for you?",
        "Which phone are you calling on?",
        "Tell me your phone number please.",
        "What phone number are you on?",
        "If we get cut off, what number do I call?",
        "Is this number the one you are calling from?",
        "Can you read me your number?",
    ),
    "what_happened": (
        "Tell me exactly what happened.",
        "What is the problem?",
        "What is going on there?",
        "Can you tell me what happened?",
        "What is your emergency?",
        "Okay, tell me what is wrong.",
        "What happened to him?",
        "What is happening right now?",
        "Tell me what is going on.",
        "What made you call today?",
        "What exactly is the problem?",
        "Explain to me what happened.",
    ),
    "age": (
        "How old is the patient?",
        "What is her age?",
        "How old is he?",
        "About how old is the person?",
        "What age is the patient?",
        "How old is she?",
        "Do you know how old he is?",
        "What is his age?",
        "How old would you say she is?",
        "Is the patient an adult or a child?",
        "How many years old is he?",
        "Roughly what age is she?",
    ),
    "conscious": (
        "Is the patient awake?",
        "Is he conscious?",
        "Is she responding to you?",
        "Can the patient talk to you?",
        "Is he awake and alert?",
        "Does she open her eyes?",
        "Is he answering you?",
        "Is she conscious right now?",
        "Is he awake at all?",
        "Does he answer when you talk to him?",
        "Is she able to speak?",
        "Are his eyes open?",
    ),
    "breathing": (
        "Is the patient breathing?",
        "Is he breathing normally?",
        "Can you see her chest moving?",
        "Is she breathing at all?",
        "Is he breathing right now?",
        "Can you hear him breathing?",
        "Is the breathing normal?",
        "Is she still breathing?",
        "Is his chest going up and down?",
        "Is she breathing on her own?",
        "Can you feel him breathing?",
        "Is he taking breaths?",
    ),
}

SYMPTOMS: dict[str, tuple[str, ...]] = {
    "chest_pain": (
        "He has a terrible pain in his chest.",
        "My chest hurts so much.",
        "She says her chest is very tight.",
        "He is holding his chest in pain.",
        "He said his chest hurts.",
        "She has a bad pain in the chest.",
        "He feels pressure on his chest.",
        "She says it feels like a weight on her chest.",
        "His chest has been hurting for an hour.",
        "The pain in her chest is getting worse.",
    ),
    "breathing_difficulty": (
        "She can not breathe properly.",
        "He is struggling to breathe.",
        "She is gasping for air.",
        "He keeps saying he can not get air.",
        "She is breathing really fast and hard.",
        "He is short of breath.",
        "She can hardly breathe.",
        "He is wheezing and can not catch his breath.",
        "Her breathing sounds really bad.",
        "He is fighting for every breath.",
    ),
    "unconscious": (
        "He just collapsed and will not wake up.",
        "She passed out on the floor.",
        "He is not waking up.",
        "She fainted and is not moving.",
        "He is lying there and not answering me.",
        "She blacked out a minute ago.",
        "He is out cold.",
        "She will not respond to anything.",
        "He dropped to the ground and is not moving.",
        "She is unconscious on the kitchen floor.",
    ),
    "bleeding": (
        "There is blood everywhere.",
        "He cut his arm and it will not stop bleeding.",
        "She is bleeding from her head.",
        "He is losing a lot of blood.",
        "Her leg is bleeding badly.",
        "There is a deep cut on his hand.",
        "The bleeding will not stop.",
        "She has blood coming from her nose and mouth.",
        "He is bleeding through the towel.",
        "There is a lot of blood on the floor.",
    ),
    "seizure": (
        "He is shaking all over.",
        "She is having a seizure.",
        "His whole body is jerking.",
        "She started shaking and fell down.",
        "He is having a fit.",
        "She is shaking and her eyes rolled back.",
        "He is having a convulsion.",
        "Her arms and legs are jerking.",
        "He had a seizure and now he is confused.",
        "She is twitching all over.",
    ),
    "fall_injury": (
        "She fell down the stairs.",
        "He fell off a ladder.",
        "My mother fell and hurt her hip.",
        "He slipped and hit his head.",
        "She fell in the bathroom.",
        "He fell from the roof.",
        "She tripped and fell on the street.",
        "He fell and can not get up.",
        "My father fell and hit his face.",
        "She took a bad fall in the garden.",
    ),
}

DISTRACTOR_QUESTIONS = (
    "Are you still with me?",
    "Can you hear me?",
    "Is there a dog in the house?",
    "Did you unlock the front door?",
    "Are you somewhere safe?",
    "Is anyone else with you?",
    "Do you have a pen?",
    "Can you turn on the lights?",
)
DISPATCHER_STATEMENTS = (
    "Okay.",
    "Stay on the line with me.",
    "Help is on the way.",
    "I am sending an ambulance now.",
    "Listen carefully.",
    "Alright, thank you.",
    "Okay, I understand.",
    "Stay calm, we are coming.",
)
CALLER_STATEMENTS = (
    "Please hurry.",
    "I do not know.",
    "Oh my god.",
    "Okay.",
    "Yes.",
    "Please come quickly.",
    "I am so scared.",
    "Hold on.",
)
# Phrases of the varied scripts only (`ScriptConfig.varied`), split by `_half` like the
# questions and symptoms. None names or asks a protocol question.
GREETINGS = (  # the dispatcher's first words, of different lengths
    "Emergency services.",
    "Ambulance service.",
    "Nine one one, this is the emergency line.",
    "Hello, you are through to the ambulance service.",
    "Ambulance.",
    "Emergency.",
    "Emergency services, my name is Sam.",
    "Hello, emergency line, I am listening.",
)
CALLER_OPENINGS = (  # the caller asking for help before any question
    "Hello? I need help.",
    "Hello, is this the ambulance?",
    "Please, I need an ambulance.",
    "Hi, I need an ambulance right now.",
    "Hello? Hello? Please help me.",
    "Oh god, please send someone.",
    "I need help, something is wrong.",
    "Yes, hello, we need help here.",
)
ACKNOWLEDGEMENTS = (  # the dispatcher's reply to the caller's opening
    "Okay, I am listening.",
    "Alright, I hear you.",
    "Okay, I am here to help you.",
    "Alright, I am with you.",
    "Okay, try to stay calm.",
    "Okay, slow down for me.",
)
NOT_UNDERSTOOD = (  # the caller did not get the question
    "Sorry?",
    "Pardon?",
    "What?",
    "Sorry, what was that?",
    "What do you mean?",
    "Say that again?",
    "I did not hear you.",
    "I can not hear you well.",
    "I do not understand.",
    "I do not get it.",
)
DISPATCHER_TALK = (  # between a question and its asking again
    "Let me ask you again.",
    "Okay, listen to me.",
    "I need to know this.",
    "Stay with me.",
    "Take a deep breath.",
    "It is important.",
    "Okay, one more time.",
    "Focus on my voice.",
    "This will help us.",
    "I know it is hard.",
)
VARIED_PHRASES: dict[str, tuple[str, ...]] = {
    "greeting": GREETINGS,
    "caller_opening": CALLER_OPENINGS,
    "acknowledgement": ACKNOWLEDGEMENTS,
    "not_understood": NOT_UNDERSTOOD,
    "dispatcher_talk": DISPATCHER_TALK,
}
STREETS = ("Main", "Oak", "Park", "Lake", "Hill", "Church", "River", "Maple")
STREET_KINDS = ("street", "road", "avenue", "lane")
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
NUMBER_WORDS = ("twelve", "forty", "seventy", "one hundred", "two hundred", "eighty")
AGES = ("twenty", "thirty", "forty five", "fifty", "sixty", "seventy two", "eighty", "nine")

POOLS = ("calls", "lm")


@dataclasses.dataclass(frozen=True)
class Turn:
    speaker: str  # "dispatcher" or "caller"
    text: str
    question: str = "none"  # question class of this turn
    symptom: str = "none"  # symptom class of this turn


def _half(phrases: tuple[str, ...], pool: str) -> tuple[str, ...]:
    """Even-indexed phrases for the calls, odd-indexed ones for the LM text pool."""
    if pool not in POOLS:
        raise ValueError(f"pool: expected one of {POOLS}, got {pool!r}")
    return phrases[0::2] if pool == "calls" else phrases[1::2]


def _pick(rng: np.random.Generator, phrases) -> str:
    return phrases[int(rng.integers(len(phrases)))]


def _answer(rng: np.random.Generator, question: str, symptom: str, pool: str) -> Turn:
    """The caller's answer to a protocol question."""
    if question == "address":
        number = _pick(rng, NUMBER_WORDS)
        street = f"{_pick(rng, STREETS)} {_pick(rng, STREET_KINDS)}"
        text = _pick(rng, (f"{number} {street}.", f"I am at {number} {street}."))
    elif question == "phone_number":
        digits = " ".join(_pick(rng, DIGITS) for _ in range(7))
        text = _pick(rng, (f"It is {digits}.", f"My number is {digits}."))
    elif question == "age":
        text = _pick(rng, (f"He is {_pick(rng, AGES)}.", f"She is about {_pick(rng, AGES)}."))
    elif question in ("conscious", "breathing"):
        verb = "awake" if question == "conscious" else "breathing"
        text = _pick(rng, (f"Yes, he is {verb}.", f"No, she is not {verb}.", "I think so."))
    else:  # what happened: the answer reports a symptom
        return Turn("caller", _pick(rng, _half(SYMPTOMS[symptom], pool)), symptom=symptom)
    return Turn("caller", text)


@dataclasses.dataclass(frozen=True)
class ScriptConfig:
    """How call scripts are drawn. `varied=False` (the default) draws the plain scripts:
    `address` first, no opening, each question asked once (the very draws the built
    corpora were made with); the other fields then go unused. Chances are probabilities
    in [0, 1], per call unless a field says per protocol question; `repeat` and
    `rephrase` exclude each other, so their sum is at most 1. The opening's turn count
    is drawn uniformly from `opening_turns` (inclusive)."""

    varied: bool = False
    address_first: float = 0.6  # chance that `address` is the first protocol question
    opening_turns: tuple[int, int] = (0, 3)  # turns before the first question (min, max)
    caller_opens: float = 0.4  # chance that a call with an opening starts with the caller
    symptom_opening: float = 0.5  # chance a caller's opening turn reports the main symptom
    rephrase: float = 0.1  # chance per protocol question of asking it again, paraphrased
    repeat: float = 0.05  # chance per protocol question: not understood, asked word for word
    talk_between: float = 0.5  # chance of dispatcher talk before a question is asked again

    def __post_init__(self):
        if not isinstance(self.varied, bool):
            raise TypeError(f"ScriptConfig.varied: expected a bool, got {self.varied!r}")
        checks.require_interval("ScriptConfig.opening_turns", self.opening_turns)
        for bound in self.opening_turns:
            checks.require_int("ScriptConfig.opening_turns", bound, at_least=0)
        chances = (
            "address_first",
            "caller_opens",
            "symptom_opening",
            "rephrase",
            "repeat",
            "talk_between",
        )
        for name in chances:
            checks.require_number(
                f"ScriptConfig.{name}", getattr(self, name), at_least=0, at_most=1
            )
        checks.require_at_most(
            "ScriptConfig.rephrase", self.rephrase, "1 - ScriptConfig.repeat", 1 - self.repeat
        )


def generate_call(
    rng: np.random.Generator,
    protocol_questions: tuple[int, int] = (3, 6),
    pool: str = "calls",
    script: ScriptConfig = ScriptConfig(),
) -> tuple[Turn, ...]:
    """One call script: protocol questions with answers, distractors, symptom reports
    (one main symptom, sometimes a second) and filler statements. By default `address`
    comes first and the rest in random order; with `script.varied`, see `_varied_call`.

    protocol_questions: (min, max) number of protocol questions drawn (70% of the calls
    whose draw lacks `what_happened` ask it too).
    """
    if script.varied:
        return _varied_call(rng, protocol_questions, pool, script)
    asked = _asked(rng, protocol_questions)
    symptom = _pick(rng, tuple(SYMPTOMS))
    turns: list[Turn] = []
    for question in asked:
        turns.append(Turn("dispatcher", _pick(rng, _half(QUESTIONS[question], pool)), question))
        turns.append(_answer(rng, question, symptom, pool))
        turns.extend(_after_answer(rng, pool))
    turns.append(Turn("dispatcher", _pick(rng, DISPATCHER_STATEMENTS)))
    return tuple(turns)


def _asked(rng: np.random.Generator, protocol_questions: tuple[int, int]) -> list[str]:
    """The default order of the protocol questions asked: `address`, then (when drawn)
    `what_happened`, then the others drawn."""
    classes = list(QUESTIONS)
    count = int(rng.integers(protocol_questions[0], protocol_questions[1] + 1))
    asked = ["address"] + [str(c) for c in rng.permutation(classes[1:])][: max(0, count - 1)]
    if "what_happened" not in asked and rng.random() < 0.7:
        asked.insert(1, "what_happened")
    return asked


def _after_answer(rng: np.random.Generator, pool: str) -> list[Turn]:
    """What may follow an answer: a distractor question and the caller's reply (25%), a
    second symptom (15%), a dispatcher statement (20%) or nothing."""
    roll = rng.random()
    if roll < 0.25:
        return [
            Turn("dispatcher", _pick(rng, DISTRACTOR_QUESTIONS)),
            Turn("caller", _pick(rng, CALLER_STATEMENTS)),
        ]
    if roll < 0.4:
        second = _pick(rng, tuple(SYMPTOMS))
        return [Turn("caller", _pick(rng, _half(SYMPTOMS[second], pool)), symptom=second)]
    if roll < 0.6:
        return [Turn("dispatcher", _pick(rng, DISPATCHER_STATEMENTS))]
    return []


def _varied_call(
    rng: np.random.Generator, protocol_questions: tuple[int, int], pool: str, script: ScriptConfig
) -> tuple[Turn, ...]:
    """A script that does not give its questions away: an opening (`_opening`), the
    questions of `_asked` in a drawn order (`_varied_order`), each maybe asked again
    (`_asking`), and the default script's answers and what follows them."""
    order = _varied_order(rng, _asked(rng, protocol_questions), script)
    symptom = _pick(rng, tuple(SYMPTOMS))
    turns = _opening(rng, symptom, pool, script)
    for question in order:
        turns.extend(_asking(rng, question, pool, script))
        turns.append(_answer(rng, question, symptom, pool))
        turns.extend(_after_answer(rng, pool))
    turns.append(Turn("dispatcher", _pick(rng, DISPATCHER_STATEMENTS)))
    return tuple(turns)


def _varied_order(rng: np.random.Generator, asked: list[str], script: ScriptConfig) -> list[str]:
    """`asked` in a drawn order: `address` first with chance `script.address_first`,
    otherwise at a drawn later place (first all the same when it is the only question)."""
    others = [str(q) for q in rng.permutation([q for q in asked if q != "address"])]
    if rng.random() < script.address_first or not others:
        return ["address", *others]
    place = int(rng.integers(1, len(others) + 1))
    return [*others[:place], "address", *others[place:]]


def _opening(rng: np.random.Generator, symptom: str, pool: str, script: ScriptConfig) -> list[Turn]:
    """The turns before the first protocol question: as many as drawn from
    `script.opening_turns`, the speakers taking turns, the caller first with chance
    `script.caller_opens`. The dispatcher greets, then acknowledges the caller; the caller
    asks for help or reports the main symptom (chance `script.symptom_opening`)."""
    count = int(rng.integers(script.opening_turns[0], script.opening_turns[1] + 1))
    if count == 0:
        return []
    caller_first = rng.random() < script.caller_opens
    turns: list[Turn] = []
    for index in range(count):
        if (index % 2 == 0) == caller_first:
            turns.append(_caller_opening(rng, symptom, pool, script))
        else:
            greeted = any(turn.speaker == "dispatcher" for turn in turns)
            phrases = ACKNOWLEDGEMENTS if greeted else GREETINGS
            turns.append(Turn("dispatcher", _pick(rng, _half(phrases, pool))))
    return turns


def _caller_opening(
    rng: np.random.Generator, symptom: str, pool: str, script: ScriptConfig
) -> Turn:
    """A caller's turn before any question: the main symptom blurted out (chance
    `script.symptom_opening`) or a call for help."""
    if rng.random() < script.symptom_opening:
        return Turn("caller", _pick(rng, _half(SYMPTOMS[symptom], pool)), symptom=symptom)
    return Turn("caller", _pick(rng, _half(CALLER_OPENINGS, pool)))


def _asking(rng: np.random.Generator, question: str, pool: str, script: ScriptConfig) -> list[Turn]:
    """A protocol question asked once, or asked again: word for word after the caller
    did not understand (chance `script.repeat`), or in another paraphrase of the pool's
    half after the caller's non-answer (chance `script.rephrase`), with maybe dispatcher
    talk between (`_talk`). Every asking is labelled `question`."""
    phrases = _half(QUESTIONS[question], pool)
    first = _pick(rng, phrases)
    turns = [Turn("dispatcher", first, question)]
    roll = rng.random()
    if roll < script.repeat:
        turns.append(Turn("caller", _pick(rng, _half(NOT_UNDERSTOOD, pool))))
        again = first
    elif roll < script.repeat + script.rephrase:
        turns.append(Turn("caller", _pick(rng, CALLER_STATEMENTS)))
        again = _pick(rng, tuple(p for p in phrases if p != first))
    else:
        return turns
    turns.extend(_talk(rng, pool, script))
    turns.append(Turn("dispatcher", again, question))
    return turns


def _talk(rng: np.random.Generator, pool: str, script: ScriptConfig) -> list[Turn]:
    """With chance `script.talk_between`, dispatcher talk before a question is asked
    again: a statement, or a distractor question and the caller's reply (even odds)."""
    if rng.random() >= script.talk_between:
        return []
    if rng.random() < 0.5:
        return [Turn("dispatcher", _pick(rng, _half(DISPATCHER_TALK, pool)))]
    return [
        Turn("dispatcher", _pick(rng, DISTRACTOR_QUESTIONS)),
        Turn("caller", _pick(rng, CALLER_STATEMENTS)),
    ]


def language_model_text(rng: np.random.Generator, num_calls: int) -> list[str]:
    """Sentences of `num_calls` scripts drawn from the "lm" phrase pool, lower-cased.

    Always default (not varied) scripts: the built corpora's recogniser language models
    and the results recorded with them come from exactly these draws. So the language
    model never holds the varied scripts' greetings, caller openings, not-understood
    replies or dispatcher talk (neither half); their words outside its vocabulary are
    recognised as other words.
    """
    return [turn.text.lower() for _ in range(num_calls) for turn in generate_call(rng, pool="lm")]


def script_report(scripts) -> dict:
    """What a model could memorise of a set of call scripts (sequences of `Turn`s), for
    a corpus's build report: plain floats and dicts.

    - `calls`: the number of scripts;
    - `address_first`, `first_question`: the share of the scripts with a protocol
      question whose first one is `address`, and that share for each class;
    - `turns_before_first_question`, `words_before_first_question`: the mean and the
      0, 10, 50, 90 and 100% quantiles (keys "mean", "q0", "q10", "q50", "q90",
      "q100"), over those scripts, of the turns and of the words (whitespace-separated)
      said before the first protocol question;
    - `caller_opens`: the share of scripts whose first turn is the caller's;
    - `rephrased`, `repeated`, `asked_again`: the share of scripts asking a class again
      in another paraphrase, word for word, and either;
    - `class_share`: per question class, the share of scripts asking it.
    """
    scripts = [tuple(script) for script in scripts]
    if not scripts:
        raise ValueError("scripts: expected at least one call script, got none")
    starts = [(_first_question(script), script) for script in scripts]
    firsts = [script[index].question for index, script in starts if index is not None]
    before = [script[:index] for index, script in starts if index is not None]
    again = [_asked_again(script) for script in scripts]
    return {
        "calls": len(scripts),
        "address_first": _share(q == "address" for q in firsts),
        "first_question": {c: _share(q == c for q in firsts) for c in QUESTIONS},
        "turns_before_first_question": _distribution([len(turns) for turns in before]),
        "words_before_first_question": _distribution(
            [sum(len(turn.text.split()) for turn in turns) for turns in before]
        ),
        "caller_opens": _share(script[0].speaker == "caller" for script in scripts if script),
        "rephrased": _share("rephrased" in kinds for kinds in again),
        "repeated": _share("repeated" in kinds for kinds in again),
        "asked_again": _share(bool(kinds) for kinds in again),
        "class_share": {
            c: _share(any(t.question == c for t in script) for script in scripts) for c in QUESTIONS
        },
    }


def _first_question(script: tuple[Turn, ...]) -> int | None:
    """The index of the first protocol question's turn; None for a script without one."""
    return next((i for i, turn in enumerate(script) if turn.question != "none"), None)


def _asked_again(script: tuple[Turn, ...]) -> set[str]:
    """How the script asks a class again: "rephrased" (another text of the class) and/or
    "repeated" (the same text again)."""
    kinds, seen = set(), {}
    for turn in script:
        if turn.question == "none":
            continue
        texts = seen.setdefault(turn.question, set())
        if texts:
            kinds.add("repeated" if turn.text in texts else "rephrased")
        texts.add(turn.text)
    return kinds


def _share(flags) -> float:
    """The share of true `flags`; 0.0 for none."""
    flags = list(flags)
    return sum(map(bool, flags)) / len(flags) if flags else 0.0


def _distribution(values: list[int]) -> dict[str, float]:
    """Mean and 0/10/50/90/100% quantiles of `values` (all 0.0 for none)."""
    if not values:
        return {key: 0.0 for key in ("mean", "q0", "q10", "q50", "q90", "q100")}
    levels = (0, 10, 50, 90, 100)
    quantiles = np.percentile(values, levels)
    named = {f"q{level}": float(q) for level, q in zip(levels, quantiles, strict=True)}
    return {"mean": float(np.mean(values)), **named}
