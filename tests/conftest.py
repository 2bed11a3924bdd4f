"""A `smoke` build of the synthetic call corpus, shared by the tests that read it."""

import pytest

from experiments import build_data


@pytest.fixture(scope="session")
def smoke_build(tmp_path_factory):
    """(data_dir, report) of one smoke build (~15 s: real synthesis and recognition)."""
    data_dir = tmp_path_factory.mktemp("tfds")
    return data_dir, build_data.build("smoke", str(data_dir))
