"""What each declared release prints and how it is read: a shape the client does not know is
refused, and the daemon then writes nothing to its ledger (a running job is never closed
because a field failed to parse).

The client's ``_run`` is replaced by a function returning text shaped like what a release
prints: formatted records, and the recorded ``squeue --json`` of 22.05 (openapi/v0.0.38,
tests/data/sample-squeue.json) and 24.11 (data_parser/v0.0.42,
tests/data/capture-24.11.5-squeue-v0.0.42.json). The captures of each release are read in
tests/slurm_plugin/slurm/test_slurm_captures.py; the live shapes in tests/live/test_client_live.py.
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
from slurm_plugin.slurm import shapes as slurm_shapes
from slurm_plugin.slurm.client import SlurmClient, SlurmRefused, SlurmShapeUnknown
from slurm_plugin.slurm.records import (SINFO_FIELDS, SQUEUE_FIELDS, ShapeError, job_from_fields,
                                  time_limit_seconds)
from slurm_plugin.slurm.shapes import RELEASES, jobs_from_json, state_word

DATA = Path(__file__).parents[2] / "data"


class CannedClient(SlurmClient):
    """A SlurmClient whose commands answer from ``answer(argv)`` (stands in for a release the
    live cluster does not run)."""

    def __init__(self, answer: Callable[[Sequence[str]], str]) -> None:
        super().__init__()
        self.answer = answer

    def _run(self, argv: Sequence[str], input_text: str | None = None,  # type: ignore[override]
             env: dict[str, str] | None = None) -> str:
        return self.answer(argv)


V22, V24 = RELEASES[(22, 5)], RELEASES[(24, 11)]


def _formatted(argv: Sequence[str], records: list[dict[str, str]]) -> str:
    """What squeue/sinfo --Format prints for ``records``, with the separators ``argv`` asked for."""
    fmt = argv[-1].split("=", 1)[1]
    keys = [k for k, _ in (SQUEUE_FIELDS if argv[0] == "squeue" else SINFO_FIELDS)]
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


def _node(**kw: str) -> dict[str, str]:
    rec = {"name": "node1", "address": "node1", "state": "idle", "partition": "gpu*",
           "cpus": "16", "sockets": "2", "cores": "8", "memory": "64000",
           "gres": "gpu:a100:8(S:0-1)", "gres_used": "gpu:a100:0(IDX:N/A)"}
    rec.update(kw)
    return rec


def _answer(version: str, records: list[dict[str, str]], nodes: list[dict[str, str]],
            json_text: str = "") -> Callable[[Sequence[str]], str]:
    def answer(argv: Sequence[str]) -> str:
        if argv[:2] == ["squeue", "--version"]:
            return version + "\n"
        if argv[0] == "squeue" and argv[1].startswith("--json"):
            return json_text
        return _formatted(argv, records if argv[0] == "squeue" else nodes)
    return answer


def test_formatted_record_parses_free_text_with_separators_literally() -> None:
    rec = _record(name="a|b,c\nd\x1fe", comment="x;y")
    job = job_from_fields(rec)
    assert (job.job_id, job.state, job.gpus, job.start_time, job.end_time) == (10, "RUNNING", 8, 100, None)
    assert job.name == "a|b,c\nd\x1fe" and job.comment == "x;y" and job.array_job_id is None
    answer = _answer("slurm-wlm 22.05.8", [rec, _record(job_id="11", name="plain")], [])
    jobs = CannedClient(answer).jobs()
    assert [(j.job_id, j.name) for j in jobs] == [(10, "a|b,c\nd\x1fe"), (11, "plain")]


@pytest.mark.parametrize("tres", ["gres:shard:2", "gres/shard:2", "gres/shard:a100:2"])
def test_a_shard_jobs_shards_per_node_in_every_releases_formatted_read(tres: str) -> None:
    # 22.05 writes gres:shard:2, 24.11 and 26.05 gres/shard:2 (seen live): 2 shards, no GPU
    job = job_from_fields(_record(tres_per_node=tres))
    assert (job.shards_per_node, job.gpus, job.gpus_per_node) == (2, 0, 0)


@pytest.mark.parametrize("field,value", [
    ("state", "RUNNING,COMPLETING"), ("state", ""), ("state", "['RUNNING']"),
    ("start_time", "2026-11-30T10:00:00"), ("restart_count", "{'number': 1}"),
    ("time_limit", "forever"), ("job_id", "N/A"), ("time_used", "12 minutes")])
def test_a_field_that_does_not_parse_refuses_the_whole_read(field: str, value: str) -> None:
    with pytest.raises(ShapeError, match=field):
        job_from_fields(_record(**{field: value}))
    answer = _answer("slurm 22.05.8", [_record(job_id="9"), _record(**{field: value})], [])
    with pytest.raises(SlurmShapeUnknown, match=field):
        CannedClient(answer).jobs()


def test_time_used_in_squeue_forms() -> None:
    # squeue(1) TimeUsed: days and hours only as needed; INVALID when Slurm finds it negative
    assert [job_from_fields(_record(time_used=t)).time_used_s
            for t in ("0:00", "4:05", "1:02:03", "3-00:00:07", "INVALID", "N/A")] \
        == [0, 245, 3723, 259207, None, None]


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


def _read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_json_of_another_data_parser_is_refused_naming_both() -> None:
    squeue22, squeue24 = _read("sample-squeue.json"), _read("capture-24.11.5-squeue-v0.0.42.json")
    assert [j.job_id for j in jobs_from_json(squeue22, V22)] == [13, 15]
    with pytest.raises(ShapeError, match=r"'openapi/v0\.0\.38' \(Slurm 22\.05\.8\), "
                                         r"expected 'data_parser/v0\.0\.42' for Slurm 24\.11"):
        jobs_from_json(squeue22, V24)
    with pytest.raises(ShapeError, match=r"'data_parser/v0\.0\.42' \(Slurm 24\.11\.5\), "
                                         r"expected 'openapi/v0\.0\.38' for Slurm 22\.05"):
        jobs_from_json(squeue24, V22)
    client = CannedClient(_answer("slurm 24.11.5", [], [], squeue22.decode()))
    with pytest.raises(SlurmShapeUnknown, match="openapi/v0.0.38"):
        client.jobs(detail=True)
    client = CannedClient(_answer("slurm 24.11.5", [], [], squeue24.decode()))
    assert [j.job_id for j in client.jobs(detail=True, states={"PENDING"})] == [5]


def _edited(name: str, job: int, **fields: object) -> bytes:
    data = json.loads(_read(name))
    data["jobs"][job].update(fields)
    return json.dumps(data).encode()


@pytest.mark.parametrize(("name", "release", "fields", "path"), [
    ("sample-squeue.json", V22, {"job_state": ["RUNNING"]}, r"\$\.jobs\[0\]\.job_state"),
    ("sample-squeue.json", V22, {"start_time": "1795949343"}, r"\$\.jobs\[0\]\.start_time"),
    ("capture-24.11.5-squeue-v0.0.42.json", V24, {"job_state": "RUNNING"},
     r"\$\.jobs\[1\]\.job_state"),
    ("capture-24.11.5-squeue-v0.0.42.json", V24, {"time_limit": 10},
     r"\$\.jobs\[1\]\.time_limit"),
    ("capture-24.11.5-squeue-v0.0.42.json", V24, {"priority": {"set": True, "number": 5}},
     r"infinite.*\$\.jobs\[1\]\.priority"),
], ids=["22-state-list", "22-time-text", "24-state-word", "24-plain-number", "24-noval-part"])
def test_a_json_field_of_another_shape_is_refused_with_its_path(
        name: str, release: slurm_shapes.Release, fields: dict, path: str) -> None:
    job = 0 if release is V22 else 1
    with pytest.raises(ShapeError, match=path):
        jobs_from_json(_edited(name, job, **fields), release)
    del_field = json.loads(_read(name))
    del del_field["jobs"][job][next(iter(fields))]
    if release is V24:      # v0.0.42's fields are all required; 22.05's have its unset values
        with pytest.raises(ShapeError, match="missing required field"):
            jobs_from_json(json.dumps(del_field).encode(), release)


@pytest.mark.parametrize(("words", "word"), [
    (["RUNNING"], "RUNNING"), (["PENDING", "REQUEUED"], "REQUEUED"),
    (["RUNNING", "COMPLETING"], "COMPLETING"), (["COMPLETED", "STAGE_OUT", "COMPLETING"], "COMPLETING"),
    (["RUNNING", "CONFIGURING"], "CONFIGURING"), (["PENDING", "REQUEUE_HOLD"], "REQUEUE_HOLD"),
    (["RUNNING", "REQUEUED", "RESIZING"], "RESIZING"), (["RUNNING", "SIGNALING"], "SIGNALING"),
    (["FAILED", "LAUNCH_FAILED"], "FAILED"), (["PENDING", "POWER_UP_NODE"], "PENDING"),
    ("TIMEOUT", "TIMEOUT"),
    # JOB_EXPEDITING (flag bit 24 of the data parser's JOB_STATE from 25.11 on): no word of its own
    (["RUNNING", "COMPLETING", "EXPEDITING"], "COMPLETING"), (["PENDING", "EXPEDITING"], "PENDING")])
def test_a_state_list_reads_as_the_word_squeue_prints(words: list[str] | str, word: str) -> None:
    assert state_word(words, "job 1") == word


@pytest.mark.parametrize("words", [["RUNNING", "EXPEDITING_X"], [], ["Running"], "RUNNING,X",
                                   ["EXPEDITING"], "EXPEDITING"])
def test_an_unknown_state_word_is_refused_naming_the_job(words: list[str] | str) -> None:
    with pytest.raises(ShapeError, match="job 7"):
        state_word(words, "job 7")
    data = _edited("capture-24.11.5-squeue-v0.0.42.json", 2,
                   job_state=words if isinstance(words, list) else [words])
    with pytest.raises(ShapeError, match=r"squeue --json: job 3: "):
        jobs_from_json(data, V24)


def test_numbers_unset_or_infinite() -> None:
    noval = {"set": False, "infinite": False, "number": 0}
    infinite = {"set": False, "infinite": True, "number": 0}
    data = _edited("capture-24.11.5-squeue-v0.0.42.json", 3, priority=noval, time_limit=noval,
                   node_count=noval, het_job_id=infinite, start_time=noval)
    job = jobs_from_json(data, V24)[3]
    assert (job.job_id, job.priority, job.time_limit_s, job.node_count, job.het_job_id,
            job.start_time) == (4, 0, None, 1, None, None)
    assert job.end_time == 1796281529                  # a limit of 10 min: squeue prints it
    job = jobs_from_json(_edited("sample-squeue.json", 0, time_limit=None), V22)[0]
    assert (job.time_limit_s, job.end_time) == (None, None)   # unlimited and running: NONE
    job = jobs_from_json(_edited("sample-squeue.json", 0, time_limit=0xFFFF_FFFE), V22)[0]
    assert (job.time_limit_s, job.end_time) == (None, 1795949943)   # NO_VAL: not set


def test_errors_of_a_json_answer_are_slurms_refusal() -> None:
    data = json.loads(_read("capture-24.11.5-squeue-v0.0.42.json"))
    data["errors"] = [{"description": "", "error_number": 1, "error": "Access denied",
                       "source": "slurm_load_jobs"}]
    client = CannedClient(_answer("slurm 24.11.5", [], [], json.dumps(data)))
    client.ping = lambda: True   # type: ignore[method-assign]
    with pytest.raises(SlurmRefused, match="slurm_load_jobs: Access denied"):
        client.jobs(detail=True)
    for text, error in (("not json", SlurmRefused), ("[]", SlurmShapeUnknown)):
        client = CannedClient(_answer("slurm 24.11.5", [], [], text))
        with pytest.raises(error):
            client.jobs(detail=True)


def test_daemon_writes_nothing_and_closes_no_run_on_an_unknown_shape(tmp_path: Path) -> None:
    running = _record(job_id="10", start_time="100")
    state = {"records": [running], "nodes": [_node()]}

    def answer(argv: Sequence[str]) -> str:
        if argv[:2] == ["squeue", "--version"]:
            return "slurm 22.05.8\n"
        if argv[0] in ("squeue", "sinfo"):
            return _formatted(argv, state["records" if argv[0] == "squeue" else "nodes"])
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
        for bad in ({"records": [_record(job_id="10", state="['RUNNING']")], "nodes": [_node()]},
                    {"records": [running], "nodes": [_node(cpus="{'number': 16}")]}):
            state.update(bad)
            with pytest.raises(SlurmShapeUnknown):
                daemon.cycle()
            assert (ledger.conn.execute("SELECT * FROM jobs").fetchall(), ledger.all_runs()) == before
        assert ledger.job(10) is not None and ledger.job(10).ended_at is None


def test_an_unchanged_record_reuses_its_job_and_a_changed_one_is_parsed_again() -> None:
    """The formatted read parses only records that differ from the previous read (same field
    values: the same frozen Job); a changed field gives a new Job with it."""
    records = [_record(job_id="10"), _record(job_id="11", state="PENDING", start_time="0",
                                            nodes="", priority="7")]
    client = CannedClient(_answer("slurm 22.05.8", records, []))
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


@pytest.mark.parametrize("version,parser,flag,verified", [
    ((22, 5, 8), "v0.0.38", "--json", "live"),
    ((24, 11, 5), "v0.0.42", "--json=v0.0.42", "live"),
    ((26, 5, 5), "v0.0.42", "--json=v0.0.42", "live"),
    ((25, 5, 0), "v0.0.42", "--json=v0.0.42", "schema"),
    ((25, 11, 3), "v0.0.42", "--json=v0.0.42", "schema"),
])
def test_releases_read_and_their_parser(version: tuple[int, int, int], parser: str, flag: str,
                                        verified: str) -> None:
    found = slurm_shapes.release(version)
    assert (found.version, found.parser, found.json_flag, found.verified) == (version[:2], parser, flag, verified)


@pytest.mark.parametrize("version,why", [
    ((23, 2, 7), "its JSON is data parser v0.0.39 only"),
    ((23, 11, 10), "its JSON is data parser v0.0.39/v0.0.40, neither declared here"),
    ((24, 5, 1), "its JSON is data parser v0.0.40/v0.0.41, neither declared here"),
    ((21, 8, 8), "its output shapes are not declared here"),
])
def test_other_releases_are_refused_in_one_line_naming_release_and_reason(
        version: tuple[int, int, int], why: str) -> None:
    with pytest.raises(ShapeError) as exc:
        slurm_shapes.release(version)
    name = f"{version[0]}.{version[1]:02d}.{version[2]}"
    assert str(exc.value) == (f"Slurm {name} is not a release this version of tiresias-slurm reads ({why}; "
                              "reads: 22.05, 24.11, 25.05, 25.11, 26.05); nothing was changed")


@pytest.mark.parametrize(("fields", "used"), [
    ({"job_state": "PENDING", "start_time": 0}, 0),
    ({"job_state": "RUNNING", "start_time": 1000}, 500),                       # now 1500
    ({"job_state": "SUSPENDED", "start_time": 1000, "pre_sus_time": 120,
      "suspend_time": 1200}, 120),                                             # frozen at 120
    ({"job_state": "RUNNING", "start_time": 1000, "pre_sus_time": 120,
      "suspend_time": 1400}, 220),                                             # 120 + 1500 - 1400
    ({"job_state": "COMPLETED", "start_time": 1000, "end_time": 1300}, 300),
    ({"job_state": "COMPLETED", "start_time": 1000, "end_time": 1300, "pre_sus_time": 50,
      "suspend_time": 1250}, 100),                                             # 50 + 1300 - 1250
    ({"job_state": "RUNNING", "start_time": 2000}, None),                      # negative: INVALID
    # 22.05 names a running job by its flag; the end is then the time limit's projection
    ({"job_state": "CONFIGURING", "start_time": 1000, "end_time": 9000}, 500),
    ({"job_state": "STOPPED", "start_time": 1000, "end_time": 9000}, 500),
    # ... and a pending one by its flag: a requeued job keeps its last run's start and end
    ({"job_state": "REQUEUED", "start_time": 1000, "end_time": 1200}, 0),
    ({"job_state": "REQUEUE_HOLD", "start_time": 1000, "end_time": 1200}, 0),
    ({"job_state": "SPECIAL_EXIT", "start_time": 1000, "end_time": 1200}, 0),
    ({"job_state": "REQUEUED", "start_time": 2000}, 0),                         # a projection
], ids=["pending", "running", "suspended", "resumed", "ended", "ended-resumed", "negative",
        "configuring-22.05", "stopped-22.05", "requeued-22.05", "requeue-hold-22.05",
        "special-exit-22.05", "requeued-projected-22.05"])
def test_json_time_used_is_squeues_time_used(fields: dict, used: int | None) -> None:
    # squeue's job_time_used() (src/squeue/print.c) from the same fields, worked out by hand
    record = slurm_shapes.msgspec.convert({"job_id": 7, **fields}, slurm_shapes.SqueueJob38)
    assert slurm_shapes.job_from_record(record, now=1500).time_used_s == used
