"""job_submit.lua inside the live slurmctld, with a non-root user created by the test.

The user (``dlluatest``) is added with ``useradd`` so that munge vouches for it on this machine;
its commands go through ``SlurmClient(run_as=...)`` (``runuser -u``). Checked: refusals reach the
user with the plugin's own text, the defaults show in ``squeue --json``, users keep nice and
hold/release, and root (the daemon) still sets SiteFactor and AdminComment. The cluster is the
one SLURM_CONF names; it must run the packaged job_submit.lua (``dlcluster up`` installs it).
"""

from __future__ import annotations

import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_helpers import slurm_conf, wait_cluster_idle, wait_for

from slurm_plugin.client import SlurmClient, SlurmRefused

pytestmark = pytest.mark.live

USER = "dlluatest"
PREFIX = "dllua-"
SCRIPT = "#!/bin/bash\ntrue\n"
PACKAGED = Path(__file__).resolve().parents[1] / "slurm_plugin" / "job_submit.lua"


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
    assert "expected 'dl:v1;signal=<SIG>;grace=<seconds>'" in e.value.message


def test_defaults_show_in_squeue_json(root: SlurmClient, user: SlurmClient):
    capped = _job(root, _sbatch(user, "capped", "--gres=gpu:2", "--comment=dl:v1;signal=USR2;grace=5000 ckpt", *PENDING))
    assert capped.user == USER and capped.requeue is True
    assert capped.comment == "dl:v1;signal=USR2;grace=300 ckpt"  # site maximum 300 s
    plain = _job(root, _sbatch(user, "plain", "--gpus=1", *PENDING))
    assert plain.requeue is True and plain.comment == ""  # no marker added: no signal contract invented


def test_user_priority_at_submit_is_not_taken(root: SlurmClient, user: SlurmClient):
    # slurmctld 22.05 drops a non-operator's --priority before the plugin; either way it must not stick
    try:
        job = _job(root, _sbatch(user, "prio", "--gres=gpu:1", "--priority=5", *PENDING))
    except SlurmRefused as e:
        assert "priority" in e.message
    else:
        assert job.priority != 5


@pytest.mark.parametrize("field, value", [("Priority", 5), ("SiteFactor", 9), ("AdminComment", "mine"),
                                           ("Requeue", 0), ("Comment", "dl:v1;signal=USR2")])
def test_user_updates_of_daemon_fields_are_refused(root: SlurmClient, user: SlurmClient, field: str, value):
    jid = _sbatch(user, "upd", "--gres=gpu:1", *PENDING)
    with pytest.raises(SlurmRefused):
        user.update([jid], field, value)
    job = _job(root, jid)
    assert job.requeue is True and job.admin_comment == "" and job.comment == ""


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
