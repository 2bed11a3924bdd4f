"""TFDS builder `folder_kws`: a user's own recordings with keyword intervals, from `manual_dir`.

For scoring a trained detector on real audio (`python -m experiments.evaluate`): one
split, "test", holding every annotated file (audio beside a JSON list of keyword
intervals per file or per folder). Configs: "shipped" (the project's 20 keywords),
"from_folder" (`<manual_dir>/keyword_list.json`), or `FolderKwsConfig`.

    builder = folder_kws.FolderKws(config="shipped", data_dir="/data/tfds")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir="/data/my_keywords"))
    test = tfds.data_source("folder_kws/shipped", data_dir="/data/tfds")["test"]

Specification (folder layout, interval rules, links, records):
docs/corpora.md#recordings-with-keyword-intervals-folder_kws; usage:
docs/usage.md#scoring-a-model-on-your-recordings.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow_datasets as tfds

from cskws_jax import keywords as shipped
from cskws_jax.datasets.features import (
    FEATURES,
    MAX_KEYWORDS,
    Word,
    interval_fields,
    kws_features,
)
from speechkit import audio_io, corpus, errors, files, frontend

AUDIO_SUFFIXES = audio_io.AUDIO_SUFFIXES
FOLDER_ANNOTATION = "keywords.json"  # one per folder: file name -> intervals
KEYWORD_LIST = "keyword_list.json"  # config "from_folder": {"keywords": [...]}
TIME_TOLERANCE_S = 0.05  # an interval may end this much after the audio; it is clipped


class FolderKwsError(errors.InvalidInput):
    """A file of the manual folder that breaks the documented layout; the message names
    it (and the entry)."""


@dataclasses.dataclass(frozen=True)
class Annotated:
    """An audio file and where its intervals are: `source` the JSON file, `entries` the
    raw interval list, `where` the prefix naming the list inside it ("intervals" or
    'keywords.json: "a.wav"')."""

    audio: str
    source: str
    entries: object
    where: str


@dataclasses.dataclass(eq=False)
class FolderKwsConfig(tfds.core.BuilderConfig):
    """`keywords` (distinct, non-empty strings) or, when None, the project's list;
    `from_folder` reads them from `<manual_dir>/keyword_list.json` instead."""

    keywords: tuple[str, ...] | None = None
    from_folder: bool = False

    def __post_init__(self):
        if self.keywords is not None:
            self.keywords = check_keyword_list(self.keywords, "FolderKwsConfig.keywords")
            if self.from_folder:
                raise ValueError("FolderKwsConfig: give keywords or from_folder, not both")


def check_keyword_list(keywords, where: str) -> tuple[str, ...]:
    """`keywords` as a tuple, or a FolderKwsError naming `where` unless it is a non-empty
    list of distinct non-empty strings."""
    if (
        not isinstance(keywords, list | tuple)
        or not keywords
        or not all(isinstance(k, str) and k.strip() for k in keywords)
        or len(set(keywords)) < len(keywords)
    ):
        raise FolderKwsError(f"{where}: expected a list of distinct keywords, got {keywords!r}")
    return tuple(keywords)


def read_keyword_list(manual_dir: str) -> tuple[str, ...]:
    """`<manual_dir>/keyword_list.json`'s {"keywords": [...]}."""
    path = os.path.join(manual_dir, KEYWORD_LIST)
    if not os.path.exists(path):
        raise FolderKwsError(f"{path}: missing (config from_folder reads the keywords from it)")
    data = read_json(path)
    if not isinstance(data, dict) or "keywords" not in data:
        raise FolderKwsError(f'{path}: expected {{"keywords": ["word", ...]}}')
    return check_keyword_list(data["keywords"], f"{path}: keywords")


# ---------------------------------------------------------------------------- JSON


def _no_duplicate_keys(pairs):
    value = dict(pairs)
    if len(value) < len(pairs):
        seen = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise FolderKwsError(f"the key {repeated!r} appears twice")
    return value


def read_json(path: str):
    """The JSON value of `path` (`speechkit.files.load_json`: a regular file of at most
    `files.JSON_LIMIT` bytes); an object may not repeat a key."""
    try:
        return files.load_json(path, object_pairs_hook=_no_duplicate_keys)
    except files.JsonFileError as err:
        raise FolderKwsError(str(err)) from None


def _seconds(where: str, value) -> float:
    if not isinstance(value, bool) and isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond float's range
            seconds = math.inf
        if math.isfinite(seconds):
            return seconds
    shown = repr(value) if len(repr(value)) < 40 else repr(value)[:37] + "..."
    raise FolderKwsError(f"{where} must be a finite number of seconds, got {shown}")


