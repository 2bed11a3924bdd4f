"""Every corpus builder of the project writes ArrayRecord unless told otherwise, so the
usual TFDS calls work without TensorFlow."""

import pytest
import tensorflow_datasets as tfds

from cskws_jax.datasets import libritop20, synthetic_kws  # noqa: F401 (registers builders)
from multiqt_jax.datasets import annotated_calls, synthetic_calls  # noqa: F401

BUILDERS = (
    "annotated_calls/questions",
    "synthetic_calls/questions-smoke",
    "synthetic_kws/smoke",
    "libritop20/top20",
)


@pytest.mark.parametrize("name", BUILDERS)
def test_builders_default_to_array_record(name, tmp_path):
    builder = tfds.builder(name, data_dir=str(tmp_path))
    assert builder.info.file_format == tfds.core.FileFormat.ARRAY_RECORD
    other = tfds.builder(name, data_dir=str(tmp_path), file_format="tfrecord")
    assert other.info.file_format == tfds.core.FileFormat.TFRECORD
