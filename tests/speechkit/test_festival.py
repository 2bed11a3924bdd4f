"""speechkit.tts.festival: the optional Festival engine. The tests marked `needs_festival`
run the real binary (skipped where the Debian packages are not installed); the others
use no Festival (a missing binary, or a fake one on PATH)."""

import re
import shutil
import tempfile

import numpy as np
import pytest

from speechkit.tts import festival

SENTENCE = "Where are you calling from? My father fell down the stairs."
needs_festival = pytest.mark.skipif(
    not festival.available(), reason=f"Festival is not installed ({festival.INSTALL})"
)


# ------------------------------------------------------------------ without Festival


def test_a_missing_binary_is_reported_with_what_to_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    assert not festival.available() and festival.voices() == ()
    for call in (festival.require, lambda: festival.synthesize(SENTENCE, "kal_diphone")):
        with pytest.raises(RuntimeError) as error:
            call()
        message = str(error.value)
        assert "no `festival` on PATH" in message
        assert festival.INSTALL in message
        assert "espeak" in message and "piper" in message and "without it" in message


def test_a_missing_voice_names_its_package(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: "/opt/bin/festival")
    monkeypatch.setattr(festival, "_installed", lambda binary: ("kal_diphone", "other"))
    assert festival.voices() == ("kal_diphone",) and festival.available()
    festival.require("kal_diphone")
    with pytest.raises(RuntimeError, match="'ked_diphone' is not installed .*festvox-kdlpc16k"):
        festival.require("ked_diphone")
    monkeypatch.setattr(festival, "_installed", lambda binary: ())
    with pytest.raises(RuntimeError, match="Festival has none of the voices"):
        festival.require()


@pytest.fixture
def fake_festival(tmp_path, monkeypatch):
    """A `festival` on PATH that lists kal_diphone, then runs `body` (a shell snippet)
    for a synthesis; temporary files go under tmp_path/tmp."""

    def install(body: str) -> None:
        binary = tmp_path / "bin" / "festival"
        binary.parent.mkdir(exist_ok=True)
        binary.write_text(
            '#!/bin/sh\ncase "$2" in *voice.list*) echo "(kal_diphone)"; exit 0;; esac\n' + body
        )
        binary.chmod(0o755)
        (tmp_path / "tmp").mkdir(exist_ok=True)
        monkeypatch.setenv("PATH", str(binary.parent))
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))

    return install


def test_a_festival_failure_raises_with_its_stderr_and_the_text(fake_festival, tmp_path):
    fake_festival('echo "SIOD ERROR: something broke" >&2\nexit 3\n')
    with pytest.raises(RuntimeError) as error:
        festival.synthesize("Hello there, this is a rather long sentence to cut.", "kal_diphone")
    message = str(error.value)
    assert "exit code 3" in message and "SIOD ERROR: something broke" in message
    assert repr("Hello there, this is a rather long sentence to cut."[:40]) in message
    assert list((tmp_path / "tmp").iterdir()) == []  # the temporary folder is gone


def test_no_output_is_a_failure(fake_festival):
    fake_festival("exit 0\n")
    with pytest.raises(RuntimeError, match="no output written"):
        festival.synthesize("Hello.", "kal_diphone")


@pytest.mark.parametrize(
    "text, voice, stretch, error, pattern",
    [
        ("   ", "kal_diphone", 1.0, ValueError, "text: expected a non-empty string"),
        ("Hello.", "cmu_us_slt_arctic_clunits", 1.0, ValueError, "voice"),
        ("Hello.", "kal_diphone", 0.0, ValueError, "duration_stretch: expected > 0"),
    ],
)
def test_bad_arguments(text, voice, stretch, error, pattern):
    with pytest.raises(error, match=pattern):
        festival.synthesize(text, voice, stretch)


def test_text_is_folded_to_ascii_and_escaped_for_scheme():
    assert festival._ascii("Café “naïve”\tdéjà\n vu – ok ß €") == 'Cafe "naive" deja vu - ok ss'
    assert festival._scheme_string('a "b" \\c') == 'a \\"b\\" \\\\c'


# ------------------------------------------------------------------ with Festival


@pytest.fixture(scope="module")
def spoken():
    """voice -> festival.synthesize(SENTENCE, voice), for the installed voices."""
    return {voice: festival.synthesize(SENTENCE, voice) for voice in festival.voices()}


@needs_festival
def test_the_packaged_voices_are_found():
    assert set(festival.voices()) <= set(festival.VOICES)
    festival.require()


@needs_festival
def test_each_voice_speaks_every_word_in_order_with_energy(spoken):
    expected = [word.lower() for word in re.findall(r"[\w']+", SENTENCE)]
    for voice, (waveform, rate, words) in spoken.items():
        assert rate == (32_000 if "hts" in voice else 16_000), voice
        assert waveform.dtype == np.float32 and waveform.ndim == 1
        assert 0.05 < np.abs(waveform).max() <= 1.0
        duration = waveform.size / rate
        assert 2.0 < duration < 6.0, voice
        assert [word for word, _, _ in words] == expected, voice
        bounds = [t for _, start, end in words for t in (start, end)]
        assert bounds == sorted(bounds) and bounds[0] >= 0 and bounds[-1] <= duration, voice
        assert all(start < end for _, start, end in words), voice
        loud = np.sqrt(np.mean(waveform**2))
        for word, start, end in words:
            span = waveform[int(start * rate) : int(end * rate)]
            assert np.sqrt(np.mean(span**2)) > 0.2 * loud, (voice, word)
        # The pause after "from?" is quieter than the words.
        gap = waveform[int(words[4][2] * rate) : int(words[5][1] * rate)]
        assert gap.size > 0 and np.sqrt(np.mean(gap**2)) < 0.2 * loud, voice


@needs_festival
def test_deterministic(spoken):
    for voice, (waveform, rate, words) in spoken.items():
        again = festival.synthesize(SENTENCE, voice)
        np.testing.assert_array_equal(again[0], waveform)
        assert again[1:] == (rate, words)


@needs_festival
def test_duration_stretch_slows_every_voice(spoken):
    for voice, (waveform, rate, words) in spoken.items():
        slow, slow_rate, slow_words = festival.synthesize(SENTENCE, voice, duration_stretch=1.3)
        assert slow_rate == rate
        assert 1.15 < slow.size / waveform.size < 1.45, voice
        assert [w for w, _, _ in slow_words] == [w for w, _, _ in words]
        assert slow_words[-1][2] > 1.15 * words[-1][2], voice


@needs_festival
def test_quotes_backslashes_and_unicode_do_not_break_the_script(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    text = 'He said "stop\\" (quit) \\ and left; it\'s 25 “naïve” ) " \\"'
    waveform, rate, words = festival.synthesize(text, festival.voices()[0])
    # Festival reads each backslash as a word (spoken "backslash") named "\".
    assert [word for word, _, _ in words] == (
        ["he", "said", "stop", "\\", "quit", "\\", "and", "left", "it's"]
        + ["twenty", "five", "naive", "\\"]
    )
    assert np.abs(waveform).max() > 0.05 and words[-1][2] <= waveform.size / rate
    assert list(tmp_path.iterdir()) == []  # nothing left behind