def parse_intervals(annotated: Annotated, keywords: Sequence[str], duration: float) -> list[Word]:
    """The checked intervals of one audio file (`duration` seconds), in time order,
    clipped to the audio."""
    entries = annotated.entries
    place = f"{annotated.source}: {annotated.where}"
    if not isinstance(entries, list):
        raise FolderKwsError(f"{place}: expected a list of {{keyword, start, end}}")
    if len(entries) > MAX_KEYWORDS:
        raise FolderKwsError(
            f"{place}: {len(entries)} intervals, more than a record's {MAX_KEYWORDS} slots "
            "(cut the file into shorter ones)"
        )
    words, places = [], []
    for i, entry in enumerate(entries):
        where = f"{place}[{i}]"
        if not isinstance(entry, dict) or not {"keyword", "start", "end"} <= set(entry):
            raise FolderKwsError(f"{where} needs 'keyword', 'start' and 'end', got {entry!r}")
        if entry["keyword"] not in keywords:
            raise FolderKwsError(
                f"{where} has keyword {entry['keyword']!r}, not one of the config's keywords "
                f"{list(keywords)}"
            )
        start = _seconds(f"{where}.start", entry["start"])
        end = _seconds(f"{where}.end", entry["end"])
        if not 0 <= start < end:
            raise FolderKwsError(f"{where} needs 0 <= start < end, got {start}, {end}")
        if end > duration + TIME_TOLERANCE_S:
            raise FolderKwsError(
                f"{where} ends at {end} s, after the audio {annotated.audio} ({duration:.3f} s)"
            )
        words.append(Word(entry["keyword"], start, min(end, duration)))
        places.append(where)
    order = sorted(range(len(words)), key=lambda i: words[i].start)
    for before, after in zip(order, order[1:], strict=False):
        if words[after].start < words[before].end:
            raise FolderKwsError(f"{places[after]} overlaps {annotated.where}[{before}]")
    return [words[i] for i in order]


# ---------------------------------------------------------------------------- the folder


def _folder_annotations(folder: str, audio_names: list[str]) -> dict[str, Annotated]:
    """audio file name -> its entry of the folder's keywords.json (none if absent)."""
    path = os.path.join(folder, FOLDER_ANNOTATION)
    if not os.path.exists(path):
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise FolderKwsError(f'{path}: expected an object {{"<audio file name>": [intervals]}}')
    for name in data:
        if name not in audio_names:
            raise FolderKwsError(
                f"{path}: {name!r}: no such audio file in {folder} (keys are audio file "
                "names with their suffix)"
            )
    return {
        name: Annotated(os.path.join(folder, name), path, entries, f"{name!r}")
        for name, entries in data.items()
    }


def _audio_stems(folder: str, names: list[str]) -> dict[str, str]:
    """stem -> audio file name, for the audio files among `names`; one file per stem."""
    clash = files.stem_clash(names)
    if clash:
        raise FolderKwsError(
            f"{os.path.join(folder, clash[1])}: {clash[0]} has the same name; one audio file "
            "per name"
        )
    return {os.path.splitext(name)[0]: name for name in names}


def _check_orphans(folder: str, names: list[str], stems: dict[str, str]) -> None:
    """Every `<name>.json` of the folder (other than keywords.json and
    keyword_list.json) has its audio file."""
    for name in names:
        stem, suffix = os.path.splitext(name)
        reserved = name in (FOLDER_ANNOTATION, KEYWORD_LIST)
        if suffix == ".json" and not reserved and stem not in stems:
            raise FolderKwsError(f"{os.path.join(folder, name)}: no audio file for this annotation")


def _annotation_of(folder: str, name: str, shared: dict[str, Annotated]) -> Annotated:
    """Audio file `name`'s intervals: its own `<stem>.json` or its keywords.json entry."""
    own = os.path.join(folder, os.path.splitext(name)[0] + ".json")
    path = os.path.join(folder, name)
    if os.path.exists(own) and name in shared:
        raise FolderKwsError(
            f"{path}: annotated twice, in {own} and in {shared[name].source}; keep one"
        )
    if os.path.exists(own):
        return Annotated(path, own, read_json(own), "intervals")
    if name in shared:
        return shared[name]
    raise FolderKwsError(
        f"{path}: no annotation ({own}, or an entry {name!r} in "
        f"{os.path.join(folder, FOLDER_ANNOTATION)})"
    )


def folder_files(folder: str) -> list[Annotated]:
    """The audio files of one folder (not its subfolders) with their annotations."""
    names = sorted(os.listdir(folder))
    audio = [n for n in names if n.lower().endswith(AUDIO_SUFFIXES)]
    stems = _audio_stems(folder, audio)
    _check_orphans(folder, names, stems)
    shared = _folder_annotations(folder, audio)
    return [_annotation_of(folder, name, shared) for name in audio]


def _check_manual_dir(manual_dir: str) -> None:
    if os.path.isdir(manual_dir):
        return
    if os.path.islink(manual_dir):
        raise FolderKwsError(
            f"{manual_dir}: the manual_dir is a symbolic link that leads to no folder "
            f"(-> {os.readlink(manual_dir)}: missing, or a loop of links)"
        )
    if os.path.lexists(manual_dir):
        raise FolderKwsError(f"{manual_dir}: the manual_dir is a file, not a folder")
    raise FolderKwsError(f"{manual_dir}: the manual_dir does not exist")


