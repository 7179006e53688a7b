"""Field types and error formatting shared by the v1 and v2 spec models (submit/spec_v1.py, spec_v2.py).

The spec models are msgspec Structs (docs/design.md, code rule 7: one declaration defines what is
valid); msgspec is used instead of pydantic because it loads in 8-10 ms where pydantic and the
models took 65-80 ms, and dlsubmit's start-up is its cost (docs/dlsubmit.md, "Speed"). This module gives the
Structs strict field types whose failures carry a message written for users (``must be an
integer in 0..1024``), and turns a failed conversion into one line per problem, each starting
with the field path as it appears in the spec file
(``taskRoles.worker.resourcePerInstance.gpu: must be an integer in 0..1024``).

msgspec stops at the first problem and writes a mapping's keys as ``[...]``; so when the one
fast conversion fails, :func:`problems` walks the document along the declared types (Struct
fields in declaration order, every list item, every mapping key and value) and converts each
part on its own: every bad field is reported, with the real keys in its path. Upstream field rules
come from the OpenPAI v1 JSON schema (microsoft/pai contrib/pai_vscode/schemas) and the v2
protocol schema (microsoft/openpai-protocol schemas/v2/schema.yaml).
"""

from __future__ import annotations

import contextvars
import functools
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec

from slurm_plugin.common.wording import (close_name, not_text_message, quoted, read_as_not_text,
                                         shown)
from submit.errors import SpecError, field_path
from submit.runtime import reserved_env

__all__ = ["SpecError", "field_path", "validate", "problems", "Struct", "OpenStruct", "marker",
           "Int", "GpuCount", "Text", "NonEmpty", "Command", "Ident", "EnvName", "Image", "Scalar", "Bool",
           "NotEmpty", "image_problem"]

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")   # \Z: "$" also matches before a final newline


class Struct(msgspec.Struct, forbid_unknown_fields=True):
    """A spec mapping whose unknown keys are errors (``unknown field; did you mean instances?``
    for a key close to a field, else ``unknown field (allowed: ...)``). Subclasses
    say ``kw_only=True`` (msgspec does not inherit it), so required and optional fields keep the
    order of the spec's documentation, which is the order problems are reported in."""


class OpenStruct(msgspec.Struct):
    """A spec mapping whose other keys are ignored (OpenPAI leaves them to plugins), except a key
    that differs from one of its fields only as a typo does (:func:`problems`: ``placment``,
    ``gpuIsolaton``, ``Placement``): that is an error naming the field. ``kw_only=True`` in
    subclasses as for :class:`Struct`."""


NotEmpty = msgspec.Meta(min_length=1)
"""``Annotated[list[X], NotEmpty]``: a list or mapping with at least one entry (``must not be empty``)."""


class _Marker(type):
    """Metaclass of the field types made by :func:`marker`. msgspec hands a value declared with
    such a type to :func:`_hook`, which returns what the type's ``check`` returns (a plain
    ``int``, ``str`` ...); msgspec then asks whether that is an instance of the declared type,
    which this answers with the type's ``base``."""

    base: type | tuple[type, ...]
    check: Callable[[Any], Any]
    items: Any

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.base)


def marker(name: str, base: type | tuple[type, ...], check: Callable[[Any], Any],
           items: Any = None) -> Any:
    """A field type: ``check(value)`` returns the value to keep or raises ``ValueError(message)``;
    the message becomes the problem's text after the field path. ``items``: for a type that also
    takes a list (msgspec allows no union of a custom type with ``list``), the declared type of
    that list's items, so that :func:`problems` reports every bad item at its own path
    (``uri[2]``) instead of ``check``'s one message."""
    return _Marker(name, (), {"base": base, "check": staticmethod(check), "items": items,
                              "__module__": __name__})


def _hook(tp: Any, obj: Any) -> Any:
    if isinstance(tp, _Marker):
        return tp.check(obj)
    raise NotImplementedError(f"no conversion to {tp!r}")


@functools.cache
def Int(lo: int, hi: int = 2**31 - 1, also: tuple[int, ...] = ()) -> Any:
    """An ``int`` field (never bool, float or numeric string) in ``lo..hi`` or one of ``also``."""
    extra = f"{' or '.join(map(str, also))} or " if also else ""
    want = f"must be {extra}an integer in {lo}..{hi}"

    def check(v: Any) -> int:
        if type(v) is not int or not (lo <= v <= hi or v in also):
            raise ValueError(want)
        return v

    return marker(f"Int_{lo}_{hi}", int, check)


