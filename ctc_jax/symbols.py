"""The character recogniser's output symbols: `speechkit.asr`'s 29 and a word boundary.

    ids = encode("call me back")      # int32 [12]
    decode_ids(ids) == "call me back"

Ids: blank 0 (CTC's), the letters and the apostrophe of `speechkit.asr.ALPHABET` 1-27,
unknown 28 (`speechkit.asr.UNKNOWN`), space 29 (`SPACE`, between words). The first
`speechkit.asr.NUM_SYMBOLS` ids are those of `speechkit.asr.char_frames`, so the
recogniser's posteriors and rendered words share their columns.
"""

from __future__ import annotations

import numpy as np

from speechkit import asr

BLANK = asr.BLANK
UNKNOWN = asr.UNKNOWN
SPACE = asr.NUM_SYMBOLS  # 29
NUM_SYMBOLS = asr.NUM_SYMBOLS + 1  # 30
_CHARACTERS = "_" + asr.ALPHABET + "?" + " "  # printable form of every id ("_" blank)


def normalise_text(text: str) -> str:
    """`text` as the recogniser spells it: `speechkit.asr.normalise_words`d words, one space
    between them ("Is he breathing?" -> "is he breathing")."""
    return " ".join(asr.normalise_words(text))


def encode(text: str) -> np.ndarray:
    """int32 [len(text)]: the ids of an already normalised `text` (lower case letters,
    apostrophes, single spaces); any other character is UNKNOWN."""
    ids = np.full(len(text), UNKNOWN, np.int32)
    for i, character in enumerate(text):
        if character == " ":
            ids[i] = SPACE
        elif character in asr.ALPHABET:
            ids[i] = asr.ALPHABET.index(character) + 1
    return ids


def decode_ids(ids) -> str:
    """The text of symbol ids (blanks dropped; UNKNOWN as "?")."""
    return "".join(_CHARACTERS[int(i)] for i in np.asarray(ids).reshape(-1) if int(i) != BLANK)


def character(symbol: int) -> str:
    """The printable character of one id ("_" for blank)."""
    return _CHARACTERS[int(symbol)]
