"""Every corpus builder of the project writes ArrayRecord unless told otherwise, so the
usual TFDS calls work without TensorFlow."""

import pytest
import tensorflow_datasets as tfds

from cskws_jax.datasets import (  # noqa: F401 (registers builders)
    folder_kws,
    libritop20,
    synthetic_kws,
)
from multiqt_jax.datasets import annotated_calls, synthetic_calls  # noqa: F401

BUILDERS = (
    "annotated_calls/questions",
    "synthetic_calls/questions-smoke",
    "synthetic_kws/smoke",
    "libritop20/top20",
    "folder_kws/shipped",
)


@pytest.mark.parametrize("name", BUILDERS)
def test_builders_default_to_array_record(name, tmp_path):
    builder = tfds.builder(name, data_dir=str(tmp_path))
    assert builder.info.file_format == tfds.core.FileFormat.ARRAY_RECORD
    other = tfds.builder(name, data_dir=str(tmp_path), file_format="tfrecord")
    assert other.info.file_format == tfds.core.FileFormat.TFRECORD


@pytest.mark.parametrize(
    "name", ["synthetic_kws/quick-festival", "synthetic_calls/symptoms-smoke-festival"]
)
def test_engine_set_configs_hold_festival_for_training(name, tmp_path):
    config = tfds.builder(name, data_dir=str(tmp_path)).builder_config
    assert config.render_config.engines == ("espeak", "festival", "piper")
    assert config.render_config.heldout_engine == "piper"


def test_a_missing_engine_is_named_before_any_work(tmp_path, monkeypatch):
    from experiments import build_data
    from speechkit.tts import festival

    monkeypatch.setattr(festival, "voices", lambda: ())
    monkeypatch.setattr(festival, "available", lambda: False)
    with pytest.raises(RuntimeError, match="apt-get install festival"):
        build_data.build("smoke", str(tmp_path), engine_set="festival")
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="engine_set: expected one of"):
        build_data.build("smoke", str(tmp_path), engine_set="flite")


class _StubBuilder:
    """What `build_data._prepare` uses of a TFDS builder."""

    def __init__(self, data_path):
        self.data_path, self.built = str(data_path), False

    def is_prepared(self):
        return self.built

    def download_and_prepare(self):
        self.built = True


def test_prepare_removes_what_an_interrupted_build_left(tmp_path, capsys):
    from experiments import build_data

    corpus = tmp_path / "synthetic_kws" / "smoke"
    stale = corpus / "incomplete.1f2e3d_1.0.0" / "part"
    stale.mkdir(parents=True)
    (corpus / "1.0.0").mkdir()
    builder = _StubBuilder(corpus / "1.0.0")
    assert build_data._prepare(builder, 0.0) is not None and builder.built
    assert not stale.parent.exists() and (corpus / "1.0.0").exists()
    assert f"removing {stale.parent}: left by an interrupted build" in capsys.readouterr().err
    assert build_data._prepare(builder, 0.0) is None  # built: nothing to do
