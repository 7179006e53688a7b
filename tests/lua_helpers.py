"""Run slurm_plugin/job_submit.lua outside slurmctld: Lua 5.1 (lupa), as Slurm 22.05 embeds it.

:func:`load` executes the script with a stand-in ``slurm`` table whose constants have
Slurm 22.05's values (slurm.h: ``NO_VAL`` 0xfffffffe, ``NO_VAL16`` 0xfffe, ``INFINITE``
0xffffffff) and whose ``log_user``/``log_info`` record their messages (formatted with
``string.format`` as slurm_lua.c does). Job descriptions are plain Lua tables holding only the
fields a request sets: unset numbers are ``NO_VAL``/``NO_VAL16`` as in a real job_desc.
``load(release="23.02")`` adds what 23.02 and later register beside 22.05's eight ESLURM_*
names (every Slurm error code; the script reads one, ESLURM_INVALID_PARTITION_NAME, to know
that slurm.log_user works in slurm_job_modify).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lupa.lua51 as lua51

SCRIPT = Path(__file__).resolve().parents[1] / "slurm_plugin" / "job_submit.lua"
NO_VAL, NO_VAL16, INFINITE = 0xFFFFFFFE, 0xFFFE, 0xFFFFFFFF
CODES = {"SUCCESS": 0, "ERROR": -1, "FAILURE": -1, "ESLURM_ACCESS_DENIED": 2002,
         "ESLURM_INVALID_TIME_LIMIT": 2051, "ESLURM_MISSING_TIME_LIMIT": 2103}
CODES_SINCE_23_02 = {"ESLURM_INVALID_PARTITION_NAME": 2000}


@dataclass
class Plugin:
    """A loaded script: call :meth:`submit` / :meth:`modify`; messages land in the lists."""

    rt: Any
    user_msgs: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def _table(self, d: dict[str, Any]) -> Any:
        return self.rt.table_from({k: v for k, v in d.items() if v is not None})

    def desc(self, **fields: Any) -> Any:
        base = {"requeue": NO_VAL16, "priority": NO_VAL, "site_factor": NO_VAL, "nice": NO_VAL,
                "time_limit": NO_VAL, "user_name": "alice"}
        base.update(fields)
        return self._table(base)

    def submit(self, desc: Any, uid: int = 1000, partitions: dict[str, bool] | None = None) -> int:
        parts = partitions or {"gpu": True}
        plist = self.rt.table_from({n: self._table({"name": n, "flag_default": 1 if d else 0})
                                    for n, d in parts.items()})
        return int(self.rt.globals().slurm_job_submit(desc, plist, uid))

    def modify(self, desc: Any, rec: dict[str, Any], uid: int = 1000) -> int:
        return int(self.rt.globals().slurm_job_modify(desc, self._table(rec), self.rt.table_from({}), uid))

    @property
    def internals(self) -> Any:
        return self.rt.globals().dl_job_submit_internals


def load(site: dict[str, str] | None = None, release: str = "22.05") -> Plugin:
    """Execute the script as slurmctld of ``release`` ("22.05" or "23.02": what later releases
    share) would; ``site`` replaces settings (``{"require_time_limit": "true"}``: Lua source
    text of the value) by editing the SITE block as an admin would."""
    text = SCRIPT.read_text()
    for key, value in (site or {}).items():
        lines = text.splitlines()
        idx = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"{key} ="))
        indent = lines[idx][: len(lines[idx]) - len(lines[idx].lstrip())]
        lines[idx] = f"{indent}{key} = {value},"
        text = "\n".join(lines) + "\n"
    rt = lua51.LuaRuntime(unpack_returned_tuples=True)
    plugin = Plugin(rt)
    g = rt.globals()
    fmt = rt.eval("function(...) return string.format(...) end")
    codes = CODES if release == "22.05" else {**CODES, **CODES_SINCE_23_02}
    slurm = rt.table_from({**codes, "NO_VAL": NO_VAL, "NO_VAL16": NO_VAL16, "INFINITE": INFINITE})
    slurm.log_user = lambda *a: plugin.user_msgs.append(fmt(*a))
    slurm.log_info = lambda *a: plugin.log.append(fmt(*a))
    g.slurm = slurm
    assert rt.execute(text) == 0
    return plugin
