"""Shared helpers for the dlsubmit tests (test_spec*, test_render*, test_dlsubmit*, test_submit*).

* :data:`PAI_DIR`: the real OpenPAI specs of the corpus (tests/corpus.py; ``corpus`` tests only).
* :data:`HOSTILE`: the hostile strings every layer must carry (docs/design.md, code rule 6).
* :func:`sbatch_directives`: the ``#SBATCH`` block as sbatch 22.05 reads it, re-implemented
  from src/sbatch/opt.c (``_opt_batch_script`` / ``_get_argument``): parsing stops at the first
  executable line; a directive line containing ``hetjob``/``packjob`` (any case) starts a new
  component; a value ends at an unquoted blank or ``#``; quotes are dropped and ``\\`` escapes the
  next character even inside quotes. The live tests check the same scripts with real sbatch.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import corpus
from hostile import HOSTILE as _SHARED_HOSTILE

REPO = Path(__file__).resolve().parents[1]

DEFAULT_SHAPE_NOTE = ("dlsubmit: note: packed for 8 GPUs, 16 cores, 64000 MiB per node (the "
                      "defaults; --cluster-shape reads the partition's nodes from Slurm)\n")
"""stderr of a ``--dry-run`` that packs for the default node shape (submit/node_shape.py)."""
PAI_DIR = corpus.PAI_JOBS
GOLDEN_DIR = REPO / "tests" / "golden"

HOSTILE = [
    *_SHARED_HOSTILE,
    "back\\slash \\n \\\\ end\\",
    "name # not a comment",
    "het hetjob PackJob",
    "*glob? [x] ~tilde {a,b} !bang %percent",
    "  spaces  around  ",
]
"""The project's hostile strings (tests/hostile.py) plus sbatch-specific ones (``#``, a trailing
backslash, the ``hetjob`` separator word)."""


def _argument(line: str) -> tuple[str | None, int]:
    i, n = 0, len(line)
    while i < n and line[i] in " \t\r\v\f":
        i += 1
    if i >= n:
        return None, n
    arg: list[str] = []
    quoted, q, escape = False, "", False
    while i < n and (quoted or line[i] not in " \t\r\v\f") and line[i] != "\n":
        c = line[i]
        if escape:
            escape = False
        elif c == "\\":
            escape = True
            i += 1
            continue
        elif quoted:
            if c == q:
                quoted = False
                i += 1
                continue
        elif c in "\"'":
            quoted, q = True, c
            i += 1
            continue
        elif c == "#":
            break
        arg.append(c)
        i += 1
    if quoted:
        raise ValueError(f"sbatch: unmatched {q} in {line!r}")
    return ("".join(arg) if arg else None), (n if i >= n or line[i] == "#" else i)


def sbatch_directives(script: str) -> list[list[str]]:
    """The ``#SBATCH`` arguments of each hetjob component, as sbatch would pass them to getopt."""
    comps: list[list[str]] = [[]]
    for line in script.split("\n")[1:]:
        if not line.startswith("#SBATCH"):
            stripped = line.lstrip()
            if stripped and not stripped.startswith("#"):
                break
            continue
        if re.search("hetjob|packjob", line, re.IGNORECASE):
            comps.append([])
            continue
        rest = line[len("#SBATCH"):]
        while True:
            arg, used = _argument(rest)
            if arg is None:
                break
            comps[-1].append(arg)
            rest = rest[used:]
            if not rest:
                break
    return comps


def option(args: list[str], name: str) -> list[str]:
    """Values of ``--name=value`` arguments in one component."""
    return [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]


def bash_syntax_ok(script: str) -> tuple[bool, str]:
    """``bash -n`` on the script text: (ok, stderr)."""
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    return proc.returncode == 0, proc.stderr


def v2_spec(name: str = "t", roles: dict | None = None, **top: object) -> dict:
    """A small valid v2 spec (one CPU role running ``true``) with overrides."""
    spec: dict = {
        "protocolVersion": 2, "name": name, "type": "job",
        "taskRoles": roles or {"main": {"instances": 1, "resourcePerInstance":
                                         {"cpu": 1, "memoryMB": 100, "gpu": 0},
                                         "commands": ["true"]}},
    }
    spec.update(top)
    return spec


#: The checkpoint contract directives of a default spec (USR2, 60 s grace).
CONTRACT = ["--requeue", "--open-mode=append", "--signal=B:USR2@60",
            "--comment=dl:v1;signal=USR2;grace=60"]


def res(nodes: int, ntasks: int, per_node: int, cpus: int, mpc: int, gres: str | None) -> list[str]:
    """The resource directives dlsubmit writes for one component (``mpc``: MiB per CPU)."""
    out = [f"--nodes={nodes}", f"--ntasks={ntasks}", f"--ntasks-per-node={per_node}",
           f"--cpus-per-task={cpus}", f"--mem-per-cpu={mpc}M"]
    return out + ([f"--gres={gres}"] if gres else [])
