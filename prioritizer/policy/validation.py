"""Config validation: one line per problem, ``KEY.PATH: what is allowed (got VALUE)``.

The config classes (:class:`prioritizer.policy.config.PolicyConfig`,
:class:`prioritizer.daemon.config.DaemonConfig`) are frozen dataclasses whose field types say
what is valid: ``Annotated[float, msgspec.Meta(ge=0)]`` (a bound), ``Literal[...]`` (names),
``tuple[X, ...]`` (a YAML list), :class:`Rule` (a check beyond type and bounds), a nested
config class (a YAML section). Their ``__post_init__`` calls :func:`check`, so that every
construction (``PolicyConfig(starve_knob=-1)``, ``dataclasses.replace``, :func:`validate` on
parsed YAML) is checked by the same declaration, the only copy of the rules; then the class's
``rules()`` method the rules across fields. A class whose rules come as ``rule_groups()``
(each rule with the dotted key paths it reads, :data:`RuleGroup`) has each rule run whenever
those keys are valid, so that one bad key hides no other problem; the rules of any other class
run once every field is valid. msgspec does the type and bound checks
(``msgspec.convert(..., strict=True)``: a bool is not a number, a float not a whole number, an
int is taken as a float); this module words what it refuses, every problem at once, each
naming the key path (dotted, list items as ``[i]``), the allowed range or the fix, and the value
given. What a file holds is echoed bounded and escaped (:func:`shown`): a 200,000-character
value, a 30,000-item list or a key with a newline still makes one short line; a key that is not
a string, a whole number past any float and a lone surrogate (``"\\ud800"``) are each one
worded line too. A text key (or a name list's item) whose unquoted
value YAML 1.1 reads as a boolean, number or null (``lease_name: no``) says so and how to quote
it; a key of a few names says what YAML made of such a value. msgspec rather than
pydantic: it loads in a few milliseconds where pydantic took about 0.1 s of every ``dlprio``
command and every replay (docs/simulator.md, "Speed"). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from slurm_plugin.common.wording import (MAX_SHOWN, close_name, not_text_message, read_as_not_text,
                                         shown, yaml_reading, utf8_text)

__all__ = ["EXPECTED", "MAX_SHOWN", "ConfigError", "Problem", "Rule", "RuleGroup", "check",
           "close_name", "lines", "not_text_message", "read_as_not_text", "replace", "shown", "unknown_key",
           "validate", "yaml_reading"]

T = TypeVar("T")

#: What a value of each declared base type must be, when it is not one.
EXPECTED = {float: "expected a number", int: "expected a whole number", bool: "expected true or false",
            str: "expected a string"}

#: A key shown as written in a key path (as it always was): printable, at most 80 characters,
#: no path syntax (``.``, ``[``, ``]``, ``:``), quote or edge space; any other key is shown as
#: :func:`shown` quotes it, so that it stays one line and reads as one key.
_PLAIN_KEY = re.compile(r"[^\s.\[\]:'\"](?:[^.\[\]:'\"]{0,78}[^\s.\[\]:'\"])?\Z")

#: How a YAML key that is not a string reads to whoever wrote it (``1:``, ``null:``, ``true:``).
_KEY_KINDS = {bool: "true/false", type(None): "null", int: "a number", float: "a number"}

#: A problem: the key path (keys and list indices) and the message.
Problem = tuple[tuple[Any, ...], str]
#: A rule across fields: the dotted key paths it reads (``"interval_s"``, ``"auto_tune.grid"``)
#: and the check, which returns ``(key, message)`` pairs of what it finds broken.
RuleGroup = tuple[tuple[str, ...], Callable[[Any], list[tuple[str, str]]]]


class ConfigError(ValueError):
    """The configuration is unusable; one line per problem, each naming the key and the fix.

    Attributes:
        problems: the problems as (key path, message) pairs, when raised by :func:`check`
            (``[]`` when the message was written whole).
        partial: the config as far as it is valid (its valid fields converted, the others
            as given or defaulted), for the rules of an enclosing section (:data:`RuleGroup`)
            that read only valid keys; None when not built.
    """

    def __init__(self, message: str | Iterable[Problem], partial: Any = None) -> None:
        self.problems: list[Problem] = [] if isinstance(message, str) else list(message)
        self.partial = partial
        super().__init__(message if isinstance(message, str) else "\n".join(lines(self.problems)))


@dataclasses.dataclass(frozen=True)
class Rule:
    """``Annotated`` metadata: a check of one field beyond its type and bounds. ``test(value)``
    is true when the value is allowed; ``message`` says what is (the value is added)."""

    test: Callable[[Any], bool]
    message: str


def check(obj: Any) -> None:
    """Check every field of the config dataclass ``obj`` against its declared type, store the
    converted values (an int given for a float as a float, a list as a tuple), then run
    ``obj.rules()`` (``(key, message)`` pairs; run only when every field is valid, as a rule
    may read any of them), or of ``obj.rule_groups()`` those whose keys are valid
    (:func:`_rule_problems`). Called from ``__post_init__``.

    Raises:
        ConfigError: with ``problems``, one per bad field or list item and per broken rule.
    """
    problems: list[Problem] = []
    for name, tp in _hints(type(obj)).items():
        value, found = _convert(getattr(obj, name), tp, name)
        problems += [((name, *path), msg) for path, msg in found]
        object.__setattr__(obj, name, value)
    problems += _rule_problems(obj, problems)
    if problems:
        raise ConfigError(problems, partial=obj)


def _rule_problems(obj: Any, problems: list[Problem]) -> list[Problem]:
    """The broken rules across fields of ``obj``, given the ``problems`` of its fields: with
    none, every rule (``rules()``); with some, the rules of ``rule_groups()`` that read no key
    with a problem (a key path ``a.b`` is valid when no problem's path starts with it nor is
    a start of it: ``a`` not a mapping), and none of a class without ``rule_groups``."""
    if not problems:
        return [((key,), msg) for key, msg in obj.rules()]
    groups = getattr(obj, "rule_groups", None)
    if groups is None:
        return []
    bad = [_flat(path) for path, _ in problems]
    found: list[Problem] = []
    for needs, rule in groups():
        wanted = [tuple(need.split(".")) for need in needs]
        if not any(path[:len(w)] == w or w[:len(path)] == path for w in wanted for path in bad):
            found += [((key,), msg) for key, msg in rule(obj)]
    return found


def _flat(path: tuple[Any, ...]) -> tuple[Any, ...]:
    """A key path with each dotted key (``auto_tune.grid``, a rule's key) split in parts."""
    return tuple(x for part in path for x in (part.split(".") if isinstance(part, str) else [part]))


def validate(cls: type[T], data: Any, prefix: str = "") -> T:
    """``data`` (parsed YAML: a mapping, or ``None`` for all defaults) as a ``cls``; ``prefix``
    (e.g. ``"policy"``) starts every key path. Problems come in the order of the declared
    fields, nested sections in place, then unknown keys in the order given.

    Raises:
        ConfigError: one line per problem, e.g. ``policy.starve_knob: must be >= 0 (got -1)``.
    """
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"{prefix or 'top level'}: expected a mapping of keys, got "
                          f"{type(data).__name__}")
    try:
        return _build(cls, data or {})
    except ConfigError as exc:
        raise ConfigError(_prefixed(exc, prefix)) from None


