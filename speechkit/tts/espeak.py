"""espeak-ng through ctypes: the library and its ~110 voice variants come with the
`espeakng-loader` wheel.

`Espeak` is the process's instance of the C library (a singleton that keeps state
between calls); only the synthesis server (`server`) creates one, and every utterance
runs in a child forked from it. `variants` lists the shipped voice variants.
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

ESPEAK_RATE = 22_050  # Hz, espeak-ng's native output rate
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EVENT_LIST_TERMINATED, _EVENT_WORD = 0, 1
_PARAMETERS = {"rate": 1, "volume": 2, "pitch": 3, "range": 4, "wordgap": 7}


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


class Espeak:
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

    def synthesize(self, text: str, voice, seed: int):
        """(int16 samples at ESPEAK_RATE, [(0-based char offset, sample)] per word event)
        for `voice`, a `speechkit.tts.voices.EspeakVoice`. Mutates the library's state."""
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


@functools.lru_cache(maxsize=1)
def variants() -> tuple[str, ...]:
    """Names of the voice variants shipped with the wheel (`voices.EspeakVoice.variant`);
    none without it (the `synth` extra)."""
    try:
        import espeakng_loader
    except ImportError:
        return ()

    folder = os.path.join(espeakng_loader.get_data_path(), "voices", "!v")
    return tuple(sorted(os.listdir(folder)))
