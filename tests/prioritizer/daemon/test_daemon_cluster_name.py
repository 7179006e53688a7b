"""The daemon reads Slurm's configuration once (``scontrol show config`` through the client).
Its snapshot names its cluster as Slurm itself does (``ClusterName``), so a daemon run without
``SLURM_CONF`` on a cluster whose slurm.conf is not at the default path (or a configless
client) still stamps it; the slurm.conf file is only the fallback when Slurm gives no name.
The live form is in tests/live/test_daemon_cluster_name_live.py. With virtual clusters ordered
through the SiteFactor, Slurm's other priority weights earn a warning."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from daemon_unit_helpers import observation
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon
from prioritizer.policy.model import Decisions
from prioritizer.daemon.snapshot import local_cluster_name
from prioritizer.policy.validation import ConfigError


class ConfigClient:
    """A client that answers ``scontrol show config`` only; counts the calls."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf, self.calls = conf, 0

    def show_config(self) -> dict[str, str]:
        self.calls += 1
        return dict(self.conf)


@pytest.mark.parametrize(("conf", "file", "stamped"), [
    ({"ClusterName": "Beta", "PreemptType": "preempt/none"}, None, "beta"),
    ({"ClusterName": "beta"}, "ClusterName=alpha\n", "beta"),    # Slurm's answer wins
    ({"ClusterName": "(null)"}, "ClusterName=alpha\n", "alpha"),  # no name: the file's
    ({}, None, None)])
def test_snapshot_carries_slurms_cluster_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              conf: dict[str, str], file: str | None,
                                              stamped: str | None) -> None:
    if file is None:   # no SLURM_CONF and nothing at the default path's place
        monkeypatch.delenv("SLURM_CONF", raising=False)
        monkeypatch.setattr("prioritizer.daemon.snapshot.DEFAULT_SLURM_CONF",
                            str(tmp_path / "absent.conf"))
    else:
        (tmp_path / "slurm.conf").write_text(file)
        monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l"), snapshot_path=str(tmp_path / "s.json"))
    client = ConfigClient(conf)
    with Ledger(cfg.ledger_path) as ledger:
        d = Daemon(cfg, client, ledger, CycleAdapter())  # type: ignore[arg-type]
        d.read_slurm_config()
        d.publish(Decisions((), {}, (), ()), observation(1000.0))
        d.publish(Decisions((), {}, (), ()), observation(1001.0))
    written = json.loads((tmp_path / "s.json").read_text())
    assert written.get("cluster") == stamped and written["generated_at"] == 1001.0


@pytest.mark.parametrize("conf, included, name", [
    # %c: the ClusterName read so far, lower-cased (parse_config.c _parse_for_format)
    ("ClusterName=Alpha\nInclude nodes-%c.conf\n", {"nodes-alpha.conf": "NodeName=n1\n"},
     "alpha"),
    # a GRES line dlgres --check refuses (typed and untyped gpu) hides nothing here
    ("ClusterName=Beta\nNodeName=n1 Gres=gpu:a100:1,gpu:1\n", {}, "beta"),
    # an Include that cannot be read leaves the file's own lines
    ("Include missing.conf\nClusterName=Gamma\n", {}, "gamma"),
    # the name in an included file
    ("Include common.conf\n", {"common.conf": "ClusterName=Delta\n"}, "delta"),
    ("GresTypes=gpu\n", {}, None),
], ids=["percent-c", "gres-dlgres-refuses", "unreadable-include", "in-include", "none"])
def test_local_cluster_name_reads_the_name_whatever_else_the_file_holds(
        tmp_path: Path, conf: str, included: dict[str, str], name: str | None) -> None:
    (tmp_path / "slurm.conf").write_text(conf)
    for file, text in included.items():
        (tmp_path / file).write_text(text)
    assert local_cluster_name({"SLURM_CONF": str(tmp_path / "slurm.conf")}) == name


