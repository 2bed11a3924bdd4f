"""The keyword list of the synthetic KWS corpus, by LibriTop-20's rule.

LibriTop-20 takes the 20 most frequent words with at least two syllables. Here the
frequency is the unigram probability of pocketsphinx's shipped en-us language model and
the syllables are the vowel phones of its shipped pronouncing dictionary (first
pronunciation). The list is stored as data (`cskws_jax/data/keywords.json`); this
module derives it again:

    python -m cskws_jax.keywords            # print the derived list
    python -m cskws_jax.keywords --write    # rewrite cskws_jax/data/keywords.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from speechkit import files, lm

VOWELS = frozenset(
    {"AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH", "UW"}
)
KEYWORDS_FILE = Path(__file__).parent / "data" / "keywords.json"


def syllables(phones) -> int:
    """Vowel phones in an ARPAbet pronunciation (stress digits, if any, ignored)."""
    return sum(phone.rstrip("012") in VOWELS for phone in phones)


def read_dictionary(path: str | os.PathLike) -> dict[str, int]:
    """word -> syllables of its first pronunciation, for a CMU-style dictionary file
    (`speechkit.lm.read_pronunciations`; its errors name the file and line)."""
    return {word: syllables(phones) for word, phones in lm.read_pronunciations(path).items()}


def shipped_model_paths() -> tuple[str, str]:
    """(trigram model, dictionary) of pocketsphinx's shipped en-us model
    (`speechkit.lm.shipped_model_paths`)."""
    return lm.shipped_model_paths()


def derive_keywords(
    count: int = 20,
    min_syllables: int = 2,
    language_model: str | None = None,
    dictionary: str | None = None,
) -> list[str]:
    """The `count` most probable alphabetic words with >= `min_syllables` syllables."""
    from pocketsphinx import Config, LogMath, NGramModel

    shipped_lm, shipped_dict = shipped_model_paths()
    model = NGramModel(Config(), LogMath(), language_model or shipped_lm)
    unknown = model.prob(["<no-such-word-in-any-model>"])
    scored = []
    for word, syllable_count in read_dictionary(dictionary or shipped_dict).items():
        if syllable_count >= min_syllables and word.isalpha():
            score = model.prob([word])
            if score > unknown:
                scored.append((-score, word))
    scored.sort()
    if len(scored) < count:
        raise ValueError(f"only {len(scored)} words qualify, {count} asked for")
    return [word for _, word in scored[:count]]


def load_keywords() -> list[str]:
    """The stored keyword list (class ids follow its order)."""
    return json.loads(KEYWORDS_FILE.read_text())["keywords"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {KEYWORDS_FILE}")
    args = parser.parse_args(argv)
    keywords = derive_keywords()
    print(" ".join(keywords))
    if args.write:
        payload = {
            "rule": "20 most probable unigrams of pocketsphinx en-us.lm.bin with >= 2 "
            "syllables in cmudict-en-us.dict (first pronunciation), alphabetic only",
            "command": "python -m cskws_jax.keywords --write",
            "keywords": keywords,
        }
        files.write_json(KEYWORDS_FILE, payload)
        print(f"wrote {KEYWORDS_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
