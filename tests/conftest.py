"""A `smoke` build of every embedded corpus, shared by the tests that read them."""

import pytest

from experiments import build_data


@pytest.fixture(scope="session")
def smoke_build(tmp_path_factory):
    """(data_dir, report) of one smoke build of all corpora (~25 s: real synthesis,
    alignment and recognition)."""
    data_dir = tmp_path_factory.mktemp("tfds")
    return data_dir, build_data.build("smoke", str(data_dir))
