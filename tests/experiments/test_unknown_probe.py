"""experiments.unknown_probe: peaks read at each keyword's window, by hand."""

import numpy as np

from experiments import unknown_probe


def test_peaks_by_hand():
    probs = np.zeros((2, 10, 3))  # 2 keywords + unknown, 40 ms frames
    probs[0, 4, 0] = 0.8  # keyword 0 at 0.16-0.20 s
    probs[0, 5, 2] = 0.9  # the unknown class beats it next door
    probs[0, 3, 1] = 0.2
    probs[1, 2, 1] = 0.1
    probs[1, 2, 0] = 0.4  # another keyword beats keyword 1
    mask = np.ones((2, 10), bool)
    mask[1, 8:] = False
    events = {
        "start": np.array([[0.14, 0.0], [0.06, 0.30]]),
        "end": np.array([[0.22, 0.0], [0.14, 0.38]]),
        "label": np.array([[0, 0], [1, 0]]),
        "valid": np.array([[True, False], [True, True]]),  # the last one is past the mask
    }
    peaks = unknown_probe.keyword_peaks(probs, mask, events, num_keywords=2, hop_s=0.04, radius=1)
    np.testing.assert_allclose(peaks["own"], [0.8, 0.1])
    np.testing.assert_allclose(peaks["other"], [0.2, 0.4])
    np.testing.assert_allclose(peaks["unknown"], [0.9, 0.0])
    found = unknown_probe.summary(peaks, {"unknown_frames_above": 0.1})
    assert found["keywords"] == 2 and found["unknown_higher"] == 0.5
    assert found["other_keyword_higher"] == 0.5 and found["own_above"] == 0.5
    none = unknown_probe.keyword_peaks(
        probs[..., :2], mask, events, num_keywords=2, hop_s=0.04, radius=1
    )
    assert unknown_probe.summary(none, {})["unknown_higher"] is None
