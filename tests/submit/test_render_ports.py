"""The job's port block (submit/runtime.py ``dl_pick_port``, docs/dlsubmit.md "Ports") run by
real bash against the fake ``srun``/``scontrol`` of tests/submit/test_render_runtime.py.

The block is read from this machine's real ``/proc``: its ephemeral range
(``net.ipv4.ip_local_port_range``) and the sockets in ``/proc/net/tcp*``; a port is made busy
by a listening socket of the test itself.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from submit import load
from submit.options import RenderOptions
from submit.render import render_sbatch
from submit_helpers import v2_spec
from test_render_runtime import (block_start, ephemeral_range, fake_bin, role, rows,  # noqa: F401
                                 run_script, script_env)

SHOW = 'echo "ENV master=$MASTER_PORT own=$PAI_CONTAINER_HOST_PORT p=${PAI_PORT_LIST_main_0_p:-}"'


@pytest.fixture
def listening() -> Iterator[list[socket.socket]]:
    """Listening TCP sockets the test opens (closed afterwards)."""
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()


def listen(socks: list[socket.socket], port: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", port))
    s.listen()
    socks.append(s)


def master(out: str) -> int:
    return int(next(r["master"] for r in rows(out)))


def run_with(opts: RenderOptions, spec: dict, tmp_path: Path, fake_bin: Path,  # noqa: F811
             job_id: str = "77", path_first: Path | None = None) -> tuple[int, str]:
    script = render_sbatch(load.to_job(spec), opts)
    env = script_env(tmp_path, fake_bin, extra_env={"SLURM_JOB_ID": job_id})
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def test_jobs_1000_apart_get_different_blocks(tmp_path: Path, fake_bin: Path) -> None:  # noqa: F811
    """Job ids 77 and 1077 may share a node: their blocks (2 ports: MASTER_PORT and the task's
    own) differ, each where the job id puts it."""
    spec = v2_spec(roles={"main": role(SHOW)})
    ports = {}
    for job_id in (77, 1077):
        rc, out = run_script(spec, tmp_path, fake_bin, extra_env={"SLURM_JOB_ID": str(job_id)})
        assert rc == 0, out
        ports[job_id] = master(out)
        assert rows(out)[0]["own"] == str(ports[job_id] + 1)
    assert ports == {77: block_start(77, 2), 1077: block_start(1077, 2)}
    assert ports[77] != ports[1077]


@pytest.mark.parametrize("job_id", [999, 1649, 123456])
def test_every_port_of_the_job_lies_below_the_ephemeral_range(
        job_id: int, tmp_path: Path, fake_bin: Path) -> None:  # noqa: F811
    spec = v2_spec(roles={"main": role(SHOW, resourcePerInstance={
        "cpu": 1, "memoryMB": 10, "gpu": 0, "ports": {"p": 3}})})
    rc, out = run_script(spec, tmp_path, fake_bin, extra_env={"SLURM_JOB_ID": str(job_id)})
    assert rc == 0, out
    [row] = rows(out)
    ports = [int(row["master"]), int(row["own"]), *map(int, row["p"].split(","))]
    assert ports == list(range(block_start(job_id, 5), block_start(job_id, 5) + 5))
    assert 10000 <= min(ports) and max(ports) < ephemeral_range()[0]


def test_a_block_with_a_port_in_use_gives_way_to_the_next(
        tmp_path: Path, fake_bin: Path, listening: list[socket.socket]) -> None:  # noqa: F811
    first = block_start(77, 2)
    listen(listening, first + 1)          # the task's own port of the first-choice block
    rc, out = run_script(v2_spec(roles={"main": role(SHOW)}), tmp_path, fake_bin)
    assert rc == 0, out
    assert master(out) == first + 2 and rows(out)[0]["own"] == str(first + 3)
    assert f"[dlsubmit] ports: 1 block(s) of 2 from port {first} hold ports in use on " in out
    assert "already in use" not in out    # the ports the tasks got are free


def test_a_task_names_its_own_port_in_use_and_still_runs(
        tmp_path: Path, fake_bin: Path) -> None:  # noqa: F811
    """A port taken after the batch shell chose the block (on another node, say): the task says
    so on stderr, naming role, index, port and node, and the command still runs."""
    wrap = tmp_path / "wrap"
    wrap.mkdir()
    taker = ("import os, socket, sys, time; s = socket.socket(); "
             "s.bind(('127.0.0.1', int(os.environ['MASTER_PORT']) + 1)); s.listen(); "
             "print('ok', flush=True); time.sleep(30)")
    (wrap / "srun").write_text(
        "#!/bin/bash\n"
        f"{sys.executable} -c \"{taker}\" > \"$DL_STATUS_DIR/../taker\" &\n"
        "until [[ -s $DL_STATUS_DIR/../taker ]]; do sleep 0.1; done\n"
        f"trap 'kill $!' EXIT\n{fake_bin}/srun \"$@\"\n")
    (wrap / "srun").chmod(0o755)
    rc, out = run_with(RenderOptions(checkpoint_root=str(tmp_path / "ck")),
                       v2_spec(roles={"main": role(SHOW)}), tmp_path, fake_bin, path_first=wrap)
    assert rc == 0, out
    port = master(out) + 1
    assert f"[dlsubmit] warning: main 0: port(s) {port} already in use on n0; a program that " \
           "binds one will fail\n" in out
    assert rows(out)[0]["own"] == str(port)


def test_a_floor_inside_the_ephemeral_range_takes_ports_above_it(
        tmp_path: Path, fake_bin: Path) -> None:  # noqa: F811
    lo, hi = ephemeral_range()
    opts = RenderOptions(checkpoint_root=str(tmp_path / "ck"), port_floor=lo)
    rc, out = run_with(opts, v2_spec(roles={"main": role(SHOW)}), tmp_path, fake_bin)
    assert rc == 0, out
    assert master(out) == hi + 1 + 77 % ((65536 - hi - 1) // 2) * 2


def test_a_block_that_does_not_fit_stops_before_the_payload(
        tmp_path: Path, fake_bin: Path) -> None:  # noqa: F811
    lo, hi = ephemeral_range()
    opts = RenderOptions(checkpoint_root=str(tmp_path / "ck"), port_floor=65000)
    spec = v2_spec(roles={"main": role(SHOW, instances=6, resourcePerInstance={
        "cpu": 1, "memoryMB": 10, "gpu": 0, "ports": {"p": 100}})})
    rc, out = run_with(opts, spec, tmp_path, fake_bin)
    assert rc == 1 and rows(out) == []
    assert (f"[dlsubmit] cannot start: ports: the job's 607 port(s) do not fit between the port "
            f"floor 65000 and the ephemeral range {lo}-{hi} (net.ipv4.ip_local_port_range); the "
            "payload was not started") in out


@pytest.mark.parametrize("value", [1024, 80, 65536, "10000", True])
def test_the_port_floor_is_a_whole_number_above_the_privileged_ports(value: object) -> None:
    from submit.errors import SpecError

    with pytest.raises(SpecError) as info:
        RenderOptions(port_floor=value)   # type: ignore[arg-type]
    assert info.value.problems == [f"port_floor {value!r}: must be a whole number in 1025..65535"]
