"""The tuning grid: parameter names, their values, and the policy configs they make (pure).

Two spellings, the same grid:

* ``--grid 'thresholds=1000/5000,3250/7200;knob=4,8,16;queues=2,3,4'``: ``;`` between
  parameters, ``,`` between values, ``/`` between the thresholds of one value.
* a YAML file: ``{thresholds: [[1000, 5000], [3250, 7200]], knob: [4, 8, 16], queues: [2, 3]}``.

``promoted_preempts`` takes ``yes``/``no`` (``true``/``false``; YAML booleans).

Parameters (:data:`PARAMETERS`) map to :class:`prioritizer.policy.config.PolicyConfig` fields.
``queues=K`` sets the number of queues: the combination's thresholds are cut to K-1 or, when
there are fewer, extended geometrically (each new threshold = last × last/previous; × 2 from a
single threshold), so every combination is a valid K-queue config. Values out of range
(``queues`` outside 1..8, a non-increasing threshold list, a negative knob), an empty value or
parameter (``knob=4,,8``, ``;;``) and a value given twice are errors naming the parameter and
value (echoed bounded and escaped, :func:`slurm_plugin.common.wording.shown`).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

import yaml

from prioritizer import numbers
from slurm_plugin.common.yamlfile import YamlFileError, key_text, read_yaml
from prioritizer.policy import validation
from slurm_plugin.common.wording import MAX_SHOWN, shown
from prioritizer.policy.config import POLICY_NAMES, PolicyConfig

#: grid name -> PolicyConfig field ("queues" is special: see the module doc)
PARAMETERS = {"thresholds": "thresholds_gpu_s", "knob": "starve_knob", "queues": "",
              "policy": "policy", "min_run": "min_run_s", "quantum": "gittins_quantum_gpu_s",
              "promoted_preempts": "promoted_preempts", "wait_guard": "wait_guard",
              "requeue_guard": "requeue_guard", "preempt_gain": "preempt_gain"}
#: the spellings of a yes/no grid value (``promoted_preempts=yes,no``; YAML's booleans too)
BOOLEANS = {"yes": True, "true": True, "no": False, "false": False}
MAX_QUEUES = 8


class GridError(ValueError):
    """A grid that cannot be used; the message names the parameter and value."""


def parse_grid(text: str) -> dict[str, list[Any]]:
    """``name=v1,v2;name2=...`` into ``{name: [values]}`` (thresholds as tuples); at least
    one parameter (``;`` alone is a GridError, as a grid file without keys is)."""
    grid: dict[str, list[Any]] = {}
    parts = [p.strip() for p in text.split(";")]
    if not any(parts):   # only separators and blanks: a grid of nothing to replay
        raise GridError(f"--grid: {shown(text)} names no parameter; give NAME=V1,V2,... "
                        "joined by ';', e.g. knob=4,8,16")
    for part in parts:
        if not part:
            raise GridError(f"--grid: {shown(text)}: an empty parameter between ';'; remove "
                            "the extra ';'")
        name, sep, values = part.partition("=")
        name = name.strip()
        if not sep or not values.strip():
            raise GridError(f"--grid: {part!r}: expected NAME=V1,V2,...")
        if name in grid:
            raise GridError(f"--grid: {name} given twice; give its values once, e.g. {name}=2,3")
        raw = [v.strip() for v in values.split(",")]
        if not all(raw):
            raise GridError(f"--grid: {shown(part)}: an empty value between ','; remove the "
                            "extra ','")
        grid[name] = [v.split("/") if name == "thresholds" else v for v in raw]
    return check_grid(grid, "--grid")


def load_grid(path: str) -> dict[str, list[Any]]:
    """A YAML grid file (mapping of parameter -> list of values). Two keys of one text
    (``1:`` and ``"1":``) are refused by the reader (:class:`slurm_plugin.common.yamlfile.DuplicateKeyCheck`),
    never merged into one parameter."""
    try:
        data = read_yaml(path)
    except YamlFileError as exc:
        raise GridError(str(exc)) from None
    if not isinstance(data, Mapping) or not data:
        raise GridError(f"{path}: expected a mapping of parameter: [values]")
    grid = {key_text(k): (list(v) if isinstance(v, list) else [v]) for k, v in data.items()}
    return check_grid(grid, path)


#: the largest grid value (GPU·s thresholds, knobs, seconds): as --thresholds' bound
GRID_MAX = 1e12


def _number(name: str, value: Any, where: str) -> float:
    """A plain finite number (``1e3`` yes; ``1_0``, ``0x10``, ``True`` no) of magnitude at most
    :data:`GRID_MAX`. Raises GridError naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or (
            isinstance(value, str) and not numbers.looks_numeric(value)):
        raise GridError(f"{where}: {name}={shown(value)} is not a number")
    if isinstance(value, str) and not numbers.FLOAT_TEXT.match(value.strip()):
        if value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise GridError(f"{where}: {name}={shown(value)} must be finite")
        raise GridError(f"{where}: {name}={shown(value)} is not a number")
    try:
        number = float(value)
    except OverflowError:   # an int too large for a float: a number, out of range
        raise GridError(f"{where}: {name}={shown(value)} out of range: at most {GRID_MAX:g}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise GridError(f"{where}: {name}={shown(value)} must be finite")
    if abs(number) > GRID_MAX:
        raise GridError(f"{where}: {name}={shown(value)} out of range: at most {GRID_MAX:g}")
    return number


def check_grid(grid: Mapping[str, list[Any]], where: str) -> dict[str, list[Any]]:
    """Normalise and range-check every value. Raises :class:`GridError`."""
    out: dict[str, list[Any]] = {}
    for name, values in grid.items():
        if name not in PARAMETERS:
            raise GridError(f"{where}: unknown parameter {shown(name)}; valid: {', '.join(PARAMETERS)}")
        if not values:
            raise GridError(f"{where}: {name} has no values")
        norm: list[Any] = []
        for v in values:
            if name == "thresholds":
                items = v if isinstance(v, (list, tuple)) else [v]
                t = tuple(_number(name, x, where) for x in items)
                if not t or any(x <= 0 for x in t) or any(b <= a for a, b in zip(t, t[1:])):
                    written = "/".join(str(x) for x in items)
                    raise GridError(f"{where}: thresholds="
                                    f"{written if len(written) <= MAX_SHOWN else shown(list(items))}: "
                                    "thresholds must be > 0 and increase strictly")
                norm.append(t)
            elif name == "queues":
                k = _number(name, v, where)
                if k != int(k) or not 1 <= k <= MAX_QUEUES:
                    raise GridError(f"{where}: queues={shown(v)} out of range: a whole number "
                                    f"1..{MAX_QUEUES}")
                norm.append(int(k))
            elif name == "promoted_preempts":
                flag = v if isinstance(v, bool) else BOOLEANS.get(str(v).strip().lower())
                if flag is None:
                    raise GridError(f"{where}: {name}={shown(v)}; give yes or no")
                norm.append(flag)
            elif name == "policy":
                if validation.read_as_not_text(v):   # policy: [no] is the boolean false
                    raise GridError(f"{where}: policy={validation.yaml_reading(v)}; a policy "
                                    f"name, quoted if YAML reads it otherwise; valid: "
                                    f"{', '.join(POLICY_NAMES)}")
                if v not in POLICY_NAMES:
                    raise GridError(f"{where}: policy={shown(v)}; valid: {', '.join(POLICY_NAMES)}")
                norm.append(str(v))
            else:
                x = _number(name, v, where)
                if x < 0 or (name == "quantum" and x == 0):
                    raise GridError(f"{where}: {name}={shown(v)} out of range: must be "
                                    f"{'> 0' if name == 'quantum' else '>= 0'}")
                norm.append(x)
        twice = next((v for i, v in enumerate(norm) if v in norm[:i]), None)
        if twice is not None:   # the same replay twice, one row of the table twice
            raise GridError(f"{where}: {name} lists {label({name: twice})} twice; give each "
                            "value once")
        out[name] = norm
    return out


def extend_thresholds(thresholds: tuple[float, ...], queues: int) -> tuple[float, ...]:
    """Thresholds for ``queues`` queues from ``thresholds`` (see the module doc)."""
    t = list(thresholds[: queues - 1])
    while len(t) < queues - 1:
        ratio = t[-1] / t[-2] if len(t) >= 2 else 2.0
        t.append(t[-1] * ratio)
    return tuple(t)


def combinations(grid: Mapping[str, list[Any]], base: PolicyConfig) -> list[tuple[dict[str, Any], PolicyConfig]]:
    """Every combination as (its grid values, the full config: ``base`` with them applied).

    Raises:
        GridError: a combination PolicyConfig refuses (named with its values).
    """
    names = list(grid)
    out = []
    for values in itertools.product(*(grid[n] for n in names)):
        setting = dict(zip(names, values))
        changes: dict[str, Any] = {PARAMETERS[k]: v for k, v in setting.items() if PARAMETERS[k]}
        if "queues" in setting:
            start = changes.get("thresholds_gpu_s", base.thresholds_gpu_s) or (3600.0,)
            changes["thresholds_gpu_s"] = extend_thresholds(tuple(start), setting["queues"])
        try:
            out.append((setting, validation.replace(base, **changes)))
        except ValueError as exc:
            raise GridError(f"grid combination {label(setting)}: "
                            f"{'; '.join(str(exc).splitlines())}") from None
    return out


def label(setting: Mapping[str, Any]) -> str:
    """``thresholds=3250/7200 knob=8`` for tables."""
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, tuple):
            return "/".join(f"{x:g}" for x in v)
        return f"{v:g}" if isinstance(v, float) else str(v)
    return " ".join(f"{k}={text(v)}" for k, v in setting.items())


def yaml_snippet(config: PolicyConfig) -> str:
    """The whole ``policy:`` section of ``dlprio.yaml`` in force for ``config``: every key of
    :class:`PolicyConfig`, in its order, the tuned ones with their tuned values and the others
    as the current config has them (``--config``, else the defaults). Pasted as the section,
    it changes nothing else the replays were ranked with (``min_run_s``, the guards, the costs)."""
    section: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        section[f.name] = list(v) if isinstance(v, tuple) else v
    return yaml.safe_dump({"policy": section}, sort_keys=False)
