"""Emergency-call scripts: who says what, and which turns are questions or symptoms.

A call is a list of `Turn`s between a dispatcher and a caller. The dispatcher asks
protocol questions (the question classes of `multiqt_jax.labels`), each in one of many
paraphrases, plus distractor questions and statements that are background; the caller
answers, reports symptoms (the symptom classes) and says other things. Everything is
drawn from the `np.random.Generator` passed in.

Each phrase pool is split in two halves by `pool`: "calls" for the calls themselves and
"lm" for text that trains the recogniser's language model, so the recogniser never sees
the evaluation calls' own sentences.
"""

from __future__ import annotations

import dataclasses

import numpy as np

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


def generate_call(
    rng: np.random.Generator, protocol_questions: tuple[int, int] = (3, 6), pool: str = "calls"
) -> tuple[Turn, ...]:
    """One call script: protocol questions in random order with answers, distractors,
    symptom reports (one main symptom, sometimes a second) and filler statements.

    protocol_questions: (min, max) number of protocol questions asked.
    """
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


def language_model_text(rng: np.random.Generator, num_calls: int) -> list[str]:
    """Sentences of `num_calls` scripts drawn from the "lm" phrase pool, lower-cased."""
    return [turn.text.lower() for _ in range(num_calls) for turn in generate_call(rng, pool="lm")]
