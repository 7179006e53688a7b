"""conf/slurm.conf.d on a stock dlcluster config: slurmctld starts and reports the values.

For each dlprio mode the snippets are included into a copy of the live cluster's slurm.conf
(tests/conf_helpers.py) and a throw-away slurmctld is started on it; ``scontrol show config``
and ``scontrol show partition`` must show what the snippets say (values as Slurm 22.05 prints
them: ``PriorityMaxAge=7-0`` → ``7-00:00:00``, ``PriorityCalcPeriod=1`` → ``00:01:00``).
Checked without Slurm: tests/repo/test_conf_snippets.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conf_helpers import COMMON, MODES, controller
from live_helpers import slurm_conf, wait_for

from slurm_plugin.slurm.client import SlurmClient
from slurm_plugin.hostlist import expand

EXPECTED = {
    "PriorityType": "priority/multifactor",
    "PriorityWeightAge": "1000",
    "PriorityWeightFairShare": "1000",
    "PriorityWeightPartition": "1000",
    "PriorityWeightJobSize": "0",
    "PriorityWeightQOS": "0",
    "PriorityMaxAge": "7-00:00:00",
    "PriorityCalcPeriod": "00:01:00",
    "PreemptType": "preempt/none",
    "PreemptMode": "OFF",
    "SlurmctldParameters": "preempt_send_user_signal",
    "JobRequeue": "1",
    "JobSubmitPlugins": "lua",
}


@pytest.mark.releases
@pytest.mark.live
@pytest.mark.parametrize("mode", sorted(MODES))
def test_slurmctld_starts_with_the_snippets(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            slurm_release: tuple[int, int]):
    stock = slurm_conf()
    with controller(stock, [*COMMON, MODES[mode]], tmp_path) as conf:
        monkeypatch.setenv("SLURM_CONF", str(conf))
        client = SlurmClient(timeout_s=10)
        wait_for(client.ping, 60, f"the snippet slurmctld on {conf} to answer")
        shown = client.show_config()
        assert Path(shown["SLURM_CONF"]) == conf
        # from 24.11 on, scontrol shows the plugin-less PreemptType=preempt/none as "(null)"
        expected = {**EXPECTED, **({"PreemptType": "(null)"} if slurm_release >= (24, 11) else {})}
        assert {k: shown.get(k) for k in EXPECTED} == expected
        parts = client.show_partitions()
    if mode == "priority":
        assert sorted(parts) == ["gpu"]
        assert parts["gpu"]["Default"] == "YES" and parts["gpu"]["PreemptMode"] == "OFF"
    else:
        assert sorted(parts) == ["q0", "q1", "q2"]
        assert [parts[q]["PriorityTier"] for q in ("q0", "q1", "q2")] == ["30", "20", "10"]
        assert {parts[q]["Nodes"] for q in parts} == {parts["q0"]["Nodes"]}  # the same nodes
        assert all(parts[q]["PreemptMode"] == "OFF" for q in parts)
        assert parts["q0"]["Default"] == "YES"
    # Nodes=ALL: every partition holds exactly the stock config's nodes
    stock_nodes = sorted(n for expr in re.findall(r"^NodeName=(\S+)", stock.read_text(), re.M) for n in expand(expr))
    assert stock_nodes and all(sorted(expand(p["Nodes"])) == stock_nodes for p in parts.values())
