"""Dataclasses from JSON values, field by field by their type hints: the one converter of
the files the project reads back (bundle.json: `speechkit.bundle`; export.json:
`speechkit.export_read`) and of the experiment configs' sections (`experiments.common.build`).

    config = from_dict(AfKwsConfig, manifest["model_config"], "model_config")
    config = from_dict(AfKwsConfig, section, "config.model", defaults=True, positional=True)

No name in the values is imported or called, and every error names `where` and the
field's path ("model_config.stages[1].stride: expected an int, got '2'"). A field marked
`OPTIONAL` (added after files were written) may be missing. The types accepted and the
options: docs/speechkit.md, "dataclass_json".
"""

from __future__ import annotations

import dataclasses
import numbers
import types
import typing
from collections.abc import Mapping

OPTIONAL = "bundle_optional"
"""A dataclass field whose metadata holds this key (set True) was added after bundles
were written: `from_dict` gives it its default when the values lack it."""


@dataclasses.dataclass(frozen=True)
class _Rules:
    defaults: bool  # any field with a default may be missing
    positional: bool  # a nested dataclass may be a sequence of its fields in order


def from_dict(
    cls: type,
    values,
    where: str,
    *,
    defaults: bool = False,
    positional: bool = False,
    overrides: Mapping[str, typing.Any] | None = None,
):
    """`cls(**values, **overrides)` from JSON values (see the module docstring).

    Args:
      cls: the dataclass.
      values: a dict of its fields' JSON values (lists or tuples for tuples, dicts for
        nested dataclasses).
      where: the name of `values` in errors ("model_config", "config.model").
      defaults: any field with a default may be missing (else only `OPTIONAL` ones).
      positional: a nested dataclass may be given as a sequence of its fields in order.
      overrides: fields given as they are, not converted; they replace `values`' own.
    """
    return _build(cls, values, where, _Rules(defaults, positional), dict(overrides or {}))


def _build(cls: type, values, where: str, rules: _Rules, overrides: dict):
    fields = dataclasses.fields(cls)
    names = [field.name for field in fields]
    if rules.positional and isinstance(values, list | tuple):
        if len(values) > len(names):
            raise ValueError(
                f"{where}: expected at most {len(names)} items ({cls.__name__}'s fields "
                f"{names}), got {values!r}"
            )
        values = dict(zip(names, values, strict=False))
    if not isinstance(values, dict):
        raise TypeError(f"{where}: expected an object of {cls.__name__}'s fields, got {values!r}")
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: not a field of {cls.__name__} (fields: {names})")
    may_miss = {field.name for field in fields if _may_miss(field, rules)} | set(overrides)
    missing = [name for name in names if name not in values and name not in may_miss]
    if missing:
        raise ValueError(f"{where}.{missing[0]}: missing (fields missing: {missing})")
    hints = typing.get_type_hints(cls)
    built = {
        name: _convert(hints[name], values[name], f"{where}.{name}", rules)
        for name in names
        if name in values and name not in overrides
    }
    try:
        return cls(**built, **overrides)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{where}: {err}") from None


def _may_miss(field: dataclasses.Field, rules: _Rules) -> bool:
    if field.metadata.get(OPTIONAL):
        return True
    return rules.defaults and (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )


def _convert(hint, value, where: str, rules: _Rules):
    """A JSON value as the type `hint` (see `from_dict`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        if len(options) != 1:
            raise TypeError(f"{where}: unsupported field type {hint}")
        return _convert(options[0], value, where, rules)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where, rules, {})
    if origin is tuple:
        return _convert_tuple(args, value, where, rules)
    if hint is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where}: expected an int, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{where}: expected a number, got {value!r}")
        try:
            return float(value)
        except OverflowError:
            bits = value.bit_length()
            raise ValueError(f"{where}: a {bits}-bit integer, beyond a float") from None
    if hint is str:
        if not isinstance(value, str):
            raise TypeError(f"{where}: expected a string, got {value!r}")
        return value
    raise TypeError(f"{where}: unsupported field type {hint}")


def _convert_tuple(args, value, where: str, rules: _Rules) -> tuple:
    if not isinstance(value, list | tuple):
        raise TypeError(f"{where}: expected a list, got {value!r}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_convert(args[0], v, f"{where}[{i}]", rules) for i, v in enumerate(value))
    if not args or len(args) != len(value):
        raise ValueError(f"{where}: expected {len(args)} items, got {value!r}")
    return tuple(
        _convert(arg, v, f"{where}[{i}]", rules)
        for i, (arg, v) in enumerate(zip(args, value, strict=True))
    )
