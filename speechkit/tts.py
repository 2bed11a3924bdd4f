"""Speech synthesis with espeak-ng (the `espeakng-loader` wheel, through ctypes).

No system install: the wheel ships `libespeak-ng.so` and its data (voices, dictionaries,
~60 voice variants). `synthesize(text, voice)` returns the waveform and a timing for every
word of the text, taken from espeak's word events (sample-exact onsets).

espeak sometimes folds a short function word into its neighbour's event ("of the
emergency" gives events for "of" and "emergency" only). Such words share their group's
span, split in proportion to their letters, and carry `exact=False`; forced alignment
(`speechkit.asr`) refines them. Word ends are the next event's onset with the trailing
silence trimmed.

Determinism: espeak-ng keeps state between calls inside the C library (pitch flutter,
its random generator), so the same text comes out slightly different each time in one
process. Each utterance is therefore synthesised in a child forked from a pristine,
single-threaded synthesis server (a subprocess started once), with the random
generators seeded from `seed`: same text, voice and seed -> the same samples, whatever
ran before.

    >>> from speechkit import tts
    >>> speech = tts.synthesize("Where are you calling from?", tts.Voice(variant="f3"))
    >>> [w.text for w in speech.words], speech.sample_rate
    (['Where', 'are', 'you', 'calling', 'from'], 16000)
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import pickle
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection

import numpy as np

from speechkit import checks
from speechkit.channel import resample

ESPEAK_RATE = 22_050  # Hz, espeak-ng's native output rate
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EVENT_LIST_TERMINATED, _EVENT_WORD = 0, 1
_PARAMETERS = {"rate": 1, "volume": 2, "pitch": 3, "range": 4, "wordgap": 7}
_WORD = re.compile(r"[\w']+")


@dataclasses.dataclass(frozen=True)
class Voice:
    """An espeak-ng voice: language, optional variant (`variants()`), prosody."""

    language: str = "en-us"
    variant: str | None = None  # e.g. "f3", "m2", "Andy"; None = the language's default
    rate: int = 170  # words per minute, 80..450
    pitch: int = 50  # 0..99
    pitch_range: int = 50  # 0..99, 0 = monotone
    word_gap: int = 0  # extra pause between words, in 10 ms units

    def __post_init__(self):
        for name, low, high in (("rate", 80, 450), ("pitch", 0, 99), ("pitch_range", 0, 99)):
            checks.require_int(f"Voice.{name}", getattr(self, name), at_least=low, at_most=high)
        checks.require_int("Voice.word_gap", self.word_gap, at_least=0)
        # Not checks.require_choice: its error would list all ~110 shipped variants.
        if self.variant is not None and self.variant not in variants():
            raise ValueError(
                f"Voice.variant: unknown variant {self.variant!r}; see speechkit.tts.variants()"
            )

    @property
    def name(self) -> str:
        return self.language if self.variant is None else f"{self.language}+{self.variant}"


@dataclasses.dataclass(frozen=True)
class WordTiming:
    """One word of the input text and where it is in the audio."""

    text: str
    start: float  # seconds
    end: float  # seconds
    char_start: int  # offset of the word in the input text
    exact: bool  # False when espeak folded it into a neighbour's event (start/end estimated)


@dataclasses.dataclass(frozen=True)
class Synthesis:
    waveform: np.ndarray  # float32 [samples] in [-1, 1]
    sample_rate: int  # Hz
    words: tuple[WordTiming, ...]

    @property
    def duration(self) -> float:
        return self.waveform.shape[0] / self.sample_rate


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),  # 1-based character offset
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),  # ms
        ("sample", ctypes.c_int),  # sample offset in the output
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


class _Engine:
    """The process's espeak-ng instance (the C library is a singleton)."""

    def __init__(self):
        import espeakng_loader

        self.data_path = espeakng_loader.get_data_path()
        self.lib = ctypes.CDLL(espeakng_loader.get_library_path())
        self.lib.espeak_Initialize.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
        ]
        self.lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self.lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        rate = self.lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, self.data_path.encode(), _INITIALIZE_DONT_EXIT
        )
        if rate != ESPEAK_RATE:
            raise RuntimeError(f"espeak-ng failed to initialise (returned {rate})")
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[int, int]] = []  # (0-based char offset, sample) per word
        self._callback = _CALLBACK(self._collect)  # kept alive as long as the engine
        self.lib.espeak_SetSynthCallback(self._callback)
        self.lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        self.libc = ctypes.CDLL(None)

    def _collect(self, samples, count, events) -> int:
        if count > 0:
            self._chunks.append(np.ctypeslib.as_array(samples, shape=(count,)).copy())
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            if events[i].type == _EVENT_WORD:
                self._events.append((events[i].text_position - 1, events[i].sample))
            i += 1
        return 0

    def synthesize(self, text: str, voice: Voice, seed: int):
        """(int16 samples at 22.05 kHz, word events). Mutates the library's state."""
        self._chunks, self._events = [], []
        self.libc.srand(seed & 0xFFFFFFFF)
        self.lib.espeak_ng_SetRandSeed(seed)
        if self.lib.espeak_SetVoiceByName(voice.name.encode()) != 0:
            raise ValueError(f"espeak-ng has no voice {voice.name!r}")
        settings = {
            "rate": voice.rate,
            "volume": 100,
            "pitch": voice.pitch,
            "range": voice.pitch_range,
            "wordgap": voice.word_gap,
        }
        for name, value in settings.items():
            self.lib.espeak_SetParameter(_PARAMETERS[name], value, 0)
        encoded = text.encode("utf-8")
        status = self.lib.espeak_Synth(
            encoded, len(encoded) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
        )
        if status != 0:
            raise RuntimeError(f"espeak-ng could not synthesise {text[:40]!r} ({status})")
        self.lib.espeak_Synchronize()
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        return audio, list(self._events)

    def synthesize_pristine(self, text: str, voice: Voice, seed: int):
        """`synthesize` in a forked child, so this engine's state never changes."""
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: synthesise, send, exit without cleanup handlers
            os.close(read_end)
            try:
                payload = pickle.dumps(("ok", self.synthesize(text, voice, seed)))
            except BaseException as err:  # noqa: BLE001 - reported to the parent
                payload = pickle.dumps(("error", (type(err).__name__, str(err))))
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as source:
            payload = source.read()
        os.waitpid(pid, 0)
        if not payload:
            return "error", ("RuntimeError", "the synthesis child died without an answer")
        return pickle.loads(payload)


