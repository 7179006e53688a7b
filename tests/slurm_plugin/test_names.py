"""The one Slurm name rule (slurm_plugin/names.py) that dlsubmit and dlgres share."""

from __future__ import annotations

import pytest

from slurm_plugin.gres.generate import type_problem
from slurm_plugin.names import SLURM_NAME_RE
from submit.options import SLURM_NAME_RE as DLSUBMIT_RULE


@pytest.mark.parametrize("name", ["gpu", "a100", "A100-80GB", "h100_nvl", "v1.2", "_x", "9"])
def test_slurm_names_pass(name: str) -> None:
    assert SLURM_NAME_RE.match(name) and type_problem(name) is None


@pytest.mark.parametrize("name", ["", "-x", "gpu\n", "gpu\nx", "a b", "a=b", "a,b", "a:b", "#a",
                                  "$(id)a100", "a'b", 'a"b', "gpu\t", "ä100"])
def test_everything_else_fails_both_tools_alike(name: str) -> None:
    assert SLURM_NAME_RE.match(name) is None
    assert type_problem(name) == ("not a gres Type: letters, digits, '_', '.' and '-' (not first), "
                                  "as dlsubmit requests it")


def test_dlsubmit_reads_the_same_rule() -> None:
    assert DLSUBMIT_RULE is SLURM_NAME_RE


def test_param_and_secret_names_end_at_the_name_not_before_a_newline() -> None:
    from submit.errors import SpecError
    from submit.params import parse_overrides
    with pytest.raises(SpecError, match="--param 'lr\\\\n=0.1': expected NAME=VALUE"):
        parse_overrides(["lr\n=0.1"])
    assert parse_overrides(["lr=0.1\n"]) == {"lr": "0.1\n"}   # a value may hold anything
