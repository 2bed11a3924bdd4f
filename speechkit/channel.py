"""Acoustic channel simulation for synthetic speech (NumPy, seeded).

`degrade` puts a clean waveform through a room and a microphone (`rooms`), noise at an
SNR, a telephone line and gain, as a `ChannelConfig` says. Every random choice comes
from the `np.random.Generator` passed in; waveforms are float32 [samples] in [-1, 1].
The stages: docs/speechkit.md, "channel".

    >>> import numpy as np
    >>> from speechkit import channel
    >>> config = channel.ChannelConfig(snr_db=(10.0, 20.0), telephone="narrowband")
    >>> clean = np.sin(np.arange(16_000) / 5).astype(np.float32)
    >>> channel.degrade(clean, np.random.default_rng(0), config, 16_000).waveform.shape
    (16000,)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from speechkit import checks, dsp, rooms

NOISE_KINDS = ("pink", "white", "babble")
TELEPHONE_LINES = ("none", "wideband", "narrowband")


@dataclasses.dataclass(frozen=True)
class ChannelConfig:
    """What `degrade` does to a clean waveform; every field is an experiment setting."""

    snr_db: tuple[float, float] = (15.0, 30.0)  # noise level, drawn uniformly per waveform
    noise_kinds: tuple[str, ...] = ("pink", "white")  # some of NOISE_KINDS, one drawn
    # One of TELEPHONE_LINES: "wideband" (50-7000 Hz), "narrowband" (300-3400 Hz, mu-law)
    # or "none"; the audio comes back at its own rate either way.
    telephone: str = "none"
    gain_db: tuple[float, float] | None = None  # drawn after the line; None: no gain, no draw
    babble_talkers: int = 6  # voices summed into one babble noise
    # The clean speech is reverberated in a room drawn from `room` with this probability,
    # then coloured by a drawn microphone response with `colour_probability`. Both 0:
    # no draws at all, so corpora built before these settings existed stay bit-identical.
    reverb_probability: float = 0.0
    room: rooms.RoomConfig = rooms.RoomConfig()
    colour_probability: float = 0.0

    def __post_init__(self):
        checks.require_subset("ChannelConfig.noise_kinds", self.noise_kinds, NOISE_KINDS)
        checks.require_choice("ChannelConfig.telephone", self.telephone, TELEPHONE_LINES)
        checks.require_interval("ChannelConfig.snr_db", self.snr_db)
        if self.gain_db is not None:
            checks.require_interval("ChannelConfig.gain_db", self.gain_db)
        checks.require_int("ChannelConfig.babble_talkers", self.babble_talkers, at_least=1)
        for name in ("reverb_probability", "colour_probability"):
            checks.require_number(
                f"ChannelConfig.{name}", getattr(self, name), at_least=0, at_most=1
            )
        if not isinstance(self.room, rooms.RoomConfig):
            raise TypeError(f"ChannelConfig.room: expected a rooms.RoomConfig, got {self.room!r}")


@dataclasses.dataclass(frozen=True)
class Degraded:
    """A waveform after `degrade`, with what was drawn for it."""

    waveform: np.ndarray  # float32 [samples] in [-1, 1], the clean one's length and rate
    noise: str  # the noise kind, one of ChannelConfig.noise_kinds
    snr_db: float
    gain_db: float  # 0.0 when ChannelConfig.gain_db is None
    room: str = "none"  # "none", or the drawn room's `rooms.Room.name`
    coloured: bool = False  # whether a microphone response was applied


BabbleVoices = Callable[[np.random.Generator], Sequence[np.ndarray]]
"""Draws other speakers' waveforms (at the clean waveform's rate) for a babble noise."""


def make_noise(
    rng: np.random.Generator,
    kind: str,
    samples: int,
    babble_voices: BabbleVoices | None = None,
    talkers: int = 6,
) -> np.ndarray:
    """Unit-power noise of `kind` (one of NOISE_KINDS), float32 [samples].

    babble_voices: called with `rng` (only for "babble") before the talkers are drawn.
    """
    if kind == "white":
        return dsp.white_noise(rng, samples)
    if kind == "pink":
        return dsp.pink_noise(rng, samples)
    if kind == "babble":
        if babble_voices is None:
            raise ValueError("make_noise: 'babble' needs babble_voices")
        return dsp.babble(rng, babble_voices(rng), samples, talkers)
    raise ValueError(f"kind: expected one of {', '.join(NOISE_KINDS)}, got {kind!r}")


def through_line(waveform, line: str, sample_rate: int) -> np.ndarray:
    """The waveform through a telephone line (one of TELEPHONE_LINES), at its own rate."""
    if line == "wideband":
        return dsp.wideband_telephone(waveform, sample_rate)
    if line == "narrowband":
        return dsp.telephone(waveform, sample_rate)
    if line == "none":
        return dsp.as_waveform("waveform", waveform)
    raise ValueError(f"line: expected one of {list(TELEPHONE_LINES)}, got {line!r}")


def acoustics(
    waveform, rng: np.random.Generator, config: ChannelConfig, sample_rate: int
) -> tuple[np.ndarray, str, bool]:
    """The clean waveform in a room and through a microphone, as `config` says:
    (float32 [samples], room name or "none", coloured).

    Draws from `rng`: one seed when `config.reverb_probability` or
    `config.colour_probability` is > 0, nothing otherwise (the waveform comes back as it
    is). Two generators spawned from that seed draw the room (whether, which) and the
    colouring (whether, which), so the parent always advances by one draw and switching
    one effect does not change the other's draws.
    """
    if config.reverb_probability == 0 and config.colour_probability == 0:
        return waveform, "none", False
    room_rng, colour_rng = np.random.default_rng(int(rng.integers(2**63))).spawn(2)
    room = "none"
    if room_rng.random() < config.reverb_probability:
        drawn = rooms.draw_room(room_rng, config.room, sample_rate)
        waveform, room = rooms.reverberate(waveform, drawn.rir), drawn.name
    coloured = bool(colour_rng.random() < config.colour_probability)
    if coloured:
        waveform = rooms.microphone_colour(colour_rng, waveform, sample_rate)
    return dsp.as_waveform("waveform", waveform), room, coloured


def degrade(
    waveform,
    rng: np.random.Generator,
    config: ChannelConfig,
    sample_rate: int,
    *,
    babble_voices: BabbleVoices | None = None,
    noise_before_snr: bool = False,
) -> Degraded:
    """A drawn room and microphone (`acoustics`), noise at a drawn SNR (against the
    reverberant, coloured speech), the telephone line, a drawn gain, then clipping to
    [-1, 1].

    Draws from `rng` in this order: the noise kind; the SNR; the noise itself (with any
    babble voices); the gain (only when `config.gain_db` is set); the room and
    microphone seed (only when a probability of them is > 0). `noise_before_snr` draws
    the noise before the SNR instead: corpora first built in that order keep
    reproducing bit for bit, as do those built before rooms and microphones existed.

    Args:
      waveform: the clean float32 [samples] at `sample_rate` Hz.
      babble_voices: required when "babble" is one of `config.noise_kinds`.
    """
    if "babble" in config.noise_kinds and babble_voices is None:
        raise ValueError("degrade: noise_kinds include 'babble', so babble_voices is needed")
    kind = config.noise_kinds[int(rng.integers(len(config.noise_kinds)))]
    noise_args = (kind, np.size(waveform), babble_voices, config.babble_talkers)
    if noise_before_snr:
        noise = make_noise(rng, *noise_args)
        snr_db = float(rng.uniform(*config.snr_db))
    else:
        snr_db = float(rng.uniform(*config.snr_db))
        noise = make_noise(rng, *noise_args)
    gain_db = 0.0 if config.gain_db is None else float(rng.uniform(*config.gain_db))
    speech, room, coloured = acoustics(waveform, rng, config, sample_rate)
    degraded = through_line(dsp.add_noise(speech, noise, snr_db), config.telephone, sample_rate)
    if config.gain_db is not None:
        degraded = dsp.gain(degraded, gain_db)
    return Degraded(np.clip(degraded, -1.0, 1.0), kind, snr_db, gain_db, room, coloured)