def _serve(read_fd: int, write_fd: int) -> None:
    """The synthesis server's loop (run as `python -c`, a single-threaded process)."""
    engine = _Engine()
    requests, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    while True:
        try:
            request = requests.recv()
        except EOFError:  # the client went away
            return
        replies.send(engine.synthesize_pristine(*request))


class _Server:
    """Client side of the synthesis server; one per process, requests serialised.

    The server is a plain subprocess (not multiprocessing), so it never re-imports the
    caller's __main__: scripts need no `if __name__ == "__main__"` guard.
    """

    def __init__(self):
        to_server_read, to_server_write = os.pipe()
        from_server_read, from_server_write = os.pipe()
        code = f"from speechkit.tts import _serve; _serve({to_server_read}, {from_server_write})"
        # One BLAS thread: the server forks per utterance and should stay single-threaded.
        environment = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            pass_fds=(to_server_read, from_server_write),
            stdin=subprocess.DEVNULL,
            env=environment,
        )
        os.close(to_server_read)
        os.close(from_server_write)
        self.requests = Connection(to_server_write, readable=False)
        self.replies = Connection(from_server_read, writable=False)
        self.lock = threading.Lock()

    def synthesize(self, text: str, voice: Voice, seed: int):
        with self.lock:
            try:
                self.requests.send((text, voice, seed))
                status, value = self.replies.recv()
            except (EOFError, OSError) as err:
                raise RuntimeError(
                    f"the espeak-ng synthesis server stopped (exit code {self.process.poll()})"
                ) from err
        if status == "ok":
            return value
        kind, message = value
        raise (ValueError if kind == "ValueError" else RuntimeError)(message)


