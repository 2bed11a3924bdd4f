r"""Your own keywords: build a synthetic corpus for the words you type, train AF-KWS on it,
choose operating points, and write a bundle with a model card.

    python -m experiments.own_keywords --config=experiments/configs/own_keywords.py:quick \
        --config.keywords="weather,tomorrow,morning" --workdir=/tmp/my-keywords
    python -m cskws_jax.detect /tmp/my-keywords/afkws/bundle call.wav --fa-per-hour 5

Checks the words (`cskws_jax.keywords.check_keywords`), builds `synthetic_kws` with them
as keywords, trains and scores with `experiments.cskws`, and writes each bundle's card
(`experiments.report.card`); `config.init` starts from a trained AF-KWS bundle.

Specification (the four steps, warm start): docs/experiments.md#own-keywords-runner.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import time

import ml_collections

from cskws_jax.datasets import synthetic_kws
from experiments import common, cskws
from experiments.configs import own_keywords as own_keywords_config
from experiments.report import card as card_lib
from speechkit import errors

log = common.logger("own_keywords")
CONFIG_FILE = "experiments/configs/own_keywords.py"


def corpus_config(config) -> synthetic_kws.SyntheticKwsBuilderConfig:
    """The synthetic_kws config of the run's keywords, size and engine set (checked: a
    `speechkit.errors.InvalidInput` names the field)."""
    if config.size not in synthetic_kws.SIZES:
        raise errors.InvalidInput(
            f"config.size: expected one of {sorted(synthetic_kws.SIZES)}, got {config.size!r}"
        )
    sets = synthetic_kws.render.KWS_ENGINE_SETS
    if config.engine_set not in sets:
        raise errors.InvalidInput(
            f"config.engine_set: expected one of {sorted(sets)}, got {config.engine_set!r}"
        )
    try:
        return synthetic_kws.own_keywords_config(config.size, config.keywords, config.engine_set)
    except ValueError as err:
        raise errors.InvalidInput(f"config.{err}") from None


def with_bundle_model(config, path: str) -> ml_collections.ConfigDict:
    """`config` with `config.model` set to the architecture of the AF-KWS bundle at `path`
    (every field the section has; num_keywords and unknown_class stay the run's)."""
    net, _, _ = cskws.load_init(path)
    config = common.variant(config, {})
    for field in dataclasses.fields(net.config):
        if field.name in config.model:
            value = getattr(net.config, field.name)
            if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
                value = tuple(dataclasses.astuple(item) for item in value)
            config.model[field.name] = value
    return config


def rebuild_command(config, workdir: str) -> str:
    """The command line that reruns `config`: its preset and every field that differs, each
    value quoted for a POSIX shell."""
    preset = own_keywords_config.get_config(config.preset)
    given, default = common.flat_fields(config), common.flat_fields(preset)
    changed = [
        f"--config.{name}={shlex.quote(_value_text(value))}"
        for name, value in given.items()
        if name != "dataset" and default.get(name) != value
    ]
    return " ".join(
        [
            "python -m experiments.own_keywords",
            f"--config={CONFIG_FILE}:{config.preset}",
            *changed,
            f"--workdir={shlex.quote(workdir)}",
        ]
    )


def _value_text(value) -> str:
    """A config value as a flag spells it: sequences as "(a,b)" (nested too)."""
    if isinstance(value, (list, tuple)):
        items = ",".join(_value_text(item) for item in value)
        return f"({items}{',' if len(value) == 1 else ''})"
    return str(value)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    started = time.perf_counter()
    built = corpus_config(config)
    try:  # another config's models in this workdir would be read back as this one's
        common.check_variant(workdir, config)
    except ValueError as err:
        raise errors.InvalidInput(str(err)) from None
    run = with_bundle_model(config, config.init) if config.init else common.variant(config, {})
    run.dataset = f"synthetic_kws/{built.name}"
    data_dir = common.data_dir(config)
    log(f"keywords {', '.join(built.keywords)}: corpus {run.dataset} in {data_dir}")
    builder = synthetic_kws.SyntheticKws(
        config=built, data_dir=data_dir, file_format="array_record"
    )
    builder.download_and_prepare()
    corpus_seconds = time.perf_counter() - started
    payload = cskws.train_and_evaluate(run, workdir)
    seconds = {"corpus": corpus_seconds, "run": time.perf_counter() - started}
    command = rebuild_command(config, workdir)
    facts = card_lib.kws_facts(run, built, run.dataset, data_dir, seconds, command)
    for name, entry in payload["models"].items():
        folder = os.path.join(workdir, name, "bundle")
        if os.path.isdir(folder):
            card = card_lib.kws_card(name, entry, facts)
            card_lib.write(folder, card_lib.kept_times(card, folder))
            log(
                f"{name}: {folder} (card: {card_lib.CARD_MD}); run it with "
                f"python -m cskws_jax.detect {folder} AUDIO --fa-per-hour 5"
            )
    return payload


if __name__ == "__main__":
    common.main(train_and_evaluate)
