"""The runners' training corpora: a TFDS corpus built where it is missing, and the splits
a run needs read from it.

    corpora.build_missing("synthetic_kws/smoke", synthetic_kws.SyntheticKws, data_dir)
    sources = corpora.splits("synthetic_kws/smoke", data_dir, ("train", "test"))

What a run scores besides them (`config.evals`) is read by
`experiments.scoring.corpora.evaluation_sources`.
"""

from __future__ import annotations

from speechkit import prepared


def build_missing(corpus: str, builder_class, data_dir: str) -> None:
    """Builds `corpus` (e.g. "synthetic_kws/smoke") in `data_dir`, as array_record files,
    where it names a config in code of `builder_class` and is not built yet; any other
    corpus (one of your own keywords, read from its folder) is left to be read as it is."""
    family, _, name = corpus.partition("/")
    if family == builder_class.name and name in builder_class.builder_configs:
        builder = builder_class(config=name, data_dir=data_dir, file_format="array_record")
        builder.download_and_prepare()


def splits(corpus: str, data_dir: str, names) -> dict:
    """{split: data source} of the splits `names` of a prepared corpus; a ValueError names
    a split it lacks."""
    sources = prepared.data_source(corpus, data_dir=data_dir)
    for split in names:
        if split not in sources:
            raise ValueError(f"{corpus}: no {split!r} split (has {sorted(sources)})")
    return {split: sources[split] for split in names}