@functools.lru_cache(maxsize=1)
def _server() -> _Server:
    return _Server()


@functools.lru_cache(maxsize=1)
def variants() -> tuple[str, ...]:
    """Names of the voice variants shipped with the wheel (for `Voice.variant`)."""
    import espeakng_loader

    folder = os.path.join(espeakng_loader.get_data_path(), "voices", "!v")
    return tuple(sorted(os.listdir(folder)))


def draw_voice(
    rng: np.random.Generator,
    variants: Sequence[str],
    rate_wpm: tuple[int, int],
    pitch: tuple[int, int],
) -> Voice:
    """A voice drawn from `rng`: one of `variants`, then a rate (words per minute) and a
    pitch, each uniform over its inclusive (low, high) range; three draws, in that order."""
    return Voice(
        variant=variants[int(rng.integers(len(variants)))],
        rate=int(rng.integers(rate_wpm[0], rate_wpm[1] + 1)),
        pitch=int(rng.integers(pitch[0], pitch[1] + 1)),
    )


def _trim_silence(waveform: np.ndarray, start: int, end: int, threshold: float) -> int:
    """Last sample in [start, end) above the threshold (+1), or start if none."""
    loud = np.flatnonzero(np.abs(waveform[start:end]) > threshold)
    return start + int(loud[-1]) + 1 if loud.size else start


def _word_timings(text, waveform, events, rate) -> tuple[WordTiming, ...]:
    tokens = [(m.group(), m.start()) for m in _WORD.finditer(text)]
    if not tokens:
        return ()
    onsets = sorted(events) or [(tokens[0][1], 0)]
    onsets[0] = (min(onsets[0][0], tokens[0][1]), onsets[0][1])  # leading tokens join
    boundaries = [sample for _, sample in onsets[1:]] + [waveform.shape[0]]
    threshold = 0.02 * max(float(np.abs(waveform).max(initial=0.0)), 1e-9)
    groups: dict[int, list[tuple[str, int]]] = {}
    for token, offset in tokens:
        group = max(i for i, (char, _) in enumerate(onsets) if char <= offset)
        groups.setdefault(group, []).append((token, offset))
    words = []
    for group, members in sorted(groups.items()):
        start = onsets[group][1]
        end = max(_trim_silence(waveform, start, boundaries[group], threshold), start + 1)
        letters = np.cumsum([0] + [len(token) for token, _ in members])
        for k, (token, offset) in enumerate(members):
            word_start = start + (end - start) * letters[k] / letters[-1]
            word_end = start + (end - start) * letters[k + 1] / letters[-1]
            words.append(
                WordTiming(
                    token,
                    float(word_start / rate),
                    float(word_end / rate),
                    offset,
                    len(members) == 1,
                )
            )
    return tuple(words)


def synthesize(
    text: str, voice: Voice = Voice(), sample_rate: int = 16_000, seed: int = 0
) -> Synthesis:
    """Speaks `text` with `voice`; the waveform at `sample_rate` with word timings.

    seed: espeak-ng's random generators (small pitch and timing variation); the same
    text, voice and seed always give the same samples.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text: expected a non-empty string, got {text!r}")
    audio, events = _server().synthesize(text, voice, int(seed))
    if audio.size == 0:
        raise RuntimeError(f"espeak-ng produced no audio for {text[:40]!r}")
    waveform = audio.astype(np.float32) / 32768.0
    words = _word_timings(text, waveform, events, ESPEAK_RATE)
    if sample_rate != ESPEAK_RATE:
        waveform = np.clip(resample(waveform, ESPEAK_RATE, sample_rate), -1.0, 1.0)
    return Synthesis(waveform, sample_rate, words)