def replace(obj: T, prefix: str = "", **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``; ``prefix`` starts every key path of an error.

    Raises:
        ConfigError: one line per problem, e.g. ``starve_knob: must be >= 0 (got -1)``.
    """
    try:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    except ConfigError as exc:
        raise ConfigError(_prefixed(exc, prefix)) from None


def lines(problems: Iterable[Problem]) -> list[str]:
    """``KEY.PATH: message`` for each problem."""
    return [f"{_path(path)}: {msg}" for path, msg in problems]


def _prefixed(exc: ConfigError, prefix: str) -> list[Problem] | str:
    if not exc.problems:
        return str(exc)
    return [(((prefix,) if prefix else ()) + path, msg) for path, msg in exc.problems]


def _build(cls: type[T], data: Mapping[Any, Any]) -> T:
    """A ``cls`` from a mapping: every bad field, nested key, broken rule and unknown key
    reported together (the rules across fields as :func:`_rule_problems` runs them)."""
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    for name, tp in _hints(cls).items():
        if name in data:
            values[name], found = _convert(data[name], tp, name)
            problems += [((name, *path), msg) for path, msg in found]
    unknown = [unknown_key(key, _hints(cls)) for key in data if key not in _hints(cls)]
    if not problems and not unknown:
        return cls(**values)
    partial = _partial(cls, values)
    if not problems:
        try:   # the rules of a class with valid fields: its own check runs them
            partial = cls(**values)
        except ConfigError as exc:
            problems, partial = exc.problems, exc.partial
    else:
        problems += _rule_problems(partial, problems)
    raise ConfigError(problems + unknown, partial=partial)


def _partial(cls: type[T], values: Mapping[str, Any]) -> T:
    """A ``cls`` not checked: ``values`` as converted (as given where bad), every other field
    at its default; only rules that read valid keys see it (:func:`_rule_problems`)."""
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in values:
            value = values[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            continue
        object.__setattr__(obj, f.name, value)
    return obj


def unknown_key(key: Any, names: Iterable[str]) -> Problem:
    """The problem of a key that is none of ``names``: named as written when it is a plain
    name, else as :func:`shown` quotes it (a newline or an escape sequence in a key never
    breaks or restyles the line); a key that is not a string (``1:``, ``null:``) says so.
    The message offers the closest name (:func:`close_name`), else every name."""
    names = list(names)
    if not isinstance(key, str):
        kind = _KEY_KINDS.get(type(key), type(key).__name__)
        word = ("null" if key is None else str(key).lower() if isinstance(key, bool)
                else shown(key))
        return ((word,), f"unknown key ({kind}, not a name){_did_you_mean(names, '')}")
    name = key if key.isprintable() and _PLAIN_KEY.match(key) else shown(key)
    return ((name,), f"unknown key{_did_you_mean(names, key)}")


def _convert(value: Any, tp: Any, key: str = "") -> tuple[Any, list[Problem]]:
    """``value`` as the declared type ``tp``, and its problems (paths relative to it);
    ``key`` (the field name) words the quoting fix of a text read as a boolean or number."""
    base, meta, rules = _parts(tp)
    if _is_config(base):  # a nested section; empty (None) means all defaults
        if isinstance(value, base):
            return value, []
        if value is None or isinstance(value, Mapping):
            try:
                return _build(base, value or {}), []
            except ConfigError as exc:   # the valid part, for the enclosing rules
                return (value if exc.partial is None else exc.partial), exc.problems
        return value, [((), f"expected a mapping of keys (got {shown(value)})")]
    if typing.get_origin(base) is tuple:
        if not isinstance(value, list | tuple):
            return value, [((), f"expected a list (got {shown(value)})")]
        item = typing.get_args(base)[0]
        done = [_convert(v, item, f"{key}: [") for v in value]
        return (tuple(v for v, _ in done),
                [((i, *path), msg) for i, (_, found) in enumerate(done) for path, msg in found])
    if isinstance(value, str) and not utf8_text(value):
        # YAML's "\ud800" escape: no character, not writable as UTF-8 (to Slurm, a log, a path);
        # msgspec raised UnicodeEncodeError for it (a traceback, or a message without the key)
        what = ("must be text without a lone surrogate (\\ud800-\\udfff)" if base is str
                else _type_message(base) + _range(meta))
        return value, [((), f"{what} (got {shown(value)})")]
    try:
        converted = msgspec.convert(value, base, strict=True)
    except msgspec.ValidationError:
        if base is str and read_as_not_text(value):
            return value, [((), not_text_message(value, key))]
        if base is float and isinstance(value, int) and not isinstance(value, bool):
            # a whole number past the largest float (10**400): a number, just not a finite one
            return value, [((), f"must be a finite number (got {shown(value)})")]
        if typing.get_origin(base) is Literal and read_as_not_text(value):
            return value, [((), f"{_type_message(base)} (got {yaml_reading(value)})")]
        if isinstance(base, types.UnionType) and rules:
            # a number or a word (``max_hurt_share: 0.0005`` or ``off``): the rule says which;
            # an unquoted off is YAML's boolean false
            quote = '; quote it: "off"' if value is False else ""
            got = yaml_reading(value) if read_as_not_text(value) else shown(value)
            return value, [((), f"{rules[0].message} (got {got}{quote})")]
        # the range too, as the command-line options word it (``expected a number >= 0``)
        what = _type_message(base) + _range(meta)
        if base is int and isinstance(value, float) and value.is_integer():
            # YAML reads 1e9 and 5.0 as decimal numbers, never as whole ones
            return value, [((), f"{what} (got {shown(value)}, a decimal number: write it "
                                 "without a decimal point or exponent)")]
        return value, [((), f"{what} (got {shown(value)})")]
    if isinstance(converted, float) and not math.isfinite(converted):
        return value, [((), f"must be a finite number (got {shown(value)})")]
    if meta is not None:
        try:
            msgspec.convert(converted, Annotated[base, meta], strict=True)
        except msgspec.ValidationError:
            return value, [((), f"{_bound_message(meta)} (got {shown(value)})")]
    return converted, [((), f"{r.message} (got {shown(value)})") for r in rules
                       if not r.test(converted)]


def _type_message(base: Any) -> str:
    if typing.get_origin(base) is Literal:
        shown = [repr(v) for v in typing.get_args(base)]
        return "must be " + (f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1
                             else shown[0])
    args = typing.get_args(base)
    if type(None) in args and len(args) == 2:   # X | None: null is the default, told apart
        base = next(a for a in args if a is not type(None))
    origin = typing.get_origin(base) or base
    if origin in (dict, Mapping):
        return "expected a mapping of keys"
    if origin in (list, tuple):
        return "expected a list"
    return EXPECTED.get(base, f"expected {getattr(base, '__name__', base)}")


def _bound_message(meta: msgspec.Meta) -> str:
    """``must be >= 0``, ``must be >= 0 and <= 65535``, ``must not be empty``."""
    if meta.min_length is not None:
        return "must not be empty"
    low = [f"{op} {_num(v)}" for op, v in ((">=", meta.ge), (">", meta.gt)) if v is not None]
    high = [f"{op} {_num(v)}" for op, v in (("<=", meta.le), ("<", meta.lt)) if v is not None]
    return "must be " + " and ".join(low + high)


def _range(meta: msgspec.Meta | None) -> str:
    """`` >= 0 and <= 65535`` of a numeric field's bounds (``""``: none)."""
    if meta is None or meta.min_length is not None or all(
            v is None for v in (meta.ge, meta.gt, meta.le, meta.lt)):
        return ""
    return " " + _bound_message(meta).removeprefix("must be ")


def _parts(tp: Any) -> tuple[Any, msgspec.Meta | None, list[Rule]]:
    """A declared type as (base type, its ``msgspec.Meta`` or None, its :class:`Rule`s)."""
    if typing.get_origin(tp) is not Annotated:
        return tp, None, []
    base, *extra = typing.get_args(tp)
    meta = next((m for m in extra if isinstance(m, msgspec.Meta)), None)
    return base, meta, [r for r in extra if isinstance(r, Rule)]


def _field_hints(cls: type) -> dict[str, Any]:
    """The declared field types of a config dataclass, in declaration order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


#: cached per class (a class is hashable; typeshed's ``functools.cache`` asks for Hashable)
_hints: Callable[[type], dict[str, Any]] = functools.cache(_field_hints)


def _is_config(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp) and hasattr(tp, "rules")


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


def _num(value: Any) -> Any:
    """``60`` for 60.0, ``0.5`` for 0.5; anything else unchanged."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value


def _did_you_mean(names: list[str], key: str) -> str:
    """``; did you mean 'x'?`` (or the valid keys) for an unknown key."""
    close = close_name(key, names)
    return f"; did you mean {close!r}?" if close else f"; valid keys: {', '.join(sorted(names))}"
