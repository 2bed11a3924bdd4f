"""cskws_jax.keywords: the LibriTop-20 rule, and the stored list matches it."""

import pytest

from cskws_jax import keywords
from speechkit import lm


def test_syllables_count_vowel_phones():
    assert keywords.syllables(["P", "IY", "P", "AH", "L"]) == 2  # people
    assert keywords.syllables(["DH", "AH"]) == 1
    assert keywords.syllables(["AH0", "B", "AW1", "T"]) == 2  # stress digits are ignored


def test_rule_on_a_tiny_model(tmp_path):
    dictionary = tmp_path / "tiny.dict"
    dictionary.write_text(
        "the DH AH\nhello HH AH L OW\nhello(2) HH EH L OW\npatient P EY SH AH N T\n"
        "breathing B R IY DH IH NG\nis IH Z\nok OW K EY\nnowhere N OW W EH R\n"
    )
    sentences = [["the", "patient", "is", "breathing"]] * 3 + [["hello", "the", "patient"]] * 2
    lm.train_arpa(sentences + [["ok"]], tmp_path / "tiny.arpa", order=2)
    derived = keywords.derive_keywords(
        count=3, language_model=str(tmp_path / "tiny.arpa"), dictionary=str(dictionary)
    )
    # One-syllable words and words missing from the model never qualify.
    assert derived == ["patient", "breathing", "hello"]
    with pytest.raises(ValueError, match="only 4 words qualify, 9 asked for"):
        keywords.derive_keywords(
            count=9, language_model=str(tmp_path / "tiny.arpa"), dictionary=str(dictionary)
        )


def test_dictionary_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.dict"
    bad.write_text("hello HH AH L OW\nbroken\n")
    with pytest.raises(ValueError, match=r"bad.dict:2: a word without a pronunciation"):
        keywords.read_dictionary(bad)


def test_stored_list_is_the_derived_one():
    stored = keywords.load_keywords()
    assert len(stored) == 20 and len(set(stored)) == 20
    assert stored == keywords.derive_keywords()


def test_check_keywords_normalises_and_keeps_the_order():
    assert keywords.check_keywords("Weather, tomorrow  morning") == (
        "weather",
        "tomorrow",
        "morning",
    )
    assert keywords.check_keywords(["weather,", "morning"]) == ("weather", "morning")


@pytest.mark.parametrize(
    "words, message",
    [
        ("", "expected 1 to 100 words, got 0"),
        ("weather weather", r"each word once; repeated: \['weather'\]"),
        ("weather r2d2", r"letters and apostrophes only; got \['r2d2'\]"),
        (
            "weather xyzzyqq",
            r"not in the pronouncing dictionary cmudict-en-us.dict .*\['xyzzyqq'\]",
        ),
    ],
)
def test_check_keywords_names_what_is_wrong(words, message):
    with pytest.raises(ValueError, match=message):
        keywords.check_keywords(words)


def test_check_command_prints_pronunciations(capsys):
    assert keywords.main(["--check", "weather", "morning"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["weather\tW EH DH ER\t2 syllables", "morning\tM AO R N IH NG\t2 syllables"]
    assert keywords.main(["--check", "xyzzyqq"]) == 2
    assert "xyzzyqq" in capsys.readouterr().err
