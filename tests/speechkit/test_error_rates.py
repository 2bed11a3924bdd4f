"""speechkit.error_rates: edit distance and word / character error rates."""

import numpy as np
import pytest

from speechkit import error_rates


def test_error_rates():
    assert error_rates.edit_distance("kitten", "sitting") == 3
    assert error_rates.error_rate([["a", "b", "c"]], [["a", "c"]]) == pytest.approx(1 / 3)
    assert error_rates.error_rate(["abc", "de"], ["abd", "de"]) == pytest.approx(1 / 5)
    with pytest.raises(ValueError, match="references are empty"):
        error_rates.error_rate([[]], [["x"]])
    assert not np.isnan(error_rates.error_rate([["a"]], [[]]))
