"""job_submit.lua inside the live slurmctld, with a non-root user created by the test.

The user (``dllua`` + the cluster's name) is added with ``useradd`` so that munge vouches for it on this machine;
its commands go through ``SlurmClient(run_as=...)`` (``runuser -u``). Every refusal is shown to be
the plugin's, not slurmctld's own: its text reaches sbatch, or its line naming the job is in
slurmctld's log (22.05 gives slurm_job_modify no way to the user); where slurmctld refuses first
(a plain user's SiteFactor/AdminComment) the test says so. Also checked: the defaults show in ``squeue --json``, users keep nice and
hold/release, and root (the daemon) still sets SiteFactor and AdminComment. The cluster is the
one SLURM_CONF names; it must run the packaged job_submit.lua (``dlcluster up`` installs it).
"""

from __future__ import annotations

import pwd
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from live_helpers import per_cluster_user, slurm_conf, wait_cluster_idle, wait_for

from slurm_plugin.slurm.client import SlurmClient, SlurmRefused

pytestmark = [pytest.mark.live, pytest.mark.releases]

USER = per_cluster_user("dllua")
PREFIX = "dllua-"
SCRIPT = "#!/bin/bash\ntrue\n"
PACKAGED = Path(__file__).resolve().parents[2] / "slurm_plugin" / "job_submit.lua"


@pytest.fixture(scope="module")
def root() -> Iterator[SlurmClient]:
    client = SlurmClient(timeout_s=20)
    installed = slurm_conf().with_name("job_submit.lua")
    assert installed.read_text() == PACKAGED.read_text(), (
        f"{installed} is not the packaged slurm_plugin/job_submit.lua: run `dlcluster up` again"
    )
    yield client
    ids = [j.job_id for j in client.jobs() if j.name.startswith(PREFIX) and j.is_active]
    client.cancel(ids)
    wait_cluster_idle(client, prefix=PREFIX)


@pytest.fixture(scope="module")
def user() -> Iterator[SlurmClient]:
    try:
        pwd.getpwnam(USER)
        created = False
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/bash", USER], check=True)
        created = True
    yield SlurmClient(timeout_s=20, run_as=USER)
    if created:
        subprocess.run(["userdel", USER], check=False)


def _sbatch(client: SlurmClient, name: str, *args: str) -> int:
    return client.submit(SCRIPT, [f"--job-name={PREFIX}{name}", "--chdir=/tmp", "--output=/dev/null", *args])


def _job(client: SlurmClient, job_id: int):
    return wait_for(lambda: next((j for j in client.jobs(job_ids=[job_id]) if j.job_id == job_id), None),
                    30, f"job {job_id} in squeue")


PENDING = ("--begin=now+2hours",)  # stays pending and updatable (held jobs refuse updates)


def test_no_requeue_is_refused_with_the_plugins_message(root: SlurmClient, user: SlurmClient):
    with pytest.raises(SlurmRefused) as e:
        _sbatch(user, "noreq", "--gres=gpu:1", "--no-requeue", *PENDING)
    assert "refused: --no-requeue: GPU jobs here must be requeueable" in e.value.message
    assert "Access/permission denied" in e.value.message


def test_malformed_marker_is_refused(root: SlurmClient, user: SlurmClient):
    with pytest.raises(SlurmRefused) as e:
        _sbatch(user, "badmark", "--gres=gpu:1", "--comment=dl:v1;signal=USR2;grace=soon", *PENDING)
    assert "malformed checkpoint marker" in e.value.message
    assert "expected 'dl:v1;signal=<SIG>;grace=<seconds>[;class=opportunistic]'" in e.value.message


def test_defaults_show_in_squeue_json(root: SlurmClient, user: SlurmClient):
    capped = _job(root, _sbatch(user, "capped", "--gres=gpu:2", "--comment=dl:v1;signal=USR2;grace=5000 ckpt", *PENDING))
    assert capped.user == USER and capped.requeue is True
    assert capped.comment == "dl:v1;signal=USR2;grace=300 ckpt"  # site maximum 300 s
    plain = _job(root, _sbatch(user, "plain", "--gpus=1", *PENDING))
    assert plain.requeue is True and plain.comment == ""  # no marker added: no signal contract invented


def test_user_priority_at_submit_is_dropped_by_slurmctld(root: SlurmClient, user: SlurmClient):
    # slurmctld 22.05 drops a plain user's --priority before job_submit runs (an Operator's reaches
    # the plugin: test_operator_priority_is_refused_by_the_plugin_at_submit_and_update)
    job = _job(root, _sbatch(user, "prio", "--gres=gpu:1", "--priority=5", *PENDING))
    assert job.priority != 5


def _ctld_log() -> Path:
    for line in slurm_conf().read_text().splitlines():
        if line.startswith("SlurmctldLogFile="):
            return Path(line.split("=", 1)[1].strip())
    raise AssertionError(f"no SlurmctldLogFile in {slurm_conf()}")


