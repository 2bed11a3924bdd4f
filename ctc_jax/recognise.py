"""A trained recogniser over many recordings, and its words cached as data.

    recogniser = Recogniser.load(SHIPPED)                          # a ctc_jax.bundle
    transcripts = recogniser.transcribe([features, ...])             # [frames, 40] each
    posteriors = recogniser.posteriors([features, ...])              # [frames // 2, 29] each
    transcripts, posteriors = recogniser.recognise([features, ...])  # both at once
    words = cached_words(recogniser, {"call-00001": features, ...}, "cache/train.npz")

`Recogniser.recognise` runs the whole-call model over batches of recordings and decodes
greedily and causally (`ctc_jax.decode`), so every word carries its emission time.
`cached_words`, `cached_posteriors` and `cached_outputs` keep a corpus's words and
posteriors in one `.npz` keyed by the bundle's parameter digest; `features_digest` names
a set of recordings by content. Caches are read as `_open_cache` says, header first.
Specification (batching, cache keys, reading untrusted caches):
docs/models.md#the-character-recogniser ("Use").
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ctc_jax import bundle, decode, model, train
from speechkit import arrays, asr, batching, checks, errors, files

CACHE_FORMAT = 1
# The padding of the cached corpus outputs: 10 s. The quick corpus's calls (11-35 s)
# then compile 3 programs instead of 12 at 200 frames; recognising its 100 training calls
# from nothing took 3.4 s against 17.5 s, with the same values bit for bit.
CORPUS_PAD_FRAMES = 1000
SHIPPED = bundle.SHIPPED  # the recogniser that ships with the toolkit

CACHE_LIMIT = 1 << 30
"""Bytes: the largest cache file read (1 GiB); a larger one is recomputed. The posteriors
take about 8.3 MB per hour of calls (float16 at 20 ms; the full synthetic corpus's 1000
calls, 8 hours: 69 MB), so this is some 120 hours of calls per split; reading one takes
about three times its size (the float32 copies returned)."""

DESCRIPTION_LIMIT = files.JSON_LIMIT
"""Bytes: the longest description (JSON: the keys and the words) read, `files.JSON_LIMIT`
(16 MiB, about 1.8 million words; the quick corpus's 100 calls take 51 kB), so that
parsing it takes at most about 400 MB."""


class CacheError(errors.InvalidInput):
    """A cache path that holds something this module never writes and cannot replace
    (a folder, a FIFO, a device, or a link to one); the message names it."""


@dataclasses.dataclass(frozen=True)
class Recogniser:
    """A CTC recogniser with its parameters; `digest` names them (the bundle's params
    sha256, or any string the caller vouches for)."""

    net: model.CtcRecogniser
    params: dict
    digest: str

    @classmethod
    def load(cls, path) -> Recogniser:
        net, params, _ = bundle.load(path)
        return cls(net, params, files.sha256(os.path.join(path, "params.npz")))

    @functools.cached_property
    def _outputs(self):
        def outputs(params, batch):
            emit, symbol, _, logits = train.predict_with_logits(self.net, params, batch)
            return emit, symbol, decode.text_posteriors(logits)

        return jax.jit(outputs)

    @functools.cached_property
    def _log_probs(self):
        def log_probs(params, batch):
            _, _, out_mask, logits = train.predict_with_logits(self.net, params, batch)
            return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1), out_mask

        return jax.jit(log_probs)

    def log_probabilities(
        self, features: Sequence[np.ndarray], batch_size: int = 8, pad_multiple: int = 200
    ) -> list[np.ndarray]:
        """Each recording's log-probabilities of the 30 symbols per output frame, float32
        [valid frames, 30], from the whole-call network (the frames `transcribe` decodes
        greedily and `ctc_jax.beam` decodes with a word model)."""
        found: list[np.ndarray | None] = [None] * len(features)
        for rows, batch in _batches(features, batch_size, pad_multiple):
            log_probs, mask = jax.device_get(self._log_probs(self.params, batch))
            for row, index in enumerate(rows):
                found[int(index)] = log_probs[row][mask[row]]
        return found

    def transcribe(
        self, features: Sequence[np.ndarray], batch_size: int = 8, pad_multiple: int = 200
    ) -> list[decode.Transcript]:
        """Transcripts of recordings given as log-mel features [frames, 40] each, in order."""
        return self.recognise(features, batch_size, pad_multiple)[0]

    def posteriors(
        self, features: Sequence[np.ndarray], batch_size: int = 8, pad_multiple: int = 200
    ) -> list[np.ndarray]:
        """Each recording's causal character posteriors (`decode.text_posteriors`),
        float32 [frames // 2, speechkit.asr.NUM_SYMBOLS] at 20 ms: MultiQT's text input
        for a call of `frames` 10 ms frames."""
        return self.recognise(features, batch_size, pad_multiple)[1]

    def recognise(
        self, features: Sequence[np.ndarray], batch_size: int = 8, pad_multiple: int = 200
    ) -> tuple[list[decode.Transcript], list[np.ndarray]]:
        """(`transcribe`, `posteriors`) of the same recordings, from one program and one
        pass of the network per batch (so the two always agree with each other)."""
        hop_s = self.net.config.output_hop_s
        transcripts: list[decode.Transcript | None] = [None] * len(features)
        found: list[np.ndarray | None] = [None] * len(features)
        for rows, batch in _batches(features, batch_size, pad_multiple):
            emit, symbol, posteriors = jax.device_get(self._outputs(self.params, batch))
            for row, index in enumerate(rows):
                frames = np.shape(features[int(index)])[0]
                transcripts[int(index)] = decode.transcribe(emit[row], symbol[row], hop_s=hop_s)
                found[int(index)] = np.asarray(posteriors[row, : frames // 2])
        return transcripts, found


def features_digest(features: Mapping[str, np.ndarray]) -> str:
    """sha256 hex of recordings {key: features}: their keys in order, shapes, dtypes and
    values. Two corpora with the same digest hold the same recordings under the same keys,
    so a recogniser's outputs cached for one serve the other."""
    digest = hashlib.sha256()
    for key, value in features.items():
        value = np.ascontiguousarray(value)
        header = json.dumps([key, list(value.shape), value.dtype.str]).encode()
        digest.update(len(header).to_bytes(8, "little") + header)
        digest.update(value.tobytes())
    return digest.hexdigest()


def _batches(features: Sequence[np.ndarray], batch_size: int, pad_multiple: int):
    """(rows, batch) over recordings in length order: `rows` their indices in
    `features`, `batch` their audio padded to a multiple of `pad_multiple` frames (a
    corpus compiles a handful of programs) with its masks."""
    frames = np.array([np.shape(f)[0] for f in features], np.int64)
    order = np.argsort(frames, kind="stable")
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        width = batching.round_up(int(frames[rows].max()), pad_multiple)
        examples = [{"audio": np.asarray(features[i], np.float32)} for i in rows]
        fields = {"audio": batching.Field(np.float32, width, mask="audio_mask")}
        yield rows, batching.collate(examples, fields, batch_size)


def _save(path: str, digest: str, words: Mapping[str, Sequence[asr.TimedWord]]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    keys = list(words)
    flat = [w for key in keys for w in words[key]]
    counts = np.array([len(words[key]) for key in keys], np.int64)
    description = {"format": CACHE_FORMAT, "digest": digest, "keys": keys}
    description["words"] = [w.word for w in flat]
    times = np.array([[w.start, w.end, w.emitted] for w in flat], np.float64).reshape(-1, 3)
    description = np.frombuffer(json.dumps(description).encode(), np.uint8)
    files.save_npz(path, description=description, counts=counts, times=times)


def _open_cache(path: str, digest: str, *fields: str) -> tuple[dict, list] | None:
    """(description, the arrays `fields`) of a cache file this module wrote for the
    recogniser `digest`, or None: "not a usable cache", which `cached_outputs` recomputes
    and replaces. A cache is derived data, so whatever is not exactly what `_save` or
    `_save_posteriors` wrote for this recogniser is None: no file; another recogniser's,
    or another format's; larger than `CACHE_LIMIT` or the memory available; not a zip;
    members other than the description and `fields`, deflated (np.savez stores them) or
    encrypted ones, or one larger than the archive; a .npy header that is unreadable,
    of a dtype outside `speechkit.arrays.DTYPES` or declaring other than what the member
    holds; a description longer than `DESCRIPTION_LIMIT`, not UTF-8 JSON (nested deeper
    than the parser recurses included) or not an object with a list of string keys.
    A path that is not a regular file (a folder, a FIFO, a device, or a link to one) is
    a `CacheError`: this module never writes one, reading a FIFO or device would block
    or never end, recomputing could not replace a folder and would silently destroy
    the rest (a link that leads nowhere is no file: recomputed). Nothing is decompressed
    or allocated before it is known to fit: the members are stored, so no array read is
    larger than the file (read with allow_pickle=False: never unpickled)."""
    if not os.path.exists(path):  # a link that leads nowhere too: replaced
        return None
    size = arrays.regular_file_size(path, what="a cache file (ctc_jax.recognise)", error=CacheError)
    if size > min(CACHE_LIMIT, checks.available_memory()):
        return None
    try:
        with arrays.Npz(
            path,
            names=("description", *fields),
            lister="the cache format",
            compressions=arrays.STORED,
        ) as archive:
            description = _description(archive)
            if description is None or description.get("digest") != digest:
                return None
            found = [archive.read(field) for field in fields]
    except arrays.ArrayFileError:
        return None
    return description, found


def _description(archive: arrays.Npz) -> dict | None:
    """The cache's description: a JSON object of this `CACHE_FORMAT` whose "keys" are a
    list of strings; None for anything else (see `_open_cache`)."""
    declared = archive.header("description")
    if declared.dtype != np.uint8 or len(declared.shape) != 1:
        return None
    if declared.nbytes > DESCRIPTION_LIMIT:
        return None
    try:
        description = json.loads(archive.read("description").tobytes().decode("utf-8"))
    except (ValueError, RecursionError):  # JSON, UTF-8, a 5000-digit integer; nesting
        return None
    if not isinstance(description, dict) or description.get("format") != CACHE_FORMAT:
        return None
    keys = description.get("keys")
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        return None
    return description


def _read(path: str, digest: str) -> dict[str, tuple[asr.TimedWord, ...]] | None:
    """The cached words, or None (see `_open_cache`; also for inconsistent arrays)."""
    opened = _open_cache(path, digest, "counts", "times")
    if opened is None:
        return None
    description, (counts, times) = opened
    keys, names = description["keys"], description.get("words")
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return None
    if counts.dtype != np.int64 or times.dtype != np.float64 or counts.ndim != 1:
        return None
    if np.any(counts < 0) or np.any(counts > len(names)):  # the sum cannot wrap around
        return None
    if len(keys) != counts.size or counts.sum() != len(names) or times.shape != (len(names), 3):
        return None
    out, cursor = {}, 0
    for key, count in zip(keys, counts.tolist(), strict=True):
        rows = range(cursor, cursor + count)
        out[key] = tuple(asr.TimedWord(names[i], *map(float, times[i])) for i in rows)
        cursor += count
    return out


def cached_words(
    recogniser: Recogniser,
    features: Mapping[str, np.ndarray],
    path: str,
    batch_size: int = 8,
) -> dict[str, tuple[asr.TimedWord, ...]]:
    """{key: the words the recogniser heard in features[key]}, computed once and kept in
    `path` (see the module docstring); `features` may be a lazy mapping (read only when
    the cache is missing or stale)."""
    return cached_outputs(recogniser, features, path, batch_size=batch_size)[0]


def cached_posteriors(
    recogniser: Recogniser,
    features: Mapping[str, np.ndarray],
    path: str,
    batch_size: int = 8,
) -> dict[str, np.ndarray]:
    """{key: the recogniser's character posteriors of features[key]} (`Recogniser.posteriors`,
    float32 values rounded to float16, as they are kept), computed once and kept in
    `path` like `cached_words`: plain arrays read with `allow_pickle=False`, keyed by the
    parameter digest."""
    return cached_outputs(recogniser, features, posteriors_path=path, batch_size=batch_size)[1]


def cached_outputs(
    recogniser: Recogniser,
    features: Mapping[str, np.ndarray],
    words_path: str | None = None,
    posteriors_path: str | None = None,
    batch_size: int = 8,
    pad_multiple: int = CORPUS_PAD_FRAMES,
) -> tuple[dict | None, dict | None]:
    """(`cached_words`, `cached_posteriors`) of the same recordings, each None where its
    path is None; what is missing from its cache is computed by one pass of the network
    (`Recogniser.recognise`, padded to `pad_multiple` frames)."""
    words = posteriors = None
    if words_path is not None:
        words = _if_complete(_read(words_path, recogniser.digest), features)
    if posteriors_path is not None:
        posteriors = _if_complete(_read_posteriors(posteriors_path, recogniser.digest), features)
    want_words = words_path is not None and words is None
    want_posteriors = posteriors_path is not None and posteriors is None
    if not (want_words or want_posteriors):
        return words, posteriors
    keys = list(features)
    recordings = [features[key] for key in keys]
    transcripts, found = recogniser.recognise(recordings, batch_size, pad_multiple)
    if want_words:
        words = {key: t.words for key, t in zip(keys, transcripts, strict=True)}
        _save(words_path, recogniser.digest, words)
    if want_posteriors:
        posteriors = _save_posteriors(posteriors_path, recogniser.digest, keys, found)
    return words, posteriors


def _if_complete(cached: dict | None, features: Mapping) -> dict | None:
    """The cache's entries when they are exactly the recordings of `features`."""
    return cached if cached is not None and set(cached) == set(features) else None


def _save_posteriors(path: str, digest: str, keys: list, found: list) -> dict[str, np.ndarray]:
    """Keeps posteriors (float32 [frames, NUM_SYMBOLS] each, in `keys` order) as float16
    in `path`; returns them as kept, {key: float32}."""
    found = [np.asarray(p, np.float16) for p in found]
    description = {"format": CACHE_FORMAT, "digest": digest, "keys": keys}
    description = np.frombuffer(json.dumps(description).encode(), np.uint8)
    offsets = np.cumsum([0] + [len(p) for p in found]).astype(np.int64)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    files.save_npz(
        path,
        description=description,
        offsets=offsets,
        posteriors=np.concatenate(found) if found else np.zeros((0, asr.NUM_SYMBOLS), np.float16),
    )
    return {key: p.astype(np.float32) for key, p in zip(keys, found, strict=True)}


def _read_posteriors(path: str, digest: str) -> dict[str, np.ndarray] | None:
    """The cached posteriors, or None (see `_open_cache`; also for inconsistent arrays)."""
    opened = _open_cache(path, digest, "offsets", "posteriors")
    if opened is None:
        return None
    description, (offsets, posteriors) = opened
    keys = description["keys"]
    if (
        offsets.dtype != np.int64
        or offsets.shape != (len(keys) + 1,)
        or offsets[0] != 0
        or np.any(np.diff(offsets) < 0)
        or posteriors.dtype != np.float16
        or posteriors.shape != (int(offsets[-1]), asr.NUM_SYMBOLS)
    ):
        return None
    return {
        key: posteriors[start:end].astype(np.float32)
        for key, start, end in zip(keys, offsets[:-1], offsets[1:], strict=True)
    }
