"""The one reader of dlprio's YAML files (daemon config, ``--config``, tune's grid file,
``--log-config``): a syntax error becomes one line ``FILE:LINE:COL: YAML syntax error: <problem>``
(line and column 1-based, from PyYAML's problem mark, else its context mark).
:func:`syntax_message` is also how dlsubmit reports a job spec's syntax error (submit/load.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlFileError(ValueError):
    """The file cannot be read or is not YAML; the message is one line naming the file."""


def syntax_message(name: str, exc: yaml.YAMLError) -> str:
    """``NAME:LINE:COL: YAML syntax error: <context> <problem>`` for a PyYAML error."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        return f"{where}: YAML syntax error: {what}"
    return f"{name}: YAML syntax error: {' '.join(str(exc).split())}"


def read_yaml(path: str | Path) -> Any:
    """Parse the YAML file at ``path`` (``yaml.safe_load``; an empty file is None).

    Raises:
        YamlFileError: ``PATH: cannot read (<reason>)`` or ``PATH:LINE:COL: YAML syntax
            error: <problem>``.
    """
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise YamlFileError(f"{path}: cannot read ({reason})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise YamlFileError(syntax_message(str(path), exc)) from None
    except RecursionError:
        raise YamlFileError(f"{path}: YAML syntax error: nested too deeply") from None
