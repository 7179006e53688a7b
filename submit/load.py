"""Reading a spec file: bytes -> document -> validated job model.

A file is JSON when its name ends in ``.json``/``.jsonc`` (or, for other names, when its first
non-blank character is ``{``), otherwise YAML. Real OpenPAI v1 files carry ``//`` line comments
(e.g. microsoft/pai examples/mpi/cntk-mpi.json), so JSON is read after blanking ``//`` and ``/* */``
comments outside strings (columns stay where they were). Syntax errors are reported as
``FILE:LINE:COLUMN: ...`` (1-based). The document is v2 when it has ``protocolVersion``,
v1 when it has ``jobName`` or a ``taskRoles`` list.

Escaped surrogates: JSON's ``\\ud83d\\ude80`` is one character (RFC 8259 section 7) and
``json`` decodes it so, but PyYAML leaves the two halves apart; :func:`to_job` joins every valid
pair into its character and refuses a lone half with the field path (UTF-8 cannot encode it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from prioritizer.yamlfile import duplicate_lines, syntax_message
from slurm_plugin.cli_util import visible
from submit import yamlsafe
from submit.errors import SpecError, field_path
from submit.validation import SPEC_SYNTAX

if TYPE_CHECKING:
    from submit.model import Job


def strip_json_comments(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments outside strings replaced by spaces
    (newlines kept, so line and column numbers of what remains do not move)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _is_json(name: str, text: str) -> bool:
    low = name.lower()
    if low.endswith((".json", ".jsonc")):
        return True
    if low.endswith((".yaml", ".yml")):
        return False
    return strip_json_comments(text).lstrip().startswith("{")


def parse_text(text: str, name: str = "<spec>") -> Any:
    """Parse spec text (JSON with comments, or YAML) into plain Python data.

    Raises :class:`SpecError` with ``name:line:column`` for syntax errors.
    """
    if _is_json(name, text):
        try:
            return yamlsafe.load_json(strip_json_comments(text))
        except yamlsafe.DuplicateKeys as exc:
            raise SpecError(duplicate_lines(name, exc)) from None
        except yamlsafe.TooLarge as exc:
            raise SpecError([f"{name}: {exc}"]) from None
        except json.JSONDecodeError as exc:
            raise SpecError([f"{name}:{exc.lineno}:{exc.colno}: JSON syntax error: {exc.msg}"]) from None
        except RecursionError:
            raise SpecError([f"{name}: JSON nested too deeply"]) from None
    try:
        return yamlsafe.load_yaml(text)
    except yamlsafe.DuplicateKeys as exc:
        raise SpecError(duplicate_lines(name, exc)) from None
    except yamlsafe.TooLarge as exc:
        raise SpecError([f"{name}: {exc}"]) from None
    except yaml.MarkedYAMLError as exc:
        hint = ""
        if "{{" in text:
            hint = " (the file holds {{...}} template placeholders: fill them in first)"
        raise SpecError([syntax_message(name, exc) + hint]) from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise SpecError([f"{name}: YAML error: {exc}"]) from None


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
    not a regular file, over :data:`submit.readfile.MAX_SPEC_BYTES`, not UTF-8)."""
    from submit.readfile import MAX_SPEC_BYTES, read_limited

    p = Path(path)
    raw, _ = read_limited(p, "", MAX_SPEC_BYTES)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError([f"{visible(p)}:{line}: not UTF-8 text (byte {exc.start})"]) from None
    doc = parse_text(text, visible(p))
    syntax = SPEC_SYNTAX.set("JSON" if _is_json(visible(p), text) else "YAML")
    try:
        return to_job(doc, overrides)
    finally:
        SPEC_SYNTAX.reset(syntax)
