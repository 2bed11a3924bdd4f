"""The speaker stage: one engine voice made into many speakers, per utterance.

`SpeakerShift` is one utterance's drawn speaker: a formant shift, a pitch median and
range, and a duration factor. `draw_shift` draws it from a `SpeakerStage`'s ranges, and
`apply_shift` makes it with Praat's "Change gender" (PSOLA resynthesis); word timings
scale with the duration. The shift is part of the speaker's name (`speaker_suffix`,
parsed back by `parse_shift`), so corpus records keep it and build reports can give the
speaker distribution of every split. The ranges: docs/corpora.md; how the shift is made:
docs/speechkit.md, "tts.speakers".
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings

import numpy as np

from speechkit import checks

PITCH_FLOOR_HZ = 60.0  # Praat's pitch analysis range for the synthesisers' voices
PITCH_CEILING_HZ = 500.0
MIN_VOICED_FRAMES = 5  # fewer voiced 10 ms frames: the pitch median is left alone


@dataclasses.dataclass(frozen=True)
class SpeakerShift:
    """One utterance's speaker: what `apply_shift` changes."""

    formant: float = 1.0  # formant frequencies x this (> 1: a shorter vocal tract)
    pitch_median_hz: float = 0.0  # the new pitch median in Hz; 0 keeps the voice's own
    pitch_range: float = 1.0  # excursions around the median x this (0: monotone)
    duration: float = 1.0  # every duration x this (> 1: slower)

    def __post_init__(self):
        checks.require_number("SpeakerShift.formant", self.formant, at_least=0.5, at_most=2.0)
        checks.require_number(
            "SpeakerShift.pitch_median_hz", self.pitch_median_hz, at_least=0.0, at_most=600.0
        )
        checks.require_number(
            "SpeakerShift.pitch_range", self.pitch_range, at_least=0.0, at_most=4.0
        )
        checks.require_number("SpeakerShift.duration", self.duration, at_least=0.5, at_most=2.0)


SHIFTED = ("formant", "pitch_median_hz", "pitch_range", "duration")


@dataclasses.dataclass(frozen=True)
class SpeakerStage:
    """The ranges the speaker stage draws from, per utterance (inclusive; pitch
    log-uniform): a `SpeakerShift` for every engine, and Piper's own variation (its
    generator noise and phoneme-width noise; its tempo is `SpeakerConfig.tempo`)."""

    formant: tuple[float, float] = (0.88, 1.18)
    pitch_median_hz: tuple[float, float] = (90.0, 250.0)
    pitch_range: tuple[float, float] = (0.6, 1.5)
    duration: tuple[float, float] = (0.88, 1.15)
    piper_noise_scale: tuple[float, float] = (0.4, 0.9)  # Piper's default: 0.667
    piper_noise_w: tuple[float, float] = (0.5, 1.1)  # Piper's default: 0.8

    def __post_init__(self):
        for field in dataclasses.fields(self):
            checks.require_interval(f"SpeakerStage.{field.name}", getattr(self, field.name))
        for name in SHIFTED:  # each end must itself be a valid shift
            for bound in getattr(self, name):
                SpeakerShift(**{name: bound})
        checks.require_number("SpeakerStage.pitch_median_hz[0]", self.pitch_median_hz[0], above=0.0)
        for name in ("piper_noise_scale", "piper_noise_w"):
            checks.require_number(f"SpeakerStage.{name}[0]", getattr(self, name)[0], at_least=0.0)
            checks.require_number(f"SpeakerStage.{name}[1]", getattr(self, name)[1], at_most=2.0)


def draw_shift(rng: np.random.Generator, ranges: SpeakerStage) -> SpeakerShift:
    """A speaker drawn from `rng`: formant, pitch median, pitch range, duration, in that
    order, each rounded to 3 significant decimals (pitch to 0.1 Hz)."""
    formant = float(rng.uniform(*ranges.formant))
    low, high = (math.log(f) for f in ranges.pitch_median_hz)
    pitch = math.exp(float(rng.uniform(low, high)))
    pitch_range = float(rng.uniform(*ranges.pitch_range))
    duration = float(rng.uniform(*ranges.duration))
    return SpeakerShift(
        round(formant, 3), round(pitch, 1), round(pitch_range, 3), round(duration, 3)
    )