GPU_COUNT_RULE = "must be an integer in 0..1024 or a fraction of one GPU (0 < gpu < 1, e.g. 0.5)"


def _gpu_count(v: Any) -> int | float:
    if type(v) is int and 0 <= v <= 1024:
        return v
    if type(v) is float and 0 < v < 1:
        return v
    raise ValueError(GPU_COUNT_RULE)


GpuCount = marker("GpuCount", (int, float), _gpu_count)
"""GPUs per instance: a whole number 0..1024, or a fraction of one GPU (0 < gpu < 1) that
dlsubmit asks of Slurm as GPU shards (slurm_plugin/shard.py)."""


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError("must be a string")
    if "\x00" in v:
        raise ValueError("must not contain a NUL character")
    return v


def _nonempty(v: Any) -> str:
    v = _text(v)
    if not v.strip():
        raise ValueError("must not be empty")
    return v


def _command(v: Any) -> str:
    v = _text(v)
    if not v.strip():
        raise ValueError("must not be empty or blank: it would run nothing")
    return v


def _ident(v: Any) -> str:
    v = _text(v)
    if not _IDENT_RE.match(v):
        raise ValueError("must be a shell variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return v


def _env_name(v: Any) -> str:
    v = _ident(v)
    why = reserved_env(v)
    if why:
        raise ValueError(f"{v} is reserved ({why}); rename the variable: the job's environment "
                         "may not replace what Slurm or dlsubmit set for every task")
    return v


def _scalar(v: Any) -> str | int | float | bool:
    if isinstance(v, bool | int | float):
        return v
    return _text(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("must be true or false")
    return v


#: what a container image must look like (docker's reference grammar and a local file's path
#: have neither spaces nor control characters, and a leading '-' would read as an option)
IMAGE_RULE = ("must be one container image reference: no spaces or control characters, not "
              "starting with '-' (e.g. nvcr.io/nvidia/pytorch:24.01-py3, ./pt.sqsh, pt.sif)")


def image_problem(v: Any) -> str | None:
    """Why ``v`` cannot be a role's container image (:data:`IMAGE_RULE`), or None."""
    if not isinstance(v, str):
        return "must be a string"
    if not v:
        return "must not be empty"
    if not v.isprintable() or any(c.isspace() for c in v) or v.startswith("-"):
        return IMAGE_RULE
    return None


def _image(v: Any) -> str:
    why = image_problem(_text(v))
    if why:
        raise ValueError(why)
    return v


Text = marker("Text", str, _text)
"""Any string without NUL (commands, paths, names)."""
NonEmpty = marker("NonEmpty", str, _nonempty)
Command = marker("Command", str, _command)
"""A command (v2 ``commands[i]``, v1 ``command``): text that is not empty or only blanks,
as a list of no commands is refused."""
Ident = marker("Ident", str, _ident)
"""A shell variable name (port labels, parameter names)."""
EnvName = marker("EnvName", str, _env_name)
"""A job environment variable's name: a shell variable name that Slurm and the script's runtime
do not set themselves (submit/runtime.py :func:`~submit.runtime.reserved_env`)."""
Image = marker("Image", str, _image)
"""A role's container image (:func:`image_problem`)."""
Scalar = marker("Scalar", (str, int, float, bool), _scalar)
Bool = marker("Bool", bool, _bool)

#: The syntax of the spec being checked, "YAML" or "JSON" (:func:`submit.load.load` sets it
#: per file): a value that is not text is named as that syntax wrote it.
SPEC_SYNTAX: contextvars.ContextVar[str] = contextvars.ContextVar("spec_syntax", default="YAML")

#: Where the spec's values were written (:class:`slurm_plugin.common.yamlfile.SourceText` of a
#: YAML spec, set per file by :func:`submit.load.load`; None for JSON and documents given as
#: data): a hint shows a value as the user wrote it (``"0755"``, not ``"493"``).
SPEC_SOURCE: contextvars.ContextVar[Callable[[tuple[Any, ...]], str | None] | None] = \
    contextvars.ContextVar("spec_source", default=None)

_EXPECTED = {"str": "must be a string", "int": "must be an integer", "bool": "must be true or false",
             "array": "must be a list", "object": "must be a mapping", "float": "must be a number"}
_AT = re.compile(r"(.*) - at `[^`]*`(?: in `\$[^`]*`)?", re.DOTALL)


def _one_of(values: tuple[Any, ...]) -> str:
    shown = [repr(v) for v in values]
    return "must be one of " + (" or ".join(shown) if len(shown) < 3
                                else f"{', '.join(shown[:-1])} or {shown[-1]}")


def _message(exc: msgspec.ValidationError, tp: Any, value: Any = None, at: tuple[Any, ...] = ()) -> str:
    """The text of msgspec's error for ``value`` of type ``tp`` at path ``at``.
    A string field given what YAML made of an unquoted ``no``, ``on``, ``~``, ``0755`` or
    ``echo step: 1`` (a mapping) is told so, with the fix (quote it, shown with the text as
    written, from :data:`SPEC_SOURCE`), as ``dlprio.yaml``'s text keys are; when that text quoted
    would still be wrong (``signal: 12``), the field's own rule is given instead."""
    text = _text_of(exc, tp)
    syntax = SPEC_SYNTAX.get()
    if text in (_EXPECTED["array"], _EXPECTED["object"]):
        # an empty value (``extras:`` with nothing under it), or one command not in a list
        if value is None:
            null = "the JSON value is null" if syntax == "JSON" else (
                "YAML read the value as null (an empty value, ~ or null)")
            return f"{text}, but {null}; write its entries under it"
        if text == _EXPECTED["array"] and isinstance(value, str):
            return f"{text}, e.g. [{quoted(value)}] (got {shown(value)})"
        return text
    if text != _EXPECTED["str"] or not (read_as_not_text(value) or isinstance(value, dict | list)):
        return text
    source = SPEC_SOURCE.get()
    written = source(at) if source is not None and value is not None else None
    if isinstance(value, dict | list) and written is None and syntax != "JSON":
        return text   # a document given as data: nothing says how it was written
    candidate = written if written is not None else _written_back(value, syntax)
    if candidate is not None:
        try:
            _convert(candidate, tp)
        except msgspec.ValidationError as again:   # quoted, it would break the field's rule
            rule = _text_of(again, tp)
            return f"{rule} ({_read_as(value, candidate, syntax)}, not text; got {shown(value)})"
    # (a null here is not a default: not optional)
    return not_text_message(value, "", optional=False, syntax=syntax, as_written=written)


def _written_back(value: Any, syntax: str) -> str | None:
    """A scalar written back as text when its source is unknown: ``12``, ``true`` (JSON)."""
    if isinstance(value, bool):
        return str(value).lower() if syntax == "JSON" else None
    return repr(value) if isinstance(value, int | float) else None


def _read_as(value: Any, written: str, syntax: str) -> str:
    """``YAML read 12 as a number`` / ``the JSON value 12 is a number``."""
    kind = ("a boolean" if isinstance(value, bool) else "a number" if isinstance(value, int | float)
            else "a list" if isinstance(value, list) else "a mapping" if isinstance(value, dict)
            else "null")
    return (f"the JSON value {written} is {kind}" if syntax == "JSON"
            else f"YAML read {written} as {kind}")


def _text_of(exc: msgspec.ValidationError, tp: Any) -> str:
    cause = exc.__cause__
    if isinstance(cause, ValueError | TypeError):  # raised by a marker's check
        return str(cause)
    base = _strip(tp)
    if typing.get_origin(base) is Literal:
        return _one_of(typing.get_args(base))
    m = _AT.fullmatch(str(exc))
    text = m.group(1) if m else str(exc)
    if re.match(r"Expected `(array|object)` of length >= 1$", text):
        return "must not be empty"
    found = re.match(r"Expected `([a-z]+)", text)
    return _EXPECTED.get(found.group(1), text) if found else text


def _strip(tp: Any) -> Any:
    """The declared type without ``Annotated`` and ``| None`` (None itself msgspec checks)."""
    if typing.get_origin(tp) is Annotated:
        return _strip(typing.get_args(tp)[0])
    args = typing.get_args(tp)
    if type(None) in args and len(args) == 2:
        return _strip(next(a for a in args if a is not type(None)))
    return tp


def _convert(data: Any, tp: Any) -> Any:
    return msgspec.convert(data, tp, strict=True, dec_hook=_hook)


Problem = tuple[tuple[Any, ...], str]


#: How alike (difflib's ratio) an unknown key of an :class:`OpenStruct` and one of its fields
#: must be for the key to be taken as the field misspelt; a plugin's key (``hivedScheduler``,
#: ``com.microsoft.pai.runtimeplugin``) is far below it.
NEAR_MISS = 0.8


def _near_miss(key: str, names: set[str]) -> list[Problem]:
    """The problem of an unknown key of an :class:`OpenStruct`: none, unless it is one of
    ``names`` misspelt (another case, or at least :data:`NEAR_MISS` alike)."""
    close = next((n for n in sorted(names) if n.lower() == key.lower()), None) or close_name(
        key, names, NEAR_MISS)
    if close is None:
        return []
    return [((key,), f"unknown key; did you mean {close}? (keys unlike dlsubmit's are left to "
                     f"plugins)")]


def problems(data: Any, tp: Any, at: tuple[Any, ...] = (), converts: bool = False) -> list[Problem]:
    """Every problem of ``data`` against the declared type ``tp``, as (path parts, message)
    pairs in document order (Struct fields in declaration order, then unknown keys); ``[]`` when
    it converts and no open mapping in it has a misspelt field (:func:`_near_miss`: an
    :class:`OpenStruct` would drop ``extras.placment`` unread). Path parts are keys, list
    indices, and ``"[key]"`` after a key that is itself wrong (see
    :func:`submit.errors.field_path`). ``at``: the path of ``data`` in the document, for
    :data:`SPEC_SOURCE`; ``converts``: ``data`` is known to convert (its parent did)."""
    first: msgspec.ValidationError | None = None
    if not converts:
        try:
            _convert(data, tp)
        except msgspec.ValidationError as exc:
            first = exc
    ok = first is None
    base = _strip(tp)
    origin = typing.get_origin(base)
    out: list[Problem] = []
    if isinstance(base, type) and issubclass(base, msgspec.Struct) and isinstance(data, dict):
        fields = msgspec.structs.fields(base)
        names = {f.encode_name for f in fields}
        closed = base.__struct_config__.forbid_unknown_fields
        # an unknown key close to a missing required field is that field misspelt: one line
        meant = {key: close_name(key, names) for key in data
                 if isinstance(key, str) and key not in names and closed and not ok}
        for f in fields:
            if f.encode_name in data:
                out += [((f.encode_name, *p), m) for p, m in problems(
                    data[f.encode_name], f.type, (*at, f.encode_name), ok)]
            elif not ok and f.required and f.encode_name not in meant.values():
                out.append(((f.encode_name,), "required field is missing"))
        for key in data:
            if not isinstance(key, str):   # worded as a mapping's key is (below)
                if not ok:
                    out += [((key, "[key]", *p), m) for p, m in problems(key, str, (*at, key, "[key]"))]
            elif key in meant:
                close = meant[key]
                out.append(((key,), f"unknown field; did you mean {close}?" if close else
                            f"unknown field (allowed: {', '.join(f.encode_name for f in fields)})"))
            elif not closed and key not in names:
                out += _near_miss(key, names)
    elif isinstance(data, list) and (origin is list
                                     or isinstance(base, _Marker) and base.items is not None):
        [item] = typing.get_args(base) if origin is list else [base.items]
        for i, v in enumerate(data):
            out += [((i, *p), m) for p, m in problems(v, item, (*at, i), ok)]
    elif origin is dict and isinstance(data, dict):
        key_tp, value_tp = typing.get_args(base)
        for k, v in data.items():
            if not ok:
                out += [((k, "[key]", *p), m) for p, m in problems(k, key_tp, (*at, k, "[key]"))]
            out += [((k, *p), m) for p, m in problems(v, value_tp, (*at, k), ok)]
    if first is None:
        return out
    return out or [((), _message(first, tp, data, at))]


def validate(model: type[msgspec.Struct], data: Any) -> Any:
    """``data`` converted to ``model``; raises :class:`SpecError` with one ``path: message``
    line per problem (:func:`problems`)."""
    try:
        converted = _convert(data, model)
    except msgspec.ValidationError:
        converted = None
    except RecursionError:
        raise SpecError(["(top level): nested too deeply"]) from None
    try:
        found = problems(data, model, converts=converted is not None)
    except RecursionError:
        raise SpecError(["(top level): nested too deeply"]) from None
    # each line once, first place kept; a dict, as a list's `in` made a million problems quadratic
    if not found:
        return converted
    lines = dict.fromkeys(f"{field_path(*parts)}: {msg}" for parts, msg in found)
    raise SpecError(list(lines))
