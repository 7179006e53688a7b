"""job_submit.lua's rules, run in Lua 5.1 (lupa) with a stand-in ``slurm`` table (tests/lua_helpers.py).

The marker grammar is checked against slurm_plugin/marker.py itself (hypothesis): the Lua and
Python readers must agree on every comment. The live behaviour in slurmctld is in
tests/live/test_lua_live.py.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from slurm_plugin import marker
from lua_helpers import CODES, INFINITE, load

GPU = "gres:gpu:4"


def _fresh():
    return load()


# --- the marker: Lua agrees with marker.py ------------------------------------------------

def _lua_verdict(p, comment: str):
    got = p.internals.parse_marker(comment)
    if isinstance(got, tuple):
        return "error"
    if got is None:
        return None
    sig = got.signal[3:] if got.signal.startswith("SIG") else got.signal
    return (sig, int(got.grace), got["class"])


def _py_verdict(comment: str):
    try:
        c = marker.parse(comment)
    except marker.MarkerError:
        return "error"
    return None if c is None else (c.signal, c.grace_s, c.job_class)


_P = load()
_pieces = st.sampled_from(["dl:v1;", "dl:v1", "dl:v2;", "DL:v1;", "x dl:v1;", ""])
_sig = st.sampled_from(["USR1", "USR2", "SIGUSR2", "TERM", "INT", "HUP", "URG", "KILL", "usr2", "", "9"])
_grace = st.one_of(st.integers(min_value=-5, max_value=90000).map(str), st.sampled_from(["", "060", "1e3", "99999999999"]))
_tail = st.sampled_from(["", " note", "\n", ";x", "x", "  two", " dl:v1;", ";class=opportunistic",
                         ";class=production", ";class=opportunistic note", ";class=bogus",
                         ";class=", ";class=opportunisticx", ";class=production\n"])


@given(_pieces, _sig, _grace, _tail)
@example("dl:v1;", "USR2", "60", "\n")  # Python's `$` also matches before a final newline
@example("dl:v1;", "SIGUSR2", "60", "")
@example("dl:v1;", "USR2", "0", "")
@example("dl:v1;", "USR2", "86401", " x")
@example("dl:v1;", "USR2", "86400", ";x")
def test_lua_marker_reader_agrees_with_marker_py(prefix: str, sig: str, grace: str, tail: str):
    comment = f"{prefix}signal={sig};grace={grace}{tail}"
    assert _lua_verdict(_P, comment) == _py_verdict(comment)


@given(st.text(max_size=40))
def test_lua_marker_reader_agrees_on_any_text(text: str):
    for comment in (text, "dl:v1;" + text, "dl:v1;signal=USR2;grace=60" + text):
        assert _lua_verdict(_P, comment) == _py_verdict(comment)


@pytest.mark.parametrize(
    "comment, expected",
    [
        ("dl:v1;signal=USR2;grace=60", "dl:v1;signal=USR2;grace=60"),
        ("dl:v1;signal=USR2;grace=300", "dl:v1;signal=USR2;grace=300"),
        ("dl:v1;signal=USR2;grace=301", "dl:v1;signal=USR2;grace=300"),
        ("dl:v1;signal=SIGUSR1;grace=86400 keep this", "dl:v1;signal=SIGUSR1;grace=300 keep this"),
        ("plain words", "plain words"),
    ],
    ids=["under", "at-max", "over", "sig-prefix-and-text", "no-marker"],
)
def test_grace_is_capped_at_the_site_maximum_300(comment: str, expected: str):
    p = _fresh()
    d = p.desc(tres_per_node=GPU, comment=comment)
    assert p.submit(d) == CODES["SUCCESS"]
    assert d.comment == expected


def test_malformed_marker_is_refused_with_the_grammar_in_the_message():
    p = _fresh()
    rc = p.submit(p.desc(tres_per_node=GPU, comment="dl:v1;signal=USR2;grace=soon"))
    assert rc == CODES["ERROR"]
    assert p.user_msgs == [
        "refused: malformed checkpoint marker: comment \"dl:v1;signal=USR2;grace=soon\": "
        "expected 'dl:v1;signal=<SIG>;grace=<seconds>[;class=opportunistic]'"
    ]
    p = _fresh()
    assert p.submit(p.desc(tres_per_node=GPU, comment="dl:v1;signal=KILL;grace=5")) == CODES["ERROR"]
    assert "signal 'KILL': must be one of USR1, USR2, TERM, INT, HUP, URG" in p.user_msgs[0]


# --- requeue, daemon-owned fields, time limit ---------------------------------------------

@pytest.mark.parametrize("tres_field", ["tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket"])
def test_unset_requeue_becomes_1_for_every_way_to_ask_for_gpus(tres_field: str):
    p = _fresh()
    d = p.desc(**{tres_field: "gres:gpu:a100:2"})
    assert p.submit(d) == 0 and d.requeue == 1


def test_cpu_jobs_and_unmanaged_partitions_are_left_alone():
    p = _fresh()
    cpu = p.desc(tres_per_node="gres:gpumem:4", requeue=0)
    assert p.submit(cpu) == 0 and cpu.requeue == 0
    other = p.desc(tres_per_node=GPU, requeue=0, partition="debug")
    assert p.submit(other) == 0
    # no partition named: the default partition (here "debug") decides
    dflt = p.desc(tres_per_node=GPU, requeue=0)
    assert p.submit(dflt, partitions={"debug": True, "gpu": False}) == 0
    assert p.submit(p.desc(tres_per_node=GPU, requeue=0), partitions={"debug": False, "gpu": True}) == CODES["ESLURM_ACCESS_DENIED"]


def test_no_requeue_refused_unless_exempt():
    p = _fresh()
    assert p.submit(p.desc(tres_per_node=GPU, requeue=0, partition="q1")) == CODES["ESLURM_ACCESS_DENIED"]
    assert "--no-requeue" in p.user_msgs[0] and "exempt" in p.user_msgs[0]
    p = load({"exempt_users": "{ alice = true }"})
    d = p.desc(tres_per_node=GPU, requeue=0)
    assert p.submit(d) == 0 and d.requeue == 0
    p = load({"exempt_accounts": "{ interactive = true }"})
    assert p.submit(p.desc(tres_per_node=GPU, requeue=0, account="interactive")) == 0
    assert p.submit(p.desc(tres_per_node=GPU, requeue=0, account="research")) == CODES["ESLURM_ACCESS_DENIED"]


@pytest.mark.parametrize(
    "fields, name",
    [({"site_factor": 5}, "SiteFactor"), ({"priority": 100}, "priority"), ({"priority": INFINITE}, "priority"),
     ({"admin_comment": "x"}, "admin_comment")],
    ids=["sitefactor", "priority", "priority-top", "admin-comment"],
)
def test_daemon_owned_fields_refused_at_submit(fields: dict, name: str):
    p = _fresh()
    assert p.submit(p.desc(tres_per_node=GPU, **fields)) == CODES["ESLURM_ACCESS_DENIED"]
    assert p.user_msgs == [f"refused: {name} is set by the dlprio scheduler, not at submission (nice is yours)"]


def test_nice_and_hold_are_the_users():
    p = _fresh()
    assert p.submit(p.desc(tres_per_node=GPU, nice=10 + 0x80000000)) == 0
    assert p.submit(p.desc(tres_per_node=GPU, priority=0)) == 0  # sbatch -H


def test_root_and_slurm_user_pass_untouched():
    p = _fresh()
    d = p.desc(tres_per_node=GPU, requeue=0, site_factor=7, comment="dl:v1;signal=USR2;grace=5000")
    assert p.submit(d, uid=0) == 0
    assert d.requeue == 0 and d.comment == "dl:v1;signal=USR2;grace=5000"
    assert 0 in p.internals.PRIVILEGED


def test_time_limit_is_optional_site_setting():
    p = _fresh()
    assert p.submit(p.desc(tres_per_node=GPU)) == 0
    p = load({"require_time_limit": "true"})
    assert p.submit(p.desc(tres_per_node=GPU)) == CODES["ESLURM_MISSING_TIME_LIMIT"]
    assert p.user_msgs == ["refused: GPU jobs need a time limit here: add --time (e.g. --time=24:00:00)"]
    assert p.submit(p.desc(tres_per_node=GPU, time_limit=60)) == 0
    assert p.submit(p.desc(time_limit=None)) == 0  # CPU job


# --- updates (scontrol update) ------------------------------------------------------------

REC = {"job_id": 42, "partition": "gpu", "user_id": 0, "tres_per_node": GPU}  # 22.05 records: no user_name


@pytest.mark.parametrize(
    "fields, rc",
    [
        ({"nice": 10}, 0),
        ({"priority": 0}, 0),  # scontrol hold
        ({"priority": INFINITE}, 0),  # scontrol release
        ({"priority": 5}, CODES["ESLURM_ACCESS_DENIED"]),
        ({"site_factor": 1}, CODES["ESLURM_ACCESS_DENIED"]),
        ({"admin_comment": "x"}, CODES["ESLURM_ACCESS_DENIED"]),
        ({"requeue": 0}, CODES["ESLURM_ACCESS_DENIED"]),
        ({"partition": "q0"}, CODES["ESLURM_ACCESS_DENIED"]),
        ({"comment": "dl:v1;signal=USR2"}, CODES["ERROR"]),
    ],
    ids=["nice", "hold", "release", "priority", "sitefactor", "admin-comment", "no-requeue", "to-queue-partition", "bad-marker"],
)
def test_user_updates(fields: dict, rc: int):
    p = _fresh()
    assert p.modify(p.desc(**fields), REC) == rc
    if rc:
        assert p.log[-1].startswith("dl job_submit: refused update of job 42")


def test_update_caps_grace_and_root_updates_pass():
    p = _fresh()
    d = p.desc(comment="dl:v1;signal=USR2;grace=9000")
    assert p.modify(d, REC) == 0 and d.comment == "dl:v1;signal=USR2;grace=300"
    for fields in ({"site_factor": 100000}, {"priority": 5}, {"admin_comment": "dlprio q1"}, {"partition": "q1"}):
        assert p.modify(p.desc(**fields), {**REC, "partition": "q0"}, uid=0) == 0


def test_requeue_update_exemptions_and_cpu_jobs():
    p = load({"exempt_users": "{ root = true }"})  # uid 0 in /etc/passwd stands for the job's owner here
    assert p.modify(p.desc(requeue=0), {**REC, "user_id": 0}) == 0
    p = _fresh()
    assert p.modify(p.desc(requeue=0), {**REC, "tres_per_node": None, "tres_per_job": "gres:gpu:1"}) == CODES["ESLURM_ACCESS_DENIED"]
    assert p.modify(p.desc(requeue=0), {**REC, "tres_per_node": None}) == 0  # a CPU job


def test_updates_outside_managed_partitions_pass():
    p = _fresh()
    assert p.modify(p.desc(priority=5), {**REC, "partition": "debug"}) == 0


def test_lua_grace_cap_matches_the_daemons_default():
    import yaml
    from pathlib import Path

    conf = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf" / "dlprio.yaml").read_text())
    assert _P.internals.SITE.max_grace_s == conf["max_grace_s"]


def test_privileged_users_resolved_from_passwd(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0::/root:/bin/bash\nslurm:x:64030:64030::/nonexistent:/usr/sbin/nologin\n"
                      "dlprio:x:990:990::/var/lib/dlprio:/usr/sbin/nologin\n")
    p = load({"passwd_file": f'"{passwd}"', "privileged_users": '{ "slurm", "dlprio" }'})
    d = p.desc(tres_per_node=GPU, site_factor=5)
    assert p.submit(d, uid=64030) == 0 and p.submit(d, uid=990) == 0
    assert p.submit(d, uid=1000) == CODES["ESLURM_ACCESS_DENIED"]
    assert p.modify(p.desc(priority=5), REC, uid=990) == 0


# --- counting GPUs in every form Slurm 22.05 passes -------------------------
# The strings are what slurmctld 22.05 stores and hands to job_submit/lua for each sbatch option
# (read back with `scontrol show job` on the live cluster: TresPerNode/TresPerJob/TresPerSocket/
# TresPerTask); counts follow slurm.conf(5) Gres=: count 1 when left out, K/M/G/T/P = 1024^n.
GPU_FORMS = [
    ("tres_per_node", "gres:gpu:2", 2),            # --gres=gpu:2, --gpus-per-node=2
    ("tres_per_node", "gres:gpu:a100:2", 2),       # --gres=gpu:a100:2
    ("tres_per_node", "gres:gpu", 1),              # --gres=gpu
    ("tres_per_node", "gres:gpu:a100", 1),         # --gres=gpu:a100
    ("tres_per_node", "gres:gpu:0", 0),            # --gres=gpu:0
    ("tres_per_node", "gres:gpu:a100:0", 0),       # --gres=gpu:a100:0, --gpus-per-node=a100:0
    ("tres_per_node", "gres:gpu:1k", 1024),        # --gres=gpu:1k
    ("tres_per_node", "gres:gpu:2,gres:mps:100", 2),
    ("tres_per_node", "gres:mps:100", 0),
    ("tres_per_node", "gres:gpumem:4", 0),         # a GRES whose name starts with gpu
    ("tres_per_job", "gres:gpu:3", 3),             # --gpus=3
    ("tres_per_job", "gres:gpu:a100:3", 3),        # --gpus=a100:3
    ("tres_per_job", "gres:gpu:0", 0),             # --gpus=0
    ("tres_per_socket", "gres:gpu:1", 1),          # --gpus-per-socket=1
    ("tres_per_task", "gres:gpu:1", 1),            # --gpus-per-task=1
    ("tres_per_node", "gres/gpu=4", 4),            # TRES form of later Slurm versions
    ("tres_per_node", "gres/gpu:a100=4", 4),
    ("tres_per_node", "gres/gpu=0", 0),
    ("tres_per_node", "gpu:2", 2),                 # without the gres: prefix
    ("tres_per_node", "gpu:a100:2(S:0-1)", 2),     # with a socket binding as scontrol prints it
]


@pytest.mark.parametrize("tres_field, value, gpus", GPU_FORMS, ids=[f"{f}={v}" for f, v, _ in GPU_FORMS])
def test_gpu_count_of_every_form(tres_field: str, value: str, gpus: int):
    assert _P.internals.gpu_count(value) == gpus
    p = _fresh()
    d = p.desc(**{tres_field: value}, requeue=0)
    rc = p.submit(d)
    if gpus:  # a GPU job: --no-requeue refused
        assert rc == CODES["ESLURM_ACCESS_DENIED"] and "--no-requeue" in p.user_msgs[0]
    else:  # not a GPU job: left alone, requeue stays as asked
        assert rc == 0 and d.requeue == 0 and p.user_msgs == []


def test_gpu_count_adds_every_field():
    assert _P.internals.gpu_count("gres:gpu:2", "gres:gpu:a100:1", None, "") == 3
