"""Reading a spec file: bytes -> document -> validated job model.

The file is read and parsed (JSON with comments, or YAML) by :mod:`submit.files`, syntax
errors reported as ``FILE:LINE:COLUMN: ...`` (1-based). The document is v2 when it has ``protocolVersion``,
v1 when it has ``jobName`` or a ``taskRoles`` list.

Escaped surrogates: JSON's ``\\ud83d\\ude80`` is one character (RFC 8259 section 7) and
``json`` decodes it so, but PyYAML leaves the two halves apart; :func:`to_job` joins every valid
pair into its character and refuses a lone half with the field path (UTF-8 cannot encode it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurm_plugin.common.cli import visible
from submit.errors import SpecError, field_path
from submit.files import MAX_SPEC_BYTES, is_json, parse_text, read_limited, strip_json_comments
from slurm_plugin.common.yamlfile import SourceText
from submit.validation import SPEC_SOURCE, SPEC_SYNTAX

if TYPE_CHECKING:
    from submit.model import Job

__all__ = ["join_surrogates", "load", "parse_text", "strip_json_comments", "to_job"]


def join_surrogates(text: str) -> str:
    """``text`` with each high+low surrogate pair joined into its character (UTF-16 rule);
    lone surrogates are left in place (see :func:`lone_surrogates`)."""
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _has_lone(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _visible_path(*parts: Any) -> str:
    """:func:`field_path` with lone surrogates written as ``\\udXXX`` so the line can be printed."""
    return field_path(*parts).encode("utf-8", "backslashreplace").decode("utf-8")


def _fix_text(doc: Any, path: tuple[Any, ...], problems: list[str]) -> Any:
    """Join surrogate pairs in every string (keys too); note lone ones in ``problems``."""
    if isinstance(doc, str):
        fixed = join_surrogates(doc)
        if _has_lone(fixed):
            problems.append(f"{_visible_path(*path)}: holds a lone UTF-16 surrogate (an unpaired "
                            "\\ud800-\\udfff escape), which is not a character: remove it or "
                            "write the whole pair")
        return fixed
    if isinstance(doc, list):
        return [_fix_text(v, (*path, i), problems) for i, v in enumerate(doc)]
    if isinstance(doc, dict):
        out: dict[Any, Any] = {}
        for k, v in doc.items():
            key = _fix_text(k, (*path, k, "[key]"), problems) if isinstance(k, str) else k
            out[key] = _fix_text(v, (*path, k), problems)
        return out
    return doc


def to_job(doc: Any, overrides: dict[str, str] | None = None) -> Job:
    """Dispatch a parsed document to the v1 or v2 model. Raises :class:`SpecError` (a lone
    surrogate anywhere included; valid pairs are joined first, see the module doc; a document
    nested deeper than Python's recursion limit allows, anywhere, even under a key nobody reads:
    ``(top level): nested too deeply``)."""
    try:
        return _to_job(doc, overrides)
    except RecursionError:
        raise SpecError(["(top level): nested too deeply"]) from None


def _to_job(doc: Any, overrides: dict[str, str] | None) -> Job:
    problems: list[str] = []
    doc = _fix_text(doc, (), problems)
    if problems:
        raise SpecError(problems)
    if not isinstance(doc, dict):
        raise SpecError(["(top level): must be a mapping (a v2 YAML job or a v1 JSON job)"])
    if "protocolVersion" in doc:
        from submit import spec_v2

        return spec_v2.to_job(doc, overrides)
    if "jobName" in doc or isinstance(doc.get("taskRoles"), list):
        from submit import spec_v1

        return spec_v1.to_job(doc, overrides)
    raise SpecError(["protocolVersion: required field is missing (v2 YAML needs "
                     "'protocolVersion: 2'; a v1 JSON job needs jobName and a taskRoles list)"])


def load(path: str | Path, overrides: dict[str, str] | None = None) -> Job:
    """Read, parse and validate a spec file. Raises :class:`SpecError` (file problems included:
    not a regular file, over :data:`submit.files.MAX_SPEC_BYTES`, not UTF-8)."""
    p = Path(path)
    raw, _ = read_limited(p, "", MAX_SPEC_BYTES)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError([f"{visible(p)}:{line}: not UTF-8 text (byte {exc.start})"]) from None
    doc = parse_text(text, visible(p))
    json_spec = is_json(visible(p), text)
    syntax = SPEC_SYNTAX.set("JSON" if json_spec else "YAML")
    source = SPEC_SOURCE.set(None if json_spec else SourceText(text))
    try:
        return to_job(doc, overrides)
    finally:
        SPEC_SOURCE.reset(source)
        SPEC_SYNTAX.reset(syntax)