def _links_on(path: str, manual_dir: str) -> list[str]:
    """The symbolic links among `path`'s folders below manual_dir (`path` included)."""
    links = []
    while path != manual_dir and os.path.dirname(path) != path:
        if os.path.islink(path):
            links.append(path)
        path = os.path.dirname(path)
    return links[::-1]


def walk_folders(manual_dir: str) -> Iterator[str]:
    """manual_dir and every folder under it, each before its subfolders, subfolders in
    sorted name order. Links to folders are followed, but no folder is read twice: a link
    to a folder that holds it (a loop such as `spk1/loop -> .` or `up -> ..`) or to a
    folder read already (two paths to one folder) raises a FolderKwsError naming the link."""
    walked: dict[tuple[int, int], str] = {}
    pending = [manual_dir]
    while pending:
        folder = pending.pop()
        status = os.stat(folder)
        identity = (status.st_dev, status.st_ino)
        if identity in walked:
            links = _links_on(walked[identity], manual_dir) + _links_on(folder, manual_dir)
            raise FolderKwsError(
                f"{folder}: the same folder as {walked[identity]}, read already, through the "
                f"symbolic link {' and '.join(links) or '(none found)'}; a folder is read "
                "once: remove the link or the second path"
            )
        walked[identity] = folder
        yield folder
        here = os.path.realpath(folder)
        subfolders = []
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not os.path.isdir(path):
                continue
            target = os.path.realpath(path)
            if os.path.islink(path) and (here + os.sep).startswith(target.rstrip(os.sep) + os.sep):
                raise FolderKwsError(
                    f"{path}: a symbolic link to {target}, which holds the link itself (a "
                    "loop: its files would be read again and again); remove the link"
                )
            subfolders.append(path)
        pending.extend(reversed(subfolders))


def find_files(manual_dir: str) -> list[Annotated]:
    """Every annotated audio file under manual_dir (`walk_folders`), in sorted path order."""
    _check_manual_dir(manual_dir)
    found = []
    for folder in walk_folders(manual_dir):
        found.extend(folder_files(folder))
    if not found:
        raise FolderKwsError(f"{manual_dir}: no audio files ({', '.join(AUDIO_SUFFIXES)})")
    return found


# ---------------------------------------------------------------------------- records


def read_samples(path: str) -> np.ndarray:
    """float32 [samples] at 16 kHz, mono; a FolderKwsError naming the file if unusable."""
    try:
        samples, _ = audio_io.read_audio(
            path, target_rate=FEATURES.sample_rate, channels=None, mix_to_mono=True
        )
    except audio_io.AudioFileError as err:
        raise FolderKwsError(str(err)) from None
    return samples


def convert_file(annotated: Annotated, keywords: Sequence[str], manual_dir: str) -> dict:
    """One annotated audio file -> a record (`features.kws_features()`)."""
    samples = read_samples(annotated.audio)
    duration = samples.size / FEATURES.sample_rate
    words = parse_intervals(annotated, keywords, duration)
    relative = os.path.relpath(annotated.audio, manual_dir)
    utterance_id = os.path.splitext(relative)[0]
    return {
        "audio": frontend.waveform_log_mel(samples, FEATURES),
        **interval_fields(words, keywords, utterance_id),
        "text": "",
        "duration": duration,
        "utterance_id": utterance_id,
        "speaker": os.path.dirname(relative),
        "snr_db": math.nan,
        "noise": "recorded",
        "aligned_fraction": math.nan,
    }


def folder_records(manual_dir: str, keywords: Sequence[str]) -> Iterator[tuple[str, dict]]:
    """(utterance id, record) of every annotated audio file under manual_dir; the whole
    layout is checked (`find_files`) before the first file is converted."""
    annotated = find_files(manual_dir)
    for item in annotated:
        record = convert_file(item, keywords, manual_dir)
        yield record["utterance_id"], record


class FolderKws(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder):
    """A user's own recordings with keyword intervals, for scoring a keyword detector."""

    name = "folder_kws"
    VERSION = tfds.core.Version("1.0.0")
    MANUAL_DOWNLOAD_INSTRUCTIONS = __doc__
    BUILDER_CONFIGS = [
        FolderKwsConfig(name="shipped", description="the project's 20 keywords"),
        FolderKwsConfig(
            name="from_folder",
            from_folder=True,
            description=f"the keywords of <manual_dir>/{KEYWORD_LIST}",
        ),
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=kws_features(),
            metadata=tfds.core.MetadataDict(keywords=list(self._given_keywords() or [])),
        )

    def _given_keywords(self) -> tuple[str, ...] | None:
        config = self.builder_config
        if config.from_folder:
            return None
        return config.keywords or tuple(shipped.load_keywords())

    def _split_generators(self, dl_manager):
        manual_dir = os.fspath(dl_manager.manual_dir)
        find_files(manual_dir)  # layout errors before any audio is read
        keywords = self._given_keywords() or read_keyword_list(manual_dir)
        self.info.metadata["keywords"] = list(keywords)
        return {"test": self._generate_examples(manual_dir, keywords)}

    def _generate_examples(self, manual_dir: str, keywords: Sequence[str]):
        yield from folder_records(manual_dir, keywords)
