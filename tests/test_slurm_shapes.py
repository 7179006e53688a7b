"""Other Slurm releases (issue 14, item 8): a shape the client does not know is refused, and the
daemon then writes nothing to its ledger (a running job is never closed because a field failed
to parse).

A live cluster here runs only Slurm 22.05, so another release's answers are canned: the client's
``_run`` is replaced by a function returning text shaped like what that release prints (the
numbers-as-objects and state lists of the later data parsers). The 22.05 shapes themselves are
checked live in tests/test_client_live.py and tests/test_client_formats_live.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon
from slurm_plugin import slurm_shapes
from slurm_plugin.client import SlurmClient, SlurmShapeUnknown
from slurm_plugin.records import SQUEUE_FIELDS, ShapeError, job_from_fields, time_limit_seconds

DATA = Path(__file__).parent / "data"


class CannedClient(SlurmClient):
    """A SlurmClient whose commands answer from ``answer(argv)`` (stands in for a release the
    live cluster does not run)."""

    def __init__(self, answer: Callable[[Sequence[str]], str]) -> None:
        super().__init__()
        self.answer = answer

    def _run(self, argv: Sequence[str], input_text: str | None = None,  # type: ignore[override]
             env: dict[str, str] | None = None) -> str:
        return self.answer(argv)


def _formatted(argv: Sequence[str], records: list[dict[str, str]]) -> str:
    """What squeue --Format prints for ``records``, with the separators ``argv`` asked for."""
    fmt = argv[-1].split("=", 1)[1]
    keys = [k for k, _ in SQUEUE_FIELDS]
    suffixes = [part.split(":0", 1)[1] for part in fmt.split(",")]
    return "".join("".join(rec[k] + s for k, s in zip(keys, suffixes)) + "\n" for rec in records)


def _record(**kw: str) -> dict[str, str]:
    rec = {k: "N/A" for k, _ in SQUEUE_FIELDS}
    rec.update(job_id="10", array_job_id="10", state="RUNNING", reason="None", user="bob",
               partition="gpu", tres_per_node="gres:gpu:8", node_count="1", nodes="node1",
               submit_time="90", start_time="100", end_time="NONE", eligible_time="90",
               time_limit="UNLIMITED", restart_count="0", requeue="1", priority="5",
               name="train", comment="(null)")
    rec.update(kw)
    return rec


def _answer(version: str, records: list[dict[str, str]], sinfo: dict) -> Callable[[Sequence[str]], str]:
    def answer(argv: Sequence[str]) -> str:
        if argv[:2] == ["squeue", "--version"]:
            return version + "\n"
        if argv[0] == "squeue":
            return _formatted(argv, records)
        return json.dumps(sinfo)
    return answer


def test_formatted_record_parses_free_text_with_separators_literally() -> None:
    rec = _record(name="a|b,c\nd\x1fe", comment="x;y")
    job = job_from_fields(rec)
    assert (job.job_id, job.state, job.gpus, job.start_time, job.end_time) == (10, "RUNNING", 8, 100, None)
    assert job.name == "a|b,c\nd\x1fe" and job.comment == "x;y" and job.array_job_id is None
    answer = _answer("slurm-wlm 22.05.8", [rec, _record(job_id="11", name="plain")], {})
    jobs = CannedClient(answer).jobs()
    assert [(j.job_id, j.name) for j in jobs] == [(10, "a|b,c\nd\x1fe"), (11, "plain")]


@pytest.mark.parametrize("field,value", [
    ("state", "RUNNING,COMPLETING"), ("state", ""), ("state", "['RUNNING']"),
    ("start_time", "2026-11-30T10:00:00"), ("restart_count", "{'number': 1}"),
    ("time_limit", "forever"), ("job_id", "N/A")])
def test_a_field_that_does_not_parse_refuses_the_whole_read(field: str, value: str) -> None:
    with pytest.raises(ShapeError, match=field):
        job_from_fields(_record(**{field: value}))
    answer = _answer("slurm 22.05.8", [_record(job_id="9"), _record(**{field: value})], {})
    with pytest.raises(SlurmShapeUnknown, match=field):
        CannedClient(answer).jobs()


def test_time_limits_in_squeue_forms() -> None:
    assert [time_limit_seconds(t) for t in ("1:30:00", "5:00", "2-00:00:01", "UNLIMITED", "NOT_SET")] \
        == [5400, 300, 172801, None, None]


def test_unknown_release_is_refused_before_any_job_is_read() -> None:
    calls: list[list[str]] = []

    def answer(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        return "slurm 24.05.1\n"
    with pytest.raises(SlurmShapeUnknown, match=r"Slurm 24\.05\.1 is not a release"):
        CannedClient(answer).jobs()
    assert calls == [["squeue", "--version"]]
    with pytest.raises(SlurmShapeUnknown, match="cannot read a Slurm version"):
        CannedClient(lambda argv: "squeue (unknown)\n").jobs()


def _later_parser_sinfo() -> dict:
    """sinfo --json as later data parsers print it: numbers as set/infinite/number objects,
    the node state as a list, another plugin type in meta."""
    sample = json.loads((DATA / "sample-sinfo.json").read_text())
    sample["meta"]["plugin"] = {"type": "openapi/v0.0.40", "name": "Slurm OpenAPI v0.0.40"}
    sample["meta"]["Slurm"]["release"] = "23.11.4"
    for n in sample["nodes"]:
        n["state"] = [n["state"].upper()]
        n["cpus"] = {"set": True, "infinite": False, "number": n["cpus"]}
    return sample


def test_sinfo_of_another_data_parser_is_refused_and_22_05_is_read() -> None:
    good = json.loads((DATA / "sample-sinfo.json").read_text())
    assert good["meta"]["plugin"]["type"] == "openapi/v0.0.38"
    nodes = CannedClient(lambda argv: json.dumps(good)).nodes()
    assert nodes and all(n.gpus_total > 0 for n in nodes)
    with pytest.raises(SlurmShapeUnknown, match=r"openapi/v0\.0\.40.*23\.11\.4"):
        CannedClient(lambda argv: json.dumps(_later_parser_sinfo())).nodes()
    same_plugin_other_types = json.loads(json.dumps(good))
    same_plugin_other_types["nodes"][0]["state"] = ["IDLE"]
    with pytest.raises(SlurmShapeUnknown, match="state"):
        CannedClient(lambda argv: json.dumps(same_plugin_other_types)).nodes()


def test_squeue_json_job_state_list_is_refused() -> None:
    sample = json.loads((DATA / "sample-squeue.json").read_text())
    slurm_shapes.check_jobs(sample)          # the 22.05 capture parses
    sample["jobs"][0]["job_state"] = ["RUNNING"]
    with pytest.raises(ShapeError, match="job_state"):
        slurm_shapes.check_jobs(sample)


def test_daemon_writes_nothing_and_closes_no_run_on_an_unknown_shape(tmp_path: Path) -> None:
    sinfo = json.loads((DATA / "sample-sinfo.json").read_text())
    running = _record(job_id="10", start_time="100")
    state = {"records": [running], "sinfo": sinfo}

    def answer(argv: Sequence[str]) -> str:
        if argv[:2] == ["squeue", "--version"]:
            return "slurm 22.05.8\n"
        if argv[0] == "squeue":
            return _formatted(argv, state["records"])
        if argv[:2] == ["sinfo", "--json"]:
            return json.dumps(state["sinfo"])
        return ""
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l.sqlite"), snapshot_path=str(tmp_path / "s.json"),
                       metrics_port=0)
    clock = iter([200.0, 230.0, 260.0])
    with Ledger(cfg.ledger_path) as ledger:
        daemon = Daemon(cfg, CannedClient(answer), ledger, CycleAdapter(),
                        clock=lambda: next(clock))
        daemon.cycle()
        assert [(r.start, r.end) for r in ledger.runs(10)] == [(100, None)]
        before = ledger.conn.execute("SELECT * FROM jobs").fetchall(), ledger.all_runs()
        for bad in ({"records": [_record(job_id="10", state="['RUNNING']")], "sinfo": sinfo},
                    {"records": [running], "sinfo": _later_parser_sinfo()}):
            state.update(bad)
            with pytest.raises(SlurmShapeUnknown):
                daemon.cycle()
            assert (ledger.conn.execute("SELECT * FROM jobs").fetchall(), ledger.all_runs()) == before
        assert ledger.job(10) is not None and ledger.job(10).ended_at is None


def test_an_unchanged_record_reuses_its_job_and_a_changed_one_is_parsed_again() -> None:
    """Issue 15: the formatted read parses only records that differ from the previous read
    (same field values: the same frozen Job); a changed field gives a new Job with it."""
    records = [_record(job_id="10"), _record(job_id="11", state="PENDING", start_time="0",
                                            nodes="", priority="7")]
    client = CannedClient(_answer("slurm 22.05.8", records, {}))
    first = client.jobs()
    second = client.jobs()
    assert [a is b for a, b in zip(first, second)] == [True, True]
    records[1]["priority"] = "4000007"
    records.append(_record(job_id="12", name="new"))
    third = client.jobs()
    assert third[0] is first[0] and third[1] is not first[1]
    assert (third[1].job_id, third[1].priority, third[2].job_id, third[2].name) == (11, 4000007, 12, "new")
    records[0]["name"] = "a\x1f"    # a bad record is refused even if its job was known
    records[0]["state"] = "RUNNING,X"
    with pytest.raises(SlurmShapeUnknown, match="state"):
        client.jobs()
