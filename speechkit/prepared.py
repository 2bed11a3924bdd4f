"""Prepared TFDS corpora opened by name, checked before TFDS reads them.

    source = prepared.data_source("folder_kws/shipped", data_dir=D)    # {split: source}
    builder = prepared.builder("synthetic_kws/quick", data_dir=D)

A prepared corpus is a folder someone may have sent. Given a name that no imported
builder registers (a config made at run time, a builder whose module is not imported),
TFDS rebuilds the corpus from its files and imports the module that any
`"pythonClassName"` in its `features.json` names, so a folder could run code. These two
functions open only the project's corpora (its registered builders and configs, or a
folder one of them wrote), and first check every prepared version of the corpus in
`data_dir`: its `features.json` may name only TFDS's own feature classes (so nothing
else is imported), its `dataset_info.json` must be the builder's (`name`, and a
`moduleName` of the project: the builder's module, or one it moved from, its
`FORMER_MODULES`), and every JSON file there is read with `files.load_json`'s bounds.
"""

from __future__ import annotations

import os

import tensorflow_datasets as tfds

from speechkit import errors, files

PROJECT_PACKAGES = ("cskws_jax", "ctc_jax", "multiqt_jax", "speechkit")
"""The packages whose TFDS builders the toolkit opens by name."""

METADATA_FILES = ("features.json", "dataset_info.json", "metadata.json")


class PreparedCorpusError(errors.InvalidInput):
    """A corpus name or a prepared corpus folder the toolkit does not open."""


def builder(name: str, *, data_dir: str):
    """`tfds.builder(name, data_dir=data_dir)` after `check(name, data_dir)`."""
    check(name, data_dir)
    return tfds.builder(name, data_dir=data_dir)


def data_source(name: str, *, data_dir: str, split=None):
    """`tfds.data_source(name, split=split, data_dir=data_dir)` after `check`."""
    check(name, data_dir)
    return tfds.data_source(name, split=split, data_dir=data_dir)


def check(name: str, data_dir: str | None) -> None:
    """A PreparedCorpusError unless `name` ("builder/config") is a corpus of the
    project's builders: a registered builder and config, or a corpus prepared in
    `data_dir` (None: TFDS's default) by one of them (a config made at run time, a
    builder whose module is not imported: TFDS reads those from their files). Every
    prepared version of it must name only TFDS feature classes and be that builder's."""
    builder_name, config = _split_name(name)
    data_dir = tfds.core.constants.DATA_DIR if data_dir is None else os.fspath(data_dir)
    cls = _project_classes().get(builder_name)
    versions = _prepared_versions(os.path.join(data_dir, builder_name, config))
    if not versions and (cls is None or config not in cls.builder_configs):
        if cls is None:
            raise PreparedCorpusError(
                f"{name}: {builder_name!r} is not one of the toolkit's corpus builders "
                f"({', '.join(project_builders())}), nor prepared by one in {data_dir}"
            )
        raise PreparedCorpusError(
            f"{name}: {builder_name} has no config {config!r} ({_some(cls.builder_configs)}), "
            f"and {data_dir} holds no corpus of that name"
        )
    modules = builder_modules(cls) if cls is not None else None
    for version_dir in versions:
        check_version_folder(version_dir, builder_name, modules)


def builder_modules(cls: type) -> tuple[str, ...]:
    """The modules whose prepared corpora the builder `cls` reads: its own, then those
    it moved from (its `FORMER_MODULES`), which the corpora prepared before a move name."""
    return (cls.__module__, *getattr(cls, "FORMER_MODULES", ()))


def _prepared_versions(folder: str) -> list[str]:
    """The version folders of one prepared corpus (none when it is not prepared)."""
    if not os.path.isdir(folder):
        return []
    found = (os.path.join(folder, version) for version in sorted(os.listdir(folder)))
    return [path for path in found if os.path.isdir(path)]


def _some(names, shown: int = 6) -> str:
    """A few of `names`, sorted, and how many there are."""
    names = sorted(names)
    more = f", ... ({len(names)} in all)" if len(names) > shown else ""
    return "its configs: " + ", ".join(names[:shown]) + more


def check_version_folder(folder: str, builder_name: str, modules: tuple[str, ...] | None) -> None:
    """One prepared version (`<data_dir>/<builder>/<config>/<version>`) checked: written
    by one of `modules` (None: by a module of the project's packages)."""
    for name in METADATA_FILES:
        path = os.path.join(folder, name)
        if os.path.lexists(path):
            payload = files.load_json(path)
            if name == "features.json":
                check_feature_classes(path, payload)
            elif name == "dataset_info.json":
                _check_identity(path, payload, builder_name, modules)


def check_feature_classes(path: str, payload) -> None:
    """Every `pythonClassName` anywhere in a features.json is a TFDS feature class."""
    allowed = tfds_feature_classes()
    for where, value in _class_names(payload, "features.json"):
        if value not in allowed:
            raise PreparedCorpusError(
                f"{path}: {where}: {value!r} is not a TFDS feature class; a prepared corpus "
                "names only tensorflow_datasets.core.features classes (nothing else is "
                "imported)"
            )


def tfds_feature_classes() -> frozenset[str]:
    """The full names of TFDS's own feature connector classes (`tfds.features`), as
    features.json writes them."""
    base = tfds.features.FeatureConnector
    return frozenset(
        f"{value.__module__}.{value.__name__}"
        for value in vars(tfds.features).values()
        if isinstance(value, type) and issubclass(value, base) and value is not base
    )


def _class_names(value, where: str):
    """(place, value) of every "pythonClassName" key in a JSON value, depth first."""
    stack = [(value, where)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "pythonClassName":
                    yield f"{where}.{key}", item
                else:
                    stack.append((item, f"{where}.{key}"))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))


def _check_identity(path: str, payload, builder_name: str, modules: tuple[str, ...] | None) -> None:
    if not isinstance(payload, dict):
        raise PreparedCorpusError(f"{path}: expected a JSON object, got {type(payload).__name__}")
    if payload.get("name") != builder_name:
        raise PreparedCorpusError(
            f"{path}: name: {payload.get('name')!r:.80}, expected {builder_name!r}"
        )
    written_by = payload.get("moduleName")
    ours = isinstance(written_by, str) and (
        written_by in modules
        if modules is not None
        else written_by.startswith(tuple(p + "." for p in PROJECT_PACKAGES))
    )
    if not ours:
        expected = (
            " or ".join(map(repr, modules))
            if modules
            else f"a module of {', '.join(PROJECT_PACKAGES)}"
        )
        raise PreparedCorpusError(
            f"{path}: moduleName: {written_by!r:.80}, expected {expected} (the builder that "
            "wrote this folder)"
        )


def _split_name(name: str) -> tuple[str, str]:
    parts = name.split("/")
    if len(parts) != 2 or not all(parts) or ":" in name or any(p in (".", "..") for p in parts):
        raise PreparedCorpusError(
            f"{name!r}: expected a corpus name <builder>/<config>, e.g. 'folder_kws/shipped'"
        )
    return parts[0], parts[1]


def project_builders() -> list[str]:
    """The names of the project's imported TFDS builders."""
    return sorted(_project_classes())


def _project_classes() -> dict[str, type]:
    """{name: class} of the imported TFDS builders defined in the project's packages,
    found among the subclasses of tfds's DatasetBuilder (TFDS's own registry would
    import its catalogue's modules to answer)."""
    found, stack = {}, [tfds.core.DatasetBuilder]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        module = cls.__module__
        if module.startswith(tuple(p + "." for p in PROJECT_PACKAGES)) and "name" in vars(cls):
            found[cls.name] = cls
    return found
