"""The keyword list of the synthetic KWS corpus, by LibriTop-20's rule.

LibriTop-20 takes the 20 most frequent words with at least two syllables. Here the
frequency is the unigram probability of pocketsphinx's shipped en-us language model and
the syllables are the vowel phones of its shipped pronouncing dictionary (first
pronunciation). The list is stored as data (`cskws_jax/data/keywords.json`); this
module derives it again:

    python -m cskws_jax.keywords            # print the derived list
    python -m cskws_jax.keywords --write    # rewrite cskws_jax/data/keywords.json
    python -m cskws_jax.keywords --check weather tomorrow   # words a corpus can use?

A corpus of your own keywords (`check_keywords`: words of the pronouncing dictionary)
is built and trained on by `python -m experiments.own_keywords`.
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
MAX_KEYWORDS = 100  # a corpus's keywords (each needs occurrences in every split)


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


def check_keywords(words, dictionary: str | None = None) -> tuple[str, ...]:
    """`words` (a string or strings of words separated by commas or spaces) as a tuple
    of keywords in class order, lower-cased. Raises ValueError naming the offending words
    unless there are 1 to `MAX_KEYWORDS` distinct words, each of letters and apostrophes
    and in the pronouncing dictionary (default: pocketsphinx's shipped en-us one), which
    the corpus's forced alignment needs."""
    text = words if isinstance(words, str) else " ".join(str(word) for word in words)
    words = tuple(text.replace(",", " ").lower().split())
    if not 1 <= len(words) <= MAX_KEYWORDS:
        raise ValueError(f"keywords: expected 1 to {MAX_KEYWORDS} words, got {len(words)}")
    repeated = sorted({word for word in words if words.count(word) > 1})
    if repeated:
        raise ValueError(f"keywords: each word once; repeated: {repeated}")
    odd = [word for word in words if not word.replace("'", "").isalpha()]
    if odd:
        raise ValueError(f"keywords: words of letters and apostrophes only; got {odd}")
    path = dictionary or shipped_model_paths()[1]
    known = lm.read_pronunciations(path)
    missing = [word for word in words if word not in known]
    if missing:
        raise ValueError(
            f"keywords: not in the pronouncing dictionary {os.path.basename(path)} "
            f"({len(known):,} words), which the corpus's forced alignment needs: {missing}; "
            "choose words it has (python -m cskws_jax.keywords --check WORD... prints "
            "each word's pronunciation)"
        )
    return words


def load_keywords() -> list[str]:
    """The stored keyword list (class ids follow its order)."""
    return json.loads(KEYWORDS_FILE.read_text())["keywords"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {KEYWORDS_FILE}")
    parser.add_argument(
        "--check",
        nargs="+",
        metavar="WORD",
        help="check words as keywords and print their pronunciations and syllables",
    )
    args = parser.parse_args(argv)
    if args.check:
        return check_main(args.check)
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


def check_main(words) -> int:
    """Prints each word's pronunciation and syllables (status 0), or the reason the words
    cannot be keywords (status 2)."""
    try:
        words = check_keywords(words)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    known = lm.read_pronunciations(shipped_model_paths()[1])
    for word in words:
        print(f"{word}\t{' '.join(known[word])}\t{syllables(known[word])} syllables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
