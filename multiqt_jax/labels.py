"""Class sets of the two MultiQT tasks. Index 0 is the background class in both."""

from __future__ import annotations

QUESTION_CLASSES: tuple[str, ...] = (
    "none",  # not a protocol question: other speech, distractor questions, silence
    "address",
    "phone_number",
    "what_happened",
    "age",
    "conscious",
    "breathing",
)

SYMPTOM_CLASSES: tuple[str, ...] = (
    "none",  # no symptom reported here
    "chest_pain",
    "breathing_difficulty",
    "unconscious",
    "bleeding",
    "seizure",
    "fall_injury",
)

TASKS: dict[str, tuple[str, ...]] = {"questions": QUESTION_CLASSES, "symptoms": SYMPTOM_CLASSES}


def classes(task: str) -> tuple[str, ...]:
    """The class names of a task ('questions' or 'symptoms')."""
    if task not in TASKS:
        raise ValueError(f"task: expected one of {sorted(TASKS)}, got {task!r}")
    return TASKS[task]
