"""The experiments' `ml_collections` presets, and `section`: a config section whose values
are its dataclass's defaults, so that each default is stated once, in its dataclass."""

from __future__ import annotations

import dataclasses
import types
import typing

import ml_collections
from ml_collections import config_dict


def section(cls, *, leave_out=(), **values) -> ml_collections.ConfigDict:
    """A config section for the dataclass `cls` (`experiments.common.build` maps it back):
    one entry per field of `cls` but those in `leave_out` (the runner sets them), each at
    the field's default unless `values` gives it (a task's or a preset's choice). A tuple
    of dataclasses becomes a tuple of their fields' values, as `build` takes it; a None
    default becomes a placeholder of the field's type, so a flag can still set it."""
    hints = typing.get_type_hints(cls)
    names = [field.name for field in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(names)) + sorted(set(leave_out) - set(names))
    if unknown:
        raise ValueError(f"section: {unknown} are not fields of {cls.__name__}")
    defaults = {}
    for field in dataclasses.fields(cls):
        if field.name in leave_out:
            continue
        if field.name in values:
            defaults[field.name] = values[field.name]
        elif field.default is not dataclasses.MISSING:
            defaults[field.name] = _plain(field.default, hints[field.name])
        else:
            raise ValueError(f"section: {cls.__name__}.{field.name} has no default to state")
    return ml_collections.ConfigDict(defaults)


def _plain(value, hint):
    """A default as a config holds it: dataclasses as tuples of their fields, None as a
    placeholder of the hinted type."""
    if value is None:
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) not in (typing.Union, types.UnionType) or len(options) != 1:
            raise TypeError(f"section: a None default of type {hint} has no placeholder type")
        return config_dict.placeholder(options[0])
    if dataclasses.is_dataclass(value):
        return dataclasses.astuple(value)
    if isinstance(value, tuple):
        return tuple(_plain(item, None) for item in value)
    return value