def _plugin_lines(job_id: int) -> list[str]:
    """The plugin's own slurmctld log lines about updates of this job (slurm.log_info)."""
    return [ln for ln in _ctld_log().read_text(errors="replace").splitlines()
            if f"dl job_submit: refused update of job {job_id}:" in ln]


def _wait_plugin_line(job_id: int, words: str) -> str:
    return wait_for(lambda: next((ln for ln in _plugin_lines(job_id) if words in ln), None), 10,
                    f"the plugin's log line {words!r} for job {job_id}")


def known_uid(uid: int) -> bool:
    """slurmctld's record of the test user carries its real uid (not NO_VAL)."""
    p = subprocess.run(["scontrol", "show", "assoc_mgr", f"users={USER}", "flags=users"],
                       capture_output=True, text=True, timeout=30)
    return f"UserName={USER}({uid})" in p.stdout


def _known_soon(probe: Callable[[], bool], what: str) -> None:
    """Wait until slurmctld shows a sacctmgr change; Slurm 24.11 and 26.05 leave the uid of a user
    record added while slurmctld runs unresolved (uid NO_VAL) until ``scontrol reconfigure``
    makes it look the name up again (seen on 24.11.5 and 26.05.5; 22.05 resolves it at once)."""
    try:
        wait_for(probe, 10, what)
    except AssertionError:
        subprocess.run(["scontrol", "reconfigure"], capture_output=True, text=True, timeout=60)
        wait_for(probe, 30, what + " (after scontrol reconfigure)")


@contextmanager
def _admin_level(level: str) -> Iterator[None]:
    """The test user at sacctmgr AdminLevel ``level`` (Operator/Admin: slurmctld then lets it set
    fields plain users may not), back to None after. Needs slurmdbd (`dlcluster up --with-dbd`,
    as ./test.sh runs it)."""
    def mgr(*args: str) -> None:
        p = subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, f"sacctmgr {' '.join(args)}: {p.stderr or p.stdout} (cluster up --with-dbd?)"

    uid = pwd.getpwnam(USER).pw_uid

    def known(lvl: str) -> bool:
        p = subprocess.run(["scontrol", "show", "assoc_mgr", f"users={USER}", "flags=users"],
                           capture_output=True, text=True, timeout=30)
        return f"UserName={USER}({uid})" in p.stdout and f"AdminLevel={lvl}" in p.stdout

    have = subprocess.run(["sacctmgr", "-n", "-P", "show", "user", USER, "format=user"],
                          capture_output=True, text=True, timeout=30).stdout.split()
    if USER in have and not known_uid(uid):
        # slurmctld resolved the name when no such Unix user existed (uid NO_VAL: a record left
        # by an earlier run, whose Unix user was removed): it never resolves it again, and
        # AdminLevel would not apply. A fresh record is resolved now that the user exists.
        mgr("delete", "user", USER)
        have = []
    mgr(*(["modify", "user", USER, "set"] if USER in have else ["add", "user", USER, "Account=research"]),
        f"AdminLevel={level}")
    _known_soon(lambda: known(level), f"slurmctld to know {USER} as {level}")
    try:
        yield
    finally:
        mgr("modify", "user", USER, "set", "AdminLevel=None")
        _known_soon(lambda: known("None"), f"slurmctld to know {USER} as a plain user")


# Each refusal below is proved to be the plugin's: its own line in slurmctld's log names the job
# (22.05 cannot pass a message to the user from slurm_job_modify), or its own text reaches sbatch.
@pytest.mark.parametrize("field, value, words", [
    ("Priority", 5, "priority is set by the dlprio scheduler"),
    ("Requeue", 0, "requeue=0 (GPU jobs here must be requeueable)"),
    ("Comment", "dl:v1;signal=USR2", "malformed checkpoint marker"),
])
def test_user_updates_refused_by_the_plugin(root: SlurmClient, user: SlurmClient, field: str, value, words: str):
    jid = _sbatch(user, "upd", "--gres=gpu:1", *PENDING)
    with pytest.raises(SlurmRefused):
        user.update([jid], field, value)
    _wait_plugin_line(jid, words)
    job = _job(root, jid)
    assert job.requeue is True and job.comment == "" and job.priority != 5


def test_operator_priority_is_refused_by_the_plugin_at_submit_and_update(root: SlurmClient, user: SlurmClient):
    # slurmctld lets an Operator set --priority (a plain user's is dropped before the plugin, see
    # test_user_priority_at_submit_is_not_taken): only the plugin stands in the way
    with _admin_level("Operator"):
        with pytest.raises(SlurmRefused) as e:
            _sbatch(user, "opprio", "--gres=gpu:1", "--priority=5", *PENDING)
        assert "refused: priority is set by the dlprio scheduler, not at submission" in e.value.message
        jid = _sbatch(user, "opupd", "--gres=gpu:1", *PENDING)
        with pytest.raises(SlurmRefused):
            user.update([jid], "Priority", 5)
        _wait_plugin_line(jid, "priority is set by the dlprio scheduler")


