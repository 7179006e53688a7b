"""docs/design.md's table of policy rules names, for each rule, where the code writes it
(``module:name``, ``name`` maybe ``Class.method``); each named place exists: the module imports
and the name is found in it. A renamed function fails here until the table follows."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"
LOCATION = re.compile(r"`([a-z_][a-z0-9_.]*):([A-Za-z_][A-Za-z0-9_.]*)`")


def rule_locations(text: str) -> dict[str, list[tuple[str, str]]]:
    """Rule name -> its (module, name) places, from the "Policy rules and their sources" table:
    the last cell of each row (a formula cell may hold ``|`` itself)."""
    section = text.split("\n## Policy rules and their sources\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and
            not line.startswith("| rule |")]
    out = {}
    for row in rows:
        rule = row.split("|")[1].strip()
        last = row.rstrip().rstrip("|").rsplit("|", 1)[1]
        out[rule] = LOCATION.findall(last)
    return out


LOCATIONS = rule_locations(DESIGN.read_text())


def test_every_rule_names_its_code() -> None:
    assert list(LOCATIONS) == [
        "2D attained service", "discretised queues (MLFQ)", "default thresholds",
        "starvation promotion", "promoted jobs and preemption", "2D-Gittins",
        "consolidated placement", "preemption", "wait guard", "requeue guard", "gain rule",
        "partitions", "who starts jobs", "baselines"]
    assert {rule for rule, places in LOCATIONS.items() if not places} == set()
    assert ("prioritizer.policy.preemption", "find_preemptions") in LOCATIONS["preemption"]


@pytest.mark.parametrize(("module", "name"),
                         sorted({p for places in LOCATIONS.values() for p in places}))
def test_named_location_exists(module: str, name: str) -> None:
    obj: object = importlib.import_module(module)
    for part in name.split("."):
        assert hasattr(obj, part), f"{module}:{name}: no {part!r} in {obj!r}"
        obj = getattr(obj, part)


def test_a_missing_name_is_found() -> None:
    # the check can fail: a row naming a function that does not exist
    text = ("\n## Policy rules and their sources\n| rule | what | source | code |\n|---|---|---|---|\n"
            "| gone | x | y | `prioritizer.policy.decide:no_such_rule` |\n")
    [(module, name)] = rule_locations(text)["gone"]
    assert not hasattr(importlib.import_module(module), name)
