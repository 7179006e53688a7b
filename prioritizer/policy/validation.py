"""Config validation errors as one line per problem: ``KEY.PATH: what is allowed (got VALUE)``.

The config classes (:class:`prioritizer.policy.config.PolicyConfig`,
:class:`prioritizer.daemon.config.DaemonConfig`) are pydantic dataclasses: field constraints
carry the allowed ranges, validators the rules across fields. :func:`validate` runs one of them
on parsed YAML and turns pydantic's :class:`~pydantic.ValidationError` into a
:class:`ConfigError` whose message has one line per problem, each naming the key path (dotted,
list items as ``[i]``), the allowed range or the fix, and the value given. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any, Iterable, TypeVar

from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")

#: Messages for pydantic's error types (``ValidationError.errors()[i]["type"]``); ``{x}`` is
#: filled from the error's ``ctx``.
MESSAGES = {
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}",
    "less_than": "must be < {lt}",
    "literal_error": "must be {expected}",
    "float_type": "expected a number",
    "int_type": "expected a whole number",
    "bool_type": "expected true or false",
    "string_type": "expected a string",
    "string_too_short": "must not be empty",
    "tuple_type": "expected a list",
    "finite_number": "must be a finite number",
    "dataclass_type": "expected a mapping of keys",
    "dataclass_exact_type": "expected a mapping of keys",
}


#: The error types of a violated numeric bound.
BOUNDS = {"greater_than_equal", "greater_than", "less_than_equal", "less_than"}


class ConfigError(ValueError):
    """The configuration is unusable; one line per problem, each naming the key and the fix."""


class RuleError(ValueError):
    """Raised by a validator: the rules broken, as ``(key, message)`` pairs (key relative to
    the object validated; the message says what is allowed and what was given)."""

    def __init__(self, problems: Iterable[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{k}: {m}" for k, m in self.problems))


def validate(cls: type[T], data: Any, prefix: str = "") -> T:
    """``data`` (parsed YAML: a mapping) as a ``cls``; ``prefix`` (e.g. ``"policy"``) starts
    every key path.

    Raises:
        ConfigError: one line per problem, e.g. ``policy.starve_knob: must be >= 0 (got -1)``.
    """
    if data is None:
        data = {}
    if not isinstance(data, typing.Mapping):
        raise ConfigError(f"{prefix or 'top level'}: expected a mapping of keys, got "
                          f"{type(data).__name__}")
    try:
        return TypeAdapter(cls).validate_python(dict(data))
    except ValidationError as exc:
        raise ConfigError("\n".join(error_lines(cls, exc, prefix))) from None


def replace(obj: T, prefix: str = "", **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``, validated like :func:`validate`.

    Raises:
        ConfigError: one line per problem, e.g. ``starve_knob: must be >= 0 (got -1)``.
    """
    try:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    except ValidationError as exc:
        raise ConfigError("\n".join(error_lines(type(obj), exc, prefix))) from None


def error_lines(cls: type, exc: ValidationError, prefix: str = "") -> list[str]:
    """One ``KEY.PATH: message (got VALUE)`` line per error of ``exc`` raised validating ``cls``."""
    lines: list[str] = []
    for err in exc.errors():
        loc = ((prefix,) if prefix else ()) + tuple(err["loc"])
        ctx = err.get("ctx") or {}
        if isinstance(ctx.get("error"), RuleError):
            base = _path(loc)
            lines += [f"{_join(base, key)}: {msg}" for key, msg in ctx["error"].problems]
        elif err["type"] == "value_error":
            lines.append(f"{_path(loc)}: {ctx.get('error', err['msg'])}")
        elif err["type"] == "unexpected_keyword_argument":
            lines.append(f"{_path(loc)}: unknown key{_did_you_mean(cls, err['loc'])}")
        else:
            template = MESSAGES.get(err["type"])
            shown = {k: _num(v) for k, v in ctx.items()}
            text = template.format(**shown) if template else err["msg"]
            if err["type"] in BOUNDS:
                text = _range(cls, err["loc"]) or text
            lines.append(f"{_path(loc)}: {text} (got {err['input']!r})")
    return lines


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


def _join(base: str, key: str) -> str:
    return key if base == "top level" else f"{base}.{key}"


def _owner(cls: type, loc: tuple[Any, ...]) -> Any:
    """The dataclass holding the key at ``loc`` (``object`` when there is none)."""
    owner: Any = cls
    for part in loc[:-1]:
        hints = typing.get_type_hints(owner) if dataclasses.is_dataclass(owner) else {}
        owner = hints.get(part, object)
    return owner


def _range(cls: type, loc: tuple[Any, ...]) -> str:
    """``must be in LO..HI`` for a field bounded on both sides, else ``""``."""
    fields = getattr(_owner(cls, loc), "__pydantic_fields__", {})
    info = fields.get(loc[-1]) if loc and isinstance(loc[-1], str) else None
    bounds = {k: getattr(m, k) for m in (info.metadata if info else ())
              for k in ("ge", "gt", "le", "lt") if hasattr(m, k)}
    low = bounds.get("ge", bounds.get("gt"))
    high = bounds.get("le", bounds.get("lt"))
    if low is None or high is None:
        return ""
    return (f"must be {'>=' if 'ge' in bounds else '>'} {_num(low)} and "
            f"{'<=' if 'le' in bounds else '<'} {_num(high)}")


def _num(value: Any) -> Any:
    """``60`` for 60.0, ``0.5`` for 0.5; anything else unchanged."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value


def _did_you_mean(cls: type, loc: tuple[Any, ...]) -> str:
    """``; did you mean 'x'?`` (or the valid keys) for the unknown key at ``loc``."""
    owner = _owner(cls, loc)
    if not dataclasses.is_dataclass(owner):
        return ""
    names = [f.name for f in dataclasses.fields(owner)]
    close = difflib.get_close_matches(str(loc[-1]), names, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(sorted(names))}"