def test_admin_comment_is_refused_by_the_plugin_even_for_an_admin(root: SlurmClient, user: SlurmClient):
    jid = _sbatch(user, "adm", "--gres=gpu:1", *PENDING)
    with _admin_level("Admin"):  # slurmctld allows AdminComment to Admins; the plugin does not
        with pytest.raises(SlurmRefused):
            user.update([jid], "AdminComment", "mine")
        _wait_plugin_line(jid, "admin_comment is set by the dlprio scheduler")
    assert _job(root, jid).admin_comment == ""


def test_plain_users_sitefactor_and_admincomment_are_slurmctlds_own_refusal(root: SlurmClient, user: SlurmClient):
    # slurmctld refuses these to non-operators before job_submit runs: the plugin sees nothing
    jid = _sbatch(user, "own", "--gres=gpu:1", *PENDING)
    for field, value in (("SiteFactor", 9), ("AdminComment", "mine")):
        with pytest.raises(SlurmRefused):
            user.update([jid], field, value)
    assert _plugin_lines(jid) == []
    assert _job(root, jid).admin_comment == ""


def test_an_operators_sitefactor_update_is_not_shown_to_the_plugin(root: SlurmClient, user: SlurmClient):
    # Slurm 22.05 hands slurm_job_modify site_factor = NO_VAL for `scontrol update SiteFactor=`:
    # the plugin cannot refuse it, slurmctld's operator check is the only guard (docs/admins.md)
    jid = _sbatch(user, "opsf", "--gres=gpu:1", *PENDING)
    with _admin_level("Operator"):
        user.update([jid], "SiteFactor", 9)
    assert _plugin_lines(jid) == []


def test_gpu0_job_is_not_a_gpu_job(root: SlurmClient, user: SlurmClient):
    # --gres=gpu:0 asks for no GPU: --no-requeue stays the user's choice
    job = _job(root, _sbatch(user, "gpu0", "--gres=gpu:0", "--no-requeue", *PENDING))
    assert job.requeue is False
    with pytest.raises(SlurmRefused) as e:
        _sbatch(user, "gpu1", "--gres=gpu:1", "--no-requeue", *PENDING)
    assert "refused: --no-requeue" in e.value.message


def test_user_keeps_nice_and_hold_release(root: SlurmClient, user: SlurmClient):
    jid = _sbatch(user, "nice", "--gres=gpu:1", *PENDING)
    before = _job(root, jid).priority
    user.update([jid], "Nice", 10)
    wait_for(lambda: _job(root, jid).priority == before - 10, 30, "priority lowered by nice 10")
    user._run(["scontrol", "hold", str(jid)])
    wait_for(lambda: _job(root, jid).reason == "JobHeldUser", 30, "user hold")
    user._run(["scontrol", "release", str(jid)])
    wait_for(lambda: _job(root, jid).reason != "JobHeldUser", 30, "release")


def test_root_updates_still_work(root: SlurmClient, user: SlurmClient):
    jid = _sbatch(user, "root", "--gres=gpu:1", "--comment=dl:v1;signal=USR2;grace=60", *PENDING)
    before = _job(root, jid).priority
    root.set_site_factor([jid], 100000)
    # multifactor adds SiteFactor to the sum at once (docs/design.md, "Changing state")
    wait_for(lambda: _job(root, jid).priority == before + 100000, 30, "SiteFactor in the priority")
    root.update([jid], "AdminComment", "dlprio:q1")
    assert _job(root, jid).admin_comment == "dlprio:q1"
    root.update([jid], "Comment", "dl:v1;signal=USR2;grace=5000")  # root is not capped
    assert _job(root, jid).comment == "dl:v1;signal=USR2;grace=5000"


def test_gpus_given_by_an_update_make_a_no_requeue_job_requeueable(
        root: SlurmClient, user: SlurmClient, slurm_release: tuple[int, int]):
    """The guard judges the job as the update leaves it: a --no-requeue job without GPUs (not
    guarded at submit) that an update gives GPUs becomes requeueable; TRES spelled as each
    release takes it (``gres:gpu:1`` on 22.05, ``gres/gpu:1`` later)."""
    job_id = _sbatch(user, "latergpu", "--no-requeue", *PENDING)
    assert _job(root, job_id).requeue is False
    tres = "gres:gpu:1" if slurm_release <= (22, 5) else "gres/gpu:1"
    user.update([job_id], "TresPerNode", tres)
    job = _job(root, job_id)
    assert (job.gpus, job.requeue) == (1, True)
