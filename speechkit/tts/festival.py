"""Speech synthesis with Festival, an optional engine from Debian packages.

    sudo apt-get install festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts

gives the `festival` binary and the three voices of `VOICES`. The module imports without
it; `available()` says whether it is here, and `require()` (called by `synthesize`)
raises a RuntimeError that says what to install. `synthesize(text, voice)` returns the
waveform at Festival's native rate and one (word, start_s, end_s) per word, as Festival
spells them. Words, timings and text: docs/speechkit.md, "tts.festival".

    >>> from speechkit.tts import festival
    >>> wave, rate, words = festival.synthesize("Where are you calling from?", "kal_diphone")
    >>> rate, [w for w, _, _ in words]
    (16000, ['where', 'are', 'you', 'calling', 'from'])
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
import unicodedata
import wave
from pathlib import Path

import numpy as np

from speechkit import checks

VOICES = ("kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts")
PACKAGES = {  # voice -> the Debian package that installs it
    "kal_diphone": "festvox-kallpc16k",
    "ked_diphone": "festvox-kdlpc16k",
    "cmu_us_slt_arctic_hts": "festvox-us-slt-hts",
}
INSTALL = "sudo apt-get install festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts"
_TIMEOUT_S = 120.0
# Characters NFKD leaves non-ASCII that have a plain spelling.
_PLAIN = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00df": "ss",
        "\u00e6": "ae",
        "\u00c6": "AE",
        "\u0153": "oe",
        "\u0152": "OE",
        "\u00f8": "o",
        "\u00d8": "O",
    }
)

# The script: select the voice, set the tempo (Duration_Stretch for the diphone voices;
# HTS voices ignore it and take hts_engine's speed rate "-r" instead, the later entry
# wins), synthesise, write the words of the Word relation that have segments and the
# waveform. Filled in with str.format.
_SCRIPT = """\
(voice_{voice})
(Parameter.set 'Duration_Stretch {stretch:.6f})
(if (eq? (Parameter.get 'Synth_Method) 'HTS)
  (set! hts_engine_params (append hts_engine_params (list (list "-r" {rate:.6f})))))
(set! utt (Utterance Text "{text}"))
(utt.synth utt)
(set! words_out (fopen "{words}" "w"))
(mapcar
  (lambda (w)
    (if (item.relation.daughter1 w 'SylStructure)
      (format words_out "%s\\t%s\\t%s\\n"
        (item.name w)
        (item.feat w "R:SylStructure.daughter1.daughter1.R:Segment.p.end")
        (item.feat w "word_end"))))
  (utt.relation.items utt 'Word))
(fclose words_out)
(utt.save.wave utt "{wav}" 'riff)
"""


def _binary() -> str | None:
    return shutil.which("festival")


@functools.lru_cache(maxsize=4)
def _installed(binary: str) -> tuple[str, ...]:
    """Every voice the Festival at `binary` lists (`(voice.list)`); () if it fails."""
    try:
        done = subprocess.run(
            [binary, "-b", "(print (voice.list))"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    listed = re.search(r"\(([^()]*)\)", done.stdout) if done.returncode == 0 else None
    return tuple(listed.group(1).split()) if listed else ()


def voices() -> tuple[str, ...]:
    """Those of `VOICES` that are installed here (in `VOICES` order); () without Festival."""
    binary = _binary()
    if binary is None:
        return ()
    installed = _installed(binary)
    return tuple(voice for voice in VOICES if voice in installed)


def available() -> bool:
    """Whether the `festival` binary is on PATH with at least one of `VOICES`."""
    return bool(voices())


def require(voice: str | None = None) -> None:
    """Raises RuntimeError, saying what to install, unless Festival (and `voice`, if
    given, else any of `VOICES`) is installed."""
    advice = (
        f"Install it with `{INSTALL}` (Debian/Ubuntu; from a clone of the toolkit `make "
        "voices` runs it; Festival is not pip-installable), "
        "or use a pip-installable engine of speechkit.tts (espeak, piper), which work "
        "without it."
    )
    if _binary() is None:
        raise RuntimeError(
            f"the Festival speech synthesiser is not installed (no `festival` on PATH). {advice}"
        )
    installed = voices()
    if voice is not None and voice not in installed:
        package = PACKAGES.get(voice, "festival")
        raise RuntimeError(
            f"the Festival voice {voice!r} is not installed (Debian package {package}; "
            f"installed: {', '.join(installed) or 'none'}). {advice}"
        )
    if not installed:
        raise RuntimeError(f"Festival has none of the voices {', '.join(VOICES)}. {advice}")


def _ascii(text: str) -> str:
    """`text` folded to ASCII for Festival: accents dropped, typographic punctuation made
    plain, whitespace and control characters and anything else made single spaces."""
    folded = unicodedata.normalize("NFKD", text.translate(_PLAIN))
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    folded = "".join(c if " " < c < "\x7f" else " " for c in folded)
    return " ".join(folded.split())


def _scheme_string(text: str) -> str:
    """`text` escaped for the inside of a Scheme string literal."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _tail(stderr: str, lines: int = 8) -> str:
    kept = [line for line in stderr.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:]) or "(no stderr)"


def synthesize(
    text: str, voice: str, duration_stretch: float = 1.0
) -> tuple[np.ndarray, int, list[tuple[str, float, float]]]:
    """Speaks `text` with the Festival `voice` (one of `VOICES`).

    Returns (waveform float32 [samples] in [-1, 1], Festival's native sample rate in Hz,
    [(word, start_s, end_s), ...] for the words of Festival's Word relation that have
    segments, in order, lower-cased). duration_stretch: > 1 speaks slower (Festival's
    Duration_Stretch; for an HTS voice, hts_engine's speed rate 1 / duration_stretch).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text: expected a non-empty string, got {text!r}")
    checks.require_choice("voice", voice, VOICES)
    stretch = float(checks.require_number("duration_stretch", duration_stretch, above=0))
    require(voice)
    plain = _ascii(text)
    if not plain:
        raise ValueError(f"text: nothing Festival can read (no ASCII) in {text[:40]!r}")
    with tempfile.TemporaryDirectory(prefix="festival-") as folder:
        script, words_path, wav_path = (Path(folder) / n for n in ("s.scm", "w.tsv", "o.wav"))
        script.write_text(
            _SCRIPT.format(
                voice=voice,
                stretch=stretch,
                rate=1.0 / stretch,
                text=_scheme_string(plain),
                words=_scheme_string(str(words_path)),
                wav=_scheme_string(str(wav_path)),
            ),
            encoding="ascii",
        )
        try:
            done = subprocess.run(
                [_binary() or "festival", "-b", str(script)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=_TIMEOUT_S,
                cwd=folder,
            )
        except subprocess.TimeoutExpired as err:
            raise RuntimeError(
                f"festival took over {_TIMEOUT_S:.0f} s on {text[:40]!r}; stopped"
            ) from err
        problem = None
        if done.returncode != 0:
            problem = f"exit code {done.returncode}"
        elif "SIOD ERROR" in done.stdout + done.stderr:
            problem = "a Scheme error"
        elif not wav_path.exists() or not words_path.exists():
            problem = "no output written"
        if problem is not None:
            raise RuntimeError(
                f"festival failed ({problem}) on {text[:40]!r} with voice {voice!r}:\n"
                + _tail(done.stderr + "\n" + done.stdout)
            )
        with wave.open(str(wav_path), "rb") as reader:
            rate, width, channels = (
                reader.getframerate(),
                reader.getsampwidth(),
                reader.getnchannels(),
            )
            frames = reader.readframes(reader.getnframes())
        lines = words_path.read_text(encoding="ascii", errors="replace").splitlines()
    if width != 2 or channels != 1:
        raise RuntimeError(
            f"festival wrote {channels} channel(s) of {8 * width}-bit samples for "
            f"{text[:40]!r}; expected mono 16-bit"
        )
    waveform = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    if waveform.size == 0 or not lines:
        raise RuntimeError(f"festival produced no speech for {text[:40]!r} ({voice!r})")
    duration = waveform.size / rate
    words = []
    for line in lines:
        name, start, end = line.rsplit("\t", 2)
        end_s = min(float(end), duration)
        words.append((name.lower(), round(min(float(start), end_s), 6), round(end_s, 6)))
    return waveform, int(rate), words