def _pitch_median(sound) -> float:
    """The median pitch (Hz) of a parselmouth Sound's voiced frames; 0 with too few."""
    pitch = sound.to_pitch(
        time_step=0.01, pitch_floor=PITCH_FLOOR_HZ, pitch_ceiling=PITCH_CEILING_HZ
    )
    f0 = pitch.selected_array["frequency"]
    voiced = f0[f0 > 0]
    return float(np.median(voiced)) if voiced.size >= MIN_VOICED_FRAMES else 0.0


def apply_shift(waveform: np.ndarray, sample_rate: int, words, shift: SpeakerShift, seed: int = 0):
    """(waveform, words): `waveform` (float [samples] at `sample_rate` Hz) spoken by the
    speaker `shift` says, and `words` (`timing.WordTiming`s, seconds) with their times
    scaled by `shift.duration`. Praat's resynthesis draws random numbers (in unvoiced
    parts); they come from `seed`, so the same input and seed give the same samples."""
    import parselmouth
    from parselmouth.praat import call, run

    sound = parselmouth.Sound(np.asarray(waveform, np.float64), sampling_frequency=sample_rate)
    median = shift.pitch_median_hz if _pitch_median(sound) > 0 else 0.0

    def change_gender(median: float):
        pitch_range = shift.pitch_range if median > 0 else 1.0
        arguments = (PITCH_FLOOR_HZ, PITCH_CEILING_HZ, shift.formant, median, pitch_range)
        return call(sound, "Change gender", *arguments, shift.duration)

    with warnings.catch_warnings():  # an unvoiced utterance is expected (whispered voices)
        warnings.simplefilter("ignore", parselmouth.PraatWarning)
        run(f"seeded = random_initializeWithSeedUnsafelyButPredictably({int(seed)})")
        try:
            changed = change_gender(median)
        except parselmouth.PraatError:
            if median == 0:
                raise
            # Praat's own pitch analysis found no median where ours did (a few voiced
            # frames): the pitch is left as it is, the rest of the shift still applies.
            changed = change_gender(0.0)
        finally:
            run("unseeded = random_initializeSafelyAndUnpredictably()")
    out = np.asarray(changed.values[0], np.float32)
    scale = shift.duration
    words = tuple(dataclasses.replace(w, start=w.start * scale, end=w.end * scale) for w in words)
    return out, words


def speaker_suffix(shift: SpeakerShift | None) -> str:
    """The part of a speaker's name that records `shift` ("" for none):
    "~vt1.120,f0=180.0,pr1.300,d0.950"."""
    if shift is None:
        return ""
    return (
        f"~vt{shift.formant:.3f},f0={shift.pitch_median_hz:.1f},"
        f"pr{shift.pitch_range:.3f},d{shift.duration:.3f}"
    )


_SUFFIX = re.compile(r"~vt([0-9.]+),f0=([0-9.]+),pr([0-9.]+),d([0-9.]+)")


def parse_shift(speaker: str) -> SpeakerShift | None:
    """The `SpeakerShift` recorded in a speaker's name, None when it has none."""
    found = _SUFFIX.search(speaker)
    if found is None:
        return None
    formant, pitch, pitch_range, duration = (float(g) for g in found.groups())
    return SpeakerShift(formant, pitch, pitch_range, duration)


def speaker_distribution(speakers) -> dict:
    """What the speaker stage drew over speaker names (`speaker_suffix`): how many carry
    a shift, and per parameter (`SHIFTED`: formant factor, pitch median in Hz, pitch
    range factor, duration factor) its 10th percentile, median and 90th percentile."""
    shifts = [shift for shift in map(parse_shift, speakers) if shift is not None]
    report = {"speakers": len(speakers), "shifted": len(shifts)}
    for name in SHIFTED:
        if shifts:
            values = np.array([getattr(shift, name) for shift in shifts])
            p10, p50, p90 = (float(v) for v in np.percentile(values, [10, 50, 90]))
            report[name] = {"p10": p10, "median": p50, "p90": p90}
    return report
