"""Property tests (hypothesis) for spec validation and rendering.

Generated v1 and v2 specs, valid and broken (wrong types, missing fields, huge numbers, odd
unicode with lone and paired UTF-16 surrogates, deep nesting, unknown keys): loading and
rendering never raises anything but :class:`SpecError`; every error line starts with a field
path rooted in the document (or ``(top level)``); every accepted spec renders a script that
``bash -n`` accepts, whose ``#SBATCH`` block the sbatch-parser emulation reads, with the job name
in its documented sanitised form.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from submit import load, spec_v1, spec_v2
from submit.options import RenderOptions
from submit.quoting import slurm_name
from submit.render import render_sbatch
from submit.validation import SpecError
from submit_helpers import bash_syntax_ok, option, sbatch_directives

# Any code point, surrogates included: lone halves and escaped pairs as PyYAML leaves them
# ("\ud83d\ude80", which the loader must join into one character, RFC 8259 section 7).
TEXT = st.lists(st.characters() | st.just("\ud83d\ude80"), max_size=30).map("".join)
IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=20,
)


@st.composite
def v2_role(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "instances": draw(st.integers(1, 20)),
        "resourcePerInstance": {"cpu": draw(st.integers(1, 16)), "memoryMB": draw(st.integers(1, 64000)),
                                "gpu": draw(st.integers(0, 8)),
                                "ports": draw(st.dictionaries(IDENT, st.integers(0, 3), max_size=2))},
        "completion": {"minFailedInstances": draw(st.sampled_from([-1, 1, 2])),
                       "minSucceededInstances": draw(st.sampled_from([-1, 1]))},
        "commands": draw(st.lists(TEXT, min_size=1, max_size=3)),
    }


@st.composite
def v2_spec(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "protocolVersion": draw(st.sampled_from([2, "2"])), "name": draw(TEXT.filter(str.strip)),
        "type": "job", "jobRetryCount": draw(st.integers(0, 5)),
        "parameters": draw(st.dictionaries(IDENT, TEXT | st.integers(), max_size=2)),
        "taskRoles": draw(st.dictionaries(TEXT.filter(str.strip), v2_role(), min_size=1, max_size=3)),
        "extras": {"gangAllocation": draw(st.booleans()),
                   "placement": draw(st.sampled_from(["consolidate", "spread"]))},
    }


@st.composite
def v1_spec(draw: st.DrawFn) -> dict[str, Any]:
    roles = [{"name": draw(TEXT.filter(str.strip)), "taskNumber": draw(st.integers(1, 4)),
              "cpuNumber": draw(st.integers(1, 16)), "memoryMB": draw(st.integers(1, 64000)),
              "gpuNumber": draw(st.integers(0, 8)), "command": draw(TEXT)}
             for _ in range(draw(st.integers(1, 3)))]
    return {"jobName": draw(TEXT.filter(str.strip)), "image": "img", "retryCount": draw(st.integers(-2, 3)),
            "jobEnvs": draw(st.dictionaries(IDENT, TEXT | st.integers(), max_size=2)), "taskRoles": roles}


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def broken(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(draw(v2_spec() | v1_spec()))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(JUNK)
        if draw(st.booleans()):
            doc[draw(TEXT)] = draw(JUNK)
    return doc


TOP_FIELDS = {f.encode_name for m in (spec_v1.JobV1, spec_v2.JobV2) for f in msgspec.structs.fields(m)} | {"(top level)"}
_FIRST = re.compile(r'^(?:\[("(?:[^"\\]|\\.)*")\]|([^.\[ :]*))')


def check(doc: dict[str, Any]) -> None:
    try:
        job = load.to_job(doc)
        script = render_sbatch(job, RenderOptions())
    except SpecError as exc:
        assert exc.problems
        for line in exc.problems:
            assert ": " in line, line
            m = _FIRST.match(line)
            assert m, line
            first = json.loads(m.group(1)) if m.group(1) else m.group(2)
            keys = set(doc) | {load.join_surrogates(k) for k in doc if isinstance(k, str)}
            assert first in TOP_FIELDS or first in keys or line.startswith("(top level)"), line
        return
    script.encode("utf-8")  # every surrogate was joined or refused
    ok, err = bash_syntax_ok(script)
    assert ok, err
    comps = sbatch_directives(script)
    assert option(comps[0], "job-name") == [slurm_name(job.name)]
    assert len(comps) == (len(job.roles) if job.gang else 1)


@given(v2_spec() | v1_spec())
def test_generated_specs_render_or_fail_with_paths(doc: dict[str, Any]) -> None:
    check(doc)


@given(broken())
def test_broken_specs_fail_with_paths(doc: dict[str, Any]) -> None:
    check(doc)
