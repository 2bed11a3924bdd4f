"""speechkit.dataclass_json: the one JSON -> dataclass converter, in the two ways it is
called: a file's section (bundle.json, export.json: exact fields, `OPTIONAL` ones may be
missing; tests/speechkit/test_bundle.py and the hostile and fuzz tests cover it) and a
config section (`experiments.common.build`: defaults, dataclasses by position,
overrides)."""

from __future__ import annotations

import dataclasses

import pytest

from speechkit import dataclass_json


@dataclasses.dataclass(frozen=True)
class Stage:
    channels: int
    blocks: int = 1


@dataclasses.dataclass(frozen=True)
class Net:
    name: str
    stages: tuple[Stage, ...] = (Stage(8),)
    gain: float = 1.0
    span: tuple[float, float] = (0.0, 1.0)

    def __post_init__(self):
        if self.gain <= 0:
            raise ValueError(f"Net.gain: expected > 0, got {self.gain}")


def test_a_config_section_takes_defaults_positions_tuples_and_overrides():
    section = {"stages": ((4, 2), (8,)), "gain": 2, "span": (0.5, 1.5)}
    net = dataclass_json.from_dict(
        Net, section, "config.model", defaults=True, positional=True, overrides={"name": "x"}
    )
    assert net == Net("x", (Stage(4, 2), Stage(8)), 2.0, (0.5, 1.5))
    assert type(net.gain) is float and type(net.stages) is tuple
    # an override is given as it is and replaces the section's own value unconverted
    net = dataclass_json.from_dict(
        Net, {"name": 3}, "config.model", defaults=True, overrides={"name": "y"}
    )
    assert net.name == "y"


@pytest.mark.parametrize(
    "section, error, message",
    [
        ({"name": "x", "width": 3}, ValueError, r"^config\.model\.width: not a field of Net"),
        ({"name": "x", "gain": "2"}, TypeError, r"^config\.model\.gain: expected a number"),
        (
            {"name": "x", "stages": [[1, 2, 3]]},
            ValueError,
            r"^config\.model\.stages\[0\]: expected",
        ),
        ({"name": "x", "stages": [["8"]]}, TypeError, r"^config\.model\.stages\[0\]\.channels"),
        ({"name": "x", "gain": 0.0}, ValueError, r"^config\.model: Net\.gain: expected > 0"),
        ({"gain": 2.0}, ValueError, r"^config\.model\.name: missing"),
        ({"name": "x", "gain": 10**400}, ValueError, r"^config\.model\.gain: a 1329-bit integer"),
    ],
)
def test_a_config_section_error_names_the_field(section, error, message):
    with pytest.raises(error, match=message):
        dataclass_json.from_dict(Net, section, "config.model", defaults=True, positional=True)


def test_a_file_section_takes_exact_fields_and_no_positions():
    values = {"name": "x", "stages": [{"channels": 4, "blocks": 2}], "gain": 1, "span": [0, 1]}
    assert dataclass_json.from_dict(Net, values, "model_config") == Net("x", (Stage(4, 2),))
    with pytest.raises(TypeError, match=r"^model_config\.stages\[0\]: expected an object"):
        dataclass_json.from_dict(Net, {**values, "stages": [[4, 2]]}, "model_config")
    with pytest.raises(ValueError, match=r"^model_config\.gain: missing"):
        dataclass_json.from_dict(Net, {"name": "x", "stages": [], "span": [0, 1]}, "model_config")
