"""Field types and error formatting shared by the v1 and v2 spec models (submit/spec_v1.py, spec_v2.py).

The spec models are pydantic v2 models (docs/design.md, code rule 7: one declaration defines what is valid).
This module gives them strict field types whose failures carry a message written for users
(``must be an integer >= 0``), and turns a pydantic ``ValidationError`` into one line per problem,
each starting with the field path as it appears in the spec file
(``taskRoles.worker.resourcePerInstance.gpu: must be an integer >= 0``). Upstream field rules come
from the OpenPAI v1 JSON schema (microsoft/pai contrib/pai_vscode/schemas) and the v2 protocol
schema (microsoft/openpai-protocol schemas/v2/schema.yaml).
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ValidationError

from submit.errors import SpecError, field_path

__all__ = ["SpecError", "field_path", "validate", "Int", "Text", "NonEmpty", "Ident", "Scalar", "Bool"]

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _int_check(lo: int, hi: int, also: tuple[int, ...]) -> Any:
    extra = f"{' or '.join(map(str, also))} or " if also else ""
    want = f"must be {extra}an integer in {lo}..{hi}"

    def check(v: Any) -> int:
        if type(v) is not int or not (lo <= v <= hi or v in also):
            raise ValueError(want)
        return v

    return check


def Int(lo: int, hi: int = 2**31 - 1, also: tuple[int, ...] = ()) -> Any:
    """An ``int`` field (never bool, float or numeric string) in ``lo..hi`` or one of ``also``."""
    return Annotated[int, BeforeValidator(_int_check(lo, hi, also))]


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


def _ident(v: Any) -> str:
    v = _text(v)
    if not _IDENT_RE.match(v):
        raise ValueError("must be a shell variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return v


def _scalar(v: Any) -> str | int | float | bool:
    if isinstance(v, bool | int | float):
        return v
    return _text(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("must be true or false")
    return v


Text = Annotated[str, BeforeValidator(_text)]
"""Any string without NUL (commands, paths, names)."""
NonEmpty = Annotated[str, BeforeValidator(_nonempty)]
Ident = Annotated[str, BeforeValidator(_ident)]
"""A shell variable name (env keys, port labels)."""
Scalar = Annotated[str | int | float | bool, BeforeValidator(_scalar)]
Bool = Annotated[bool, BeforeValidator(_bool)]


def _unwrap(tp: Any) -> list[Any]:
    """The model classes / containers an annotation may hold (Optional and Annotated removed)."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType")):
        return [x for a in typing.get_args(tp) for x in _unwrap(a)]
    return [tp]


def _allowed_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names valid at ``loc[:-1]`` (for 'unknown field' messages)."""
    current: list[Any] = [model]
    for part in loc[:-1]:
        nxt: list[Any] = []
        for tp in current:
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                field = tp.model_fields.get(str(part))
                if field is None:
                    for f in tp.model_fields.values():
                        if f.alias == part:
                            field = f
                if field is not None:
                    nxt.extend(_unwrap(field.annotation))
            elif typing.get_origin(tp) in (list, dict):
                args = typing.get_args(tp)
                nxt.extend(_unwrap(args[-1]))
        current = [t for t in nxt] or current
    for tp in current:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return [f.alias or n for n, f in tp.model_fields.items()]
    return []


_MESSAGES = {
    "missing": "required field is missing",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "int_type": "must be an integer",
    "too_short": "must not be empty",
}


def format_errors(exc: ValidationError, model: type[BaseModel]) -> list[str]:
    """One ``path: message`` line per pydantic error, in the order pydantic found them."""
    lines: list[str] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        kind = err["type"]
        if kind == "extra_forbidden":
            allowed = _allowed_fields(model, loc)
            msg = "unknown field" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        elif kind == "literal_error":
            msg = f"must be one of {err['ctx']['expected']}"
        elif kind in ("value_error", "assertion_error"):
            msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        else:
            msg = _MESSAGES.get(kind, str(err["msg"]))
        line = f"{field_path(*loc)}: {msg}"
        if line not in lines:
            lines.append(line)
    return lines


def validate(model: type[BaseModel], data: Any) -> Any:
    """``model.model_validate(data)``; raises :class:`SpecError` with formatted lines."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_errors(exc, model)) from None
    except RecursionError:
        raise SpecError(["(top level): nested too deeply"]) from None