def test_a_ledger_keeps_its_cluster_and_refuses_another(tmp_path: Path) -> None:
    """Job ids repeat across clusters: a ledger first written for cluster ``alpha`` is refused
    by a daemon whose Slurm answers as ``beta`` (the one mistake ``dlcluster env`` or a shared
    /etc/dlprio/dlprio.yaml makes easy), before a cycle reads its jobs; ``alpha`` again
    goes on, and a Slurm that gives no name is not checked."""
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l"), snapshot_path=str(tmp_path / "s.json"))
    with Ledger(cfg.ledger_path) as ledger:
        for conf in ({"ClusterName": "Alpha"}, {"ClusterName": "alpha"}, {}):
            Daemon(cfg, ConfigClient(conf), ledger, CycleAdapter()).read_slurm_config()  # type: ignore[arg-type]
        other = Daemon(cfg, ConfigClient({"ClusterName": "beta"}), ledger, CycleAdapter())  # type: ignore[arg-type]
        with pytest.raises(ConfigError) as err:
            other.read_slurm_config()
        assert ledger.meta("cluster") == "alpha"
    assert str(err.value) == (
        f"ledger_path {tmp_path / 'l'}: the ledger of Slurm cluster alpha, but Slurm answers as "
        "cluster beta: give each cluster its own ledger_path (and snapshot_path), or point "
        "SLURM_CONF at alpha")


@pytest.mark.parametrize(("field", "conf", "warned"), [
    ("site_factor", {"PriorityWeightAge": "1000", "PriorityWeightFairShare": "2000",
                     "PriorityWeightTRES": "GRES/gpu=100"}, 3100),
    ("site_factor", {"PriorityWeightAge": "0"}, None),        # no other factor: ranks hold
    ("priority", {"PriorityWeightAge": "1000"}, None)])       # the absolute priority is ours
def test_tenants_ordered_through_the_site_factor_beside_other_weights_warn_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, conf: dict[str, str],
        warned: int | None) -> None:
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l"), snapshot_path=str(tmp_path / "s.json"),
                       priority_field=field,
                       virtual_clusters={"nlp": {"account": "nlp", "guaranteed_gpus": 8}})
    with Ledger(cfg.ledger_path) as ledger, caplog.at_level(logging.WARNING, logger="dlprio"):
        Daemon(cfg, ConfigClient(conf), ledger, CycleAdapter()).read_slurm_config()  # type: ignore[arg-type]
    found = [r.fields for r in caplog.records  # type: ignore[attr-defined]
             if getattr(r, "event", None) == "tenant_order_weak"]
    assert [f["other_weights"] for f in found] == ([] if warned is None else [warned])


@pytest.mark.parametrize(("auth", "policy", "delay"), [
    ("cred_expire=10", {}, 11.0),                         # dlcluster's: 10 + 1
    ("socket=/run/m.sock,cred_expire=600", {}, 601.0),    # among other AuthInfo options
    ("", {}, 121.0),                                      # Slurm's default, 120 + 1
    ("cred_expire=10", {"requeue_delay_s": 300}, 300.0)])  # a site's own value is kept
def test_the_replays_requeue_delay_is_the_clusters(tmp_path: Path, auth: str,
                                                   policy: dict[str, float],
                                                   delay: float) -> None:
    """Slurm sets a requeued job's BeginTime to now + AuthInfo cred_expire + 1 (slurm.conf(5),
    default 120): the policy the daemon's forecasts and auto_tune replay takes that delay
    where dlprio.yaml leaves requeue_delay_s at its default."""
    from prioritizer.policy.config import PolicyConfig
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l"), snapshot_path=str(tmp_path / "s.json"),
                       policy=PolicyConfig(**policy))  # type: ignore[arg-type]
    with Ledger(cfg.ledger_path) as ledger:
        d = Daemon(cfg, ConfigClient({"AuthInfo": auth}), ledger, CycleAdapter())  # type: ignore[arg-type]
        d.read_slurm_config()
    assert d.cfg.policy.requeue_delay_s == delay
    assert d.preemptor.cfg.policy.requeue_delay_s == delay
