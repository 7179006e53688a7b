"""dlsubmit's job environment and input checks, each against its source.

Runtime behaviour runs the generated script under real bash with the fake ``srun``/``scontrol``
of tests/submit/test_render_runtime.py (a fake only because these tests must run without a cluster;
tests/live/test_submit_live.py checks the device contract and submission from inside a job with real
srun). Expected values come from the cited document or are worked out by hand in comments.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hostile import HOSTILE
from submit import cli, environ, load, options
from submit.errors import SpecError
from submit.options import RenderOptions
from submit.render import render_sbatch
from submit_helpers import sbatch_directives, option, v2_spec
from test_render_runtime import block_start, fake_bin, role, rows, run_script, script_env  # noqa: F401

# ---------------------------------------------------------------- 1, 2: device contract


def test_every_rank_device_exists_and_device_order_is_pci(tmp_path: Path, fake_bin: Path) -> None:
    """4 instances x 1 GPU on one node. PyTorch's contract (torch.distributed docs, "launch
    utility": ``torch.cuda.set_device(args.local_rank)``; torchrun sets LOCAL_RANK) needs
    LOCAL_RANK < number of visible devices in every task. CUDA_DEVICE_ORDER must be PCI_BUS_ID
    (CUDA C Programming Guide, env vars: the default FASTEST_FIRST may differ from nvidia-smi/NVML)."""
    cmd = ('IFS=, read -r -a d <<< "$CUDA_VISIBLE_DEVICES"; '
           'echo "ENV local=$LOCAL_RANK n=${#d[@]} ok=$(( LOCAL_RANK < ${#d[@]} )) '
           'order=$CUDA_DEVICE_ORDER mine=$DL_TASK_GPUS"')
    rc, out = run_script(v2_spec(roles={"w": role(cmd, instances=4, gpu=1)}), tmp_path, fake_bin)
    assert rc == 0, out
    got = sorted((r["local"], r["n"], r["ok"], r["order"], r["mine"]) for r in rows(out))
    assert got == [(str(i), "4", "1", "PCI_BUS_ID", str(i)) for i in range(4)]


def test_per_task_isolation_only_on_request(tmp_path: Path, fake_bin: Path) -> None:
    cmd = 'echo "ENV local=$LOCAL_RANK gpus=$CUDA_VISIBLE_DEVICES mine=$DL_TASK_GPUS"'
    spec = v2_spec(roles={"w": role(cmd, instances=2, gpu=2)}, extras={"gpuIsolation": "task"})
    rc, out = run_script(spec, tmp_path, fake_bin)
    assert rc == 0, out
    # step GPUs on the node: 10,11,12,13; task 0 keeps 10,11 and task 1 12,13; each sees 2 devices
    assert sorted((r["local"], r["gpus"], r["mine"]) for r in rows(out)) == [
        ("0", "10,11", "0,1"), ("1", "12,13", "0,1")]


# ---------------------------------------------------------------- 3: rendezvous fail-fast

BROKEN_SCONTROL = {
    "fails": '#!/bin/bash\n[[ $1 == show && $2 == hostnames ]] && { echo "scontrol: error" >&2; exit 1; }\n',
    "empty": '#!/bin/bash\nexit 0\n',
}


@pytest.mark.parametrize("kind", sorted(BROKEN_SCONTROL))
def test_broken_rendezvous_stops_before_the_payload(kind: str, tmp_path: Path, fake_bin: Path) -> None:
    (fake_bin / "scontrol").write_text(BROKEN_SCONTROL[kind])
    marker = tmp_path / "payload-ran"
    rc, out = run_script(v2_spec(roles={"w": role(f"touch {marker}", instances=2)}), tmp_path, fake_bin)
    assert rc != 0
    assert not marker.exists()
    assert "cannot start: rendezvous" in out and "payload was not started" in out


def test_empty_nodelist_is_named(tmp_path: Path, fake_bin: Path) -> None:
    rc, out = run_script(v2_spec(), tmp_path, fake_bin, nodelists=("",))
    assert rc != 0 and "SLURM_JOB_NODELIST is empty" in out


def test_missing_job_id_is_named(tmp_path: Path, fake_bin: Path) -> None:
    script = render_sbatch(load.to_job(v2_spec()), RenderOptions(checkpoint_root=str(tmp_path)))
    env = script_env(tmp_path, fake_bin)
    del env["SLURM_JOB_ID"]
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "empty or unset: SLURM_JOB_ID" in proc.stdout + proc.stderr


# ---------------------------------------------------------------- 4: submitting from a job


def test_clean_environment_drops_the_enclosing_jobs_settings() -> None:
    outer = {"PATH": "/bin", "HOME": "/h", "SLURM_CONF": "/etc/slurm/slurm.conf",
             "SLURM_JOB_ID": "5100", "SLURM_NTASKS": "4", "SLURM_MEM_PER_NODE": "100",
             "SRUN_CPUS_PER_TASK": "2", "CUDA_VISIBLE_DEVICES": "0,1", "PMIX_RANK": "0",
             "SBATCH_ACCOUNT": "mine", "SLURM_TIME_FORMAT": "%s"}
    assert environ.inside_job(outer) == "5100"
    assert environ.clean(outer) == {"PATH": "/bin", "HOME": "/h", "SLURM_CONF": "/etc/slurm/slurm.conf",
                                    "SBATCH_ACCOUNT": "mine", "SLURM_TIME_FORMAT": "%s"}


def test_submitting_inside_a_job_warns_and_passes_the_clean_env(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[dict[str, str]] = []
    monkeypatch.setenv("SLURM_JOB_ID", "5100")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setattr(cli, "_submit", lambda s, a, env: seen.append(env) or 9)
    assert cli.main([str(_spec_file(tmp_path))]) == 0
    assert "SLURM_JOB_ID" not in seen[0] and "CUDA_VISIBLE_DEVICES" not in seen[0]
    assert "running inside job 5100" in capsys.readouterr().err


def _spec_file(tmp_path: Path, spec: dict | None = None) -> Path:
    f = tmp_path / "job.yaml"
    n = 1
    while f.exists():
        n += 1
        f = tmp_path / f"job-{n}.yaml"
    f.write_text(yaml.safe_dump(spec or v2_spec()))
    return f


# ---------------------------------------------------------------- 5: timeout after success

FAKE_SBATCH = """#!/bin/bash
# Fake: Slurm cannot time out on demand. Queues "job 4242" (remembers the --comment), then
# answers the way sbatch does when slurmctld is slow (src/sbatch: "Batch job submission failed:
# Socket timed out on send/recv operation").
for a in "$@"; do [[ $a == --comment=* ]] && printf '%s\\n' "${a#--comment=}" >> "$FAKE_DIR/queued"; done
echo x >> "$FAKE_DIR/sbatch-calls"
cat > /dev/null
echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
exit 1
"""
FAKE_SQUEUE = """#!/bin/bash
[[ -f $FAKE_DIR/queued ]] && while IFS= read -r c; do printf '4242|%s\\n' "$c"; done < "$FAKE_DIR/queued"
exit 0
"""


def test_timed_out_submission_that_was_queued_is_reported_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Fake sbatch/squeue (documented above): a live cluster cannot produce this timeout."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("squeue", FAKE_SQUEUE), ("sacct", "#!/bin/bash\nexit 1\n")):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("SLURM_CONF", str(conf))
    monkeypatch.setattr(cli, "LOOKUP_WAIT_S", 0)
    rc = cli.main([str(_spec_file(tmp_path))])
    out, err = capsys.readouterr()
    assert (rc, out) == (0, "4242\n")
    assert (tmp_path / "sbatch-calls").read_text() == "x\n"   # never submitted twice
    [comment] = (tmp_path / "queued").read_text().splitlines()
    assert re.fullmatch(r"dl:v1;signal=USR2;grace=60 dlsubmit-token=[0-9a-f]{32}", comment)
    assert "Socket timed out" in err and "job 4242 carries this submission's token" in err


def test_timed_out_submission_not_queued_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from slurm_plugin.slurm.client import SlurmUnreachable

    def timeout(*a: object) -> int:
        raise SlurmUnreachable(["sbatch"], "Socket timed out on send/recv operation")
    monkeypatch.setattr(cli, "_submit", timeout)
    monkeypatch.setattr(cli, "_find", lambda token: [])
    monkeypatch.setattr(cli, "LOOKUP_WAIT_S", 0)
    assert cli.main([str(_spec_file(tmp_path))]) == 3
    assert "so nothing was queued" in capsys.readouterr().err


# ---------------------------------------------------------------- 6: PAI runtime variables

# OpenPAI's documented runtime variables: docs/job_tutorial.md ("a complete list of environment
# variables accessible in a Docker container") and the protocol-v2 list of the web portal
# (PAI_ENV_VAR, src/webportal .../job-submission/utils/constants.js); $r = role, $i = index,
# $l = port label.
PAI_CONTRACT = [
    "PAI_WORK_DIR", "PAI_DEFAULT_FS_URI", "PAI_JOB_NAME", "PAI_JOB_VC_NAME", "PAI_USER_NAME",
    "PAI_DATA_DIR", "PAI_OUTPUT_DIR", "PAI_CODE_DIR", "PAI_CURRENT_TASK_ROLE_NAME",
    "PAI_CURRENT_TASK_ROLE_TASK_COUNT", "PAI_CURRENT_TASK_ROLE_CPU_COUNT",
    "PAI_CURRENT_TASK_ROLE_MEM_MB", "PAI_CURRENT_TASK_ROLE_SHM_MB", "PAI_CURRENT_TASK_ROLE_GPU_COUNT",
    "PAI_CURRENT_TASK_ROLE_MIN_FAILED_TASK_COUNT", "PAI_CURRENT_TASK_ROLE_MIN_SUCCEEDED_TASK_COUNT",
    "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX", "PAI_JOB_TASK_COUNT", "PAI_JOB_TASK_ROLE_COUNT",
    "PAI_JOB_TASK_ROLE_LIST", "PAI_CONTAINER_HOST_IP", "PAI_CONTAINER_HOST_PORT_LIST",
    "PAI_CONTAINER_HOST_$l_PORT_LIST", "PAI_TASK_ROLE_$r_HOST_LIST",
    "PAI_TASK_ROLE_COUNT", "PAI_TASK_ROLE_LIST", "PAI_TASK_ROLE_TASK_COUNT_$r", "PAI_HOST_IP_$r_$i",
    "PAI_PORT_LIST_$r_$i_$l", "PAI_RESOURCE_$r", "PAI_MIN_FAILED_TASK_COUNT_$r",
    "PAI_MIN_SUCCEEDED_TASK_COUNT_$r",
]


def test_every_pai_runtime_variable_reaches_every_role(tmp_path: Path, fake_bin: Path) -> None:
    roles = {"ps": (2, {"http": 1, "ssh": 1}), "worker": (2, {"http": 1, "ssh": 1})}
    names = []
    for v in PAI_CONTRACT:
        for r, (n, ports) in roles.items():
            for i in range(n):
                for label in ports:
                    names.append(v.replace("$r", r).replace("$i", str(i)).replace("$l", label))
    names = sorted(set(names))
    # v1 fields: dataDir etc. are set; the check prints the names whose value is EMPTY or unset
    check = "for v in " + " ".join(names) + '; do [[ -n ${!v:-} ]] || echo "EMPTY $v"; done; echo DONE'
    spec = {"jobName": "j", "image": "i", "dataDir": "/d", "outputDir": "/o", "codeDir": "/c",
            "taskRoles": [{"name": r, "taskNumber": n, "cpuNumber": 1, "memoryMB": 10, "gpuNumber": 0,
                           "portList": [{"label": k, "beginAt": 0, "portNumber": c} for k, c in p.items()],
                           "command": check} for r, (n, p) in roles.items()]}
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=str(tmp_path / "ck"),
                                                            default_fs_uri="hdfs://nn:9000"))
    env = script_env(tmp_path, fake_bin, nodelists=("n1", "n2"))
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert out.count("DONE") == 4
    assert [line for line in out.splitlines() if line.startswith("EMPTY")] == []


def test_pai_port_list_format(tmp_path: Path, fake_bin: Path) -> None:
    """job_tutorial.md: PAI_CONTAINER_HOST_PORT_LIST is ``label0:p0,p1;label1:p2``."""
    cmd = 'echo "ENV all=$PAI_CONTAINER_HOST_PORT_LIST tcp=$PAI_CONTAINER_HOST_tcp_PORT_LIST"'
    spec = v2_spec(roles={"w": role(cmd, resourcePerInstance={"cpu": 1, "memoryMB": 10, "gpu": 0,
                                                              "ports": {"tcp": 2, "ssh": 1}})})
    rc, out = run_script(spec, tmp_path, fake_bin)
    assert rc == 0, out
    # MASTER_PORT M (a block of 5), the task's own port M+1, then tcp M+2,M+3, ssh M+4
    m = block_start(77, 5)
    assert rows(out) == [{"all": f"tcp:{m + 2},{m + 3};ssh:{m + 4}", "tcp": f"{m + 2},{m + 3}"}]


def test_renamed_role_used_by_its_original_name_is_warned() -> None:
    spec = v2_spec(roles={"ps.server": role("echo $PAI_TASK_ROLE_ps.server_HOST_LIST")})
    [w] = load.to_job(spec).warnings
    assert "'ps.server' is 'ps_server' in environment names" in w


# ---------------------------------------------------------------- 7: secrets


def _secret_spec() -> dict:
    return v2_spec(roles={"w": role('echo "ENV tok=<% $secrets.token %>"')})


def test_secret_filled_at_run_time_never_in_the_script(tmp_path: Path, fake_bin: Path) -> None:
    sf = tmp_path / "s.env"
    sf.write_text("# mine\ntoken=s3cr=t $(x)\n")
    sf.chmod(0o600)
    job = load.to_job(_secret_spec())
    script = render_sbatch(job, RenderOptions(checkpoint_root=str(tmp_path / "ck")), str(sf))
    assert "s3cr" not in script
    proc = subprocess.run(["bash", "-c", script], env=script_env(tmp_path, fake_bin),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the value is everything after the first "=", literal; bash runs the command text, so
    # `$(x)` inside double quotes would run: here the value holds a space and "=" only up to it
    assert 'ENV tok=s3cr=t' in proc.stdout


def test_secret_file_mode_and_names_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    sf = tmp_path / "s.env"
    sf.write_text("other=1\n")
    sf.chmod(0o644)
    spec = _spec_file(tmp_path, _secret_spec())
    assert cli.main([str(spec), "--dry-run", "--secrets", str(sf)]) == 2
    err = capsys.readouterr().err
    assert "mode 0644 lets others read it" in err and "no line for token" in err
    assert cli.main([str(spec), "--dry-run"]) == 2
    assert "--secrets FILE" in capsys.readouterr().err


# ---------------------------------------------------------------- 8: taskRetryCount


def test_task_retry_reruns_only_the_failed_instance(tmp_path: Path, fake_bin: Path) -> None:
    # instance 1 fails on its first two runs, succeeds on the third; taskRetryCount 2 allows it
    cmd = ('f=$DL_CHECKPOINT_DIR/runs.$PAI_TASK_INDEX; echo x >> "$f"; '
           'if [[ $PAI_TASK_INDEX == 1 && $(wc -l < "$f") -lt 3 ]]; then exit 5; fi')
    rc, out = run_script(v2_spec(roles={"w": role(cmd, instances=2, taskRetryCount=2)}), tmp_path, fake_bin)
    assert rc == 0, out
    ck = tmp_path / "ck" / "77"
    assert [len((ck / f"runs.{i}").read_text().splitlines()) for i in (0, 1)] == [1, 3]
    assert not (tmp_path / "requeues").exists()


def test_task_retry_budget_spent_fails_the_instance(tmp_path: Path, fake_bin: Path) -> None:
    cmd = 'echo x >> "$DL_CHECKPOINT_DIR/runs"; exit 5'
    rc, out = run_script(v2_spec(roles={"w": role(cmd, taskRetryCount=1)}), tmp_path, fake_bin)
    assert rc == 1
    assert len((tmp_path / "ck" / "77" / "runs").read_text().splitlines()) == 2   # 1 + 1 retry


# ---------------------------------------------------------------- 10: every value quoted


def _flag_cases(marker: Path) -> list[tuple[str, str]]:
    evil = f"a100$(touch {marker})"
    return [(f, evil) for f in ("--partition", "--gpu-type", "--signal", "--checkpoint-root",
                                "--output", "--account", "--qos", "--container-runtime",
                                "--gpus-per-node", "--cores-per-node", "--mem-per-node", "--grace")]


SITE_KEYS = ["partition", "container_runtime", "gpus_per_node", "cores_per_node", "mem_per_node_mib",
             "gpu_type", "signal", "grace_s", "enforce_binding", "checkpoint_root", "output",
             "default_fs_uri", "account", "qos", "virtual_clusters"]


def _no_side_effect(script: str, marker: Path, tmp_path: Path) -> None:
    """Run the job's values section of the script (everything before the fixed runtime) and
    its #SBATCH parse: no command may run."""
    head = script.split("# ---- runtime:")[0].split("read -r -d '' DL_TASK_PROLOGUE")[0]
    subprocess.run(["bash", "-c", head], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    sbatch_directives(script)
    assert not marker.exists()


def _bash_value(script: str, name: str) -> str:
    """The value the job-values section of ``script`` gives bash variable ``name``."""
    head = script.split("read -r -d '' DL_TASK_PROLOGUE")[0]
    proc = subprocess.run(["bash", "-c", head + f'\nprintf %s "${name}"'], capture_output=True,
                          text=True, timeout=30)
    return proc.stdout


@pytest.mark.parametrize("text", HOSTILE + ["a100$(touch MARKER)"])
def test_every_flag_and_site_key_refuses_or_quotes_hostile_values(
        text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "pwned"
    text = text.replace("MARKER", str(marker)).replace("/tmp/pwned", str(marker))
    spec = _spec_file(tmp_path, v2_spec(roles={"w": role("true", gpu=1)}))
    flags = [f for f, _ in _flag_cases(marker)]
    for flag in flags:
        rc = cli.main([str(spec), "--dry-run", flag, text])
        out, err = capsys.readouterr()
        assert rc in (0, 2), (flag, err)
        if rc == 2:
            assert flag.lstrip("-").replace("-", "_")[:6] in err.replace("-", "_") or "argument" in err, err
        else:
            _no_side_effect(out, marker, tmp_path)
            if flag == "--output":
                [args] = sbatch_directives(out)
                assert option(args, "output") == [text]
            if flag == "--checkpoint-root":
                assert _bash_value(out, "DL_CHECKPOINT_ROOT") == text
    for key in SITE_KEYS:
        site = tmp_path / "site.yaml"
        value = {"x": {"partition": text}} if key == "virtual_clusters" else text
        site.write_text(yaml.safe_dump({key: value}))
        rc = cli.main([str(spec), "--dry-run", "--site-config", str(site)])
        out, err = capsys.readouterr()
        assert rc in (0, 2), (key, err)
        if rc == 2:
            assert key.split("_")[0] in err, err
        else:
            _no_side_effect(out, marker, tmp_path)
    assert not marker.exists()


def test_gpu_type_injection_from_the_issue_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec_file(tmp_path, v2_spec(roles={"w": role("true", gpu=1)}))
    assert cli.main([str(spec), "--dry-run", "--gpu-type", "a100$(touch /tmp/x)"]) == 2
    assert "--gpu-type 'a100$(touch /tmp/x)': must be a Slurm name" in capsys.readouterr().err


def test_every_bash_array_element_is_single_quoted() -> None:
    script = render_sbatch(load.to_job(v2_spec(roles={"w": role("true", gpu=1)})),
                           RenderOptions(gpu_type="a100"))
    for line in script.splitlines():
        m = re.match(r"^(DL_ROLE_\w+)=\((.*)\)$", line)
        if m:
            assert re.fullmatch(r"('[^']*'( |$))*", m.group(2) + (" " if m.group(2) else "")), line
    assert "DL_ROLE_GRES=('gpu:a100:1')" in script


# ---------------------------------------------------------------- 11, 14: hostile YAML


def test_billion_laughs_is_refused_within_a_second(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines.append("protocolVersion: 2\nname: bomb\ntaskRoles: *a8")
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines) + "\n")
    t0 = time.monotonic()
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert time.monotonic() - t0 < 1.0
    [line] = info.value.problems
    assert "expands to more than 100,000 nodes" in line and line.startswith(str(f))


def test_large_spec_without_aliases_is_not_called_an_alias_bomb(tmp_path: Path) -> None:
    f = tmp_path / "big.yaml"
    f.write_text("protocolVersion: 2\nname: big\ntaskRoles:\n  w:\n    commands:\n"
                 + "".join(f"      - echo {i}\n" for i in range(120_000)))
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert info.value.problems == [
        f"{f}: the document has more than 100,000 nodes (keys, values and list items); split it "
        "into smaller files"]


@pytest.mark.parametrize("text", [
    "description: &a [*a]\n",
    "description: &m {k: *m}\n",
    "description: &a [[1, {x: *a}]]\n",
    "description: &m {<<: *m}\n",
    "taskRoles: &r {w: {commands: *r}}\n",
], ids=["sequence", "mapping", "indirect", "merge", "task-roles"])
def test_yaml_alias_inside_its_own_anchor_is_refused(text: str, tmp_path: Path) -> None:
    """``&a [*a]`` describes an endless document: refused like an alias bomb, in a child with
    1 GiB of address space (counting it without end grew without bound, past 10 GB)."""
    f = tmp_path / "cycle.yaml"
    f.write_text("protocolVersion: 2\nname: n\n" + text)
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from submit import load\n"
            "from submit.errors import SpecError\n"
            "try:\n"
            "    load.load(sys.argv[1])\n"
            "except SpecError as exc:\n"
            "    print(*exc.problems, sep='\\n')\n")
    out = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert (out.returncode, out.stderr) == (0, "")
    [line] = out.stdout.splitlines()
    assert line.startswith(f"{f}: the document expands to more than 100,000 nodes")


@pytest.mark.parametrize("key", ["partition", "virtual_clusters: {a: {partition", "gpus_per_node"])
def test_site_config_value_nested_too_deeply_is_one_line(key: str, tmp_path: Path) -> None:
    """990 nested lists under a site key: YAML reads them, the message's repr of the value
    passed Python's recursion limit (a traceback)."""
    f = tmp_path / "site.yaml"
    f.write_text(f"{key}: {{a: " + "[" * 990 + "]" * 990 + "}" + "}" * key.count("{") + "\n")
    with pytest.raises(SpecError) as info:
        options.load_site(f)
    assert info.value.problems == [f"{f}: nested too deeply"]


def test_duplicate_yaml_key_names_the_key_and_both_lines(tmp_path: Path) -> None:
    f = tmp_path / "dup.yaml"
    f.write_text("protocolVersion: 2\nname: d\ntaskRoles:\n  w:\n    resourcePerInstance:\n"
                 "      gpu: 1\n      cpu: 1\n      gpu: 2\n    commands: [x]\n")
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert info.value.problems == [f"{f}:8: key 'gpu' appears twice in the same mapping (lines 6 and 8); keep one"]


def test_duplicate_json_key_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "dup.json"
    f.write_text('{"jobName": "a",\n "image": "i",\n "jobName": "b"}')
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert info.value.problems == [f"{f}:3: key 'jobName' appears twice in the same mapping (lines 1 and 3); keep one"]


def test_every_duplicate_key_is_reported_one_line_each(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "dup.yaml"
    f.write_text("protocolVersion: 2\nname: a\ntaskRoles:\n  w:\n    instances: 1\n"
                 "    resourcePerInstance: {gpu: 1, cpu: 1}\n    instances: 2\n"
                 "    commands: [x]\nname: b\n")
    assert cli.main([str(f), "--dry-run"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"dlsubmit: {f}:7: key 'instances' appears twice in the same mapping (lines 5 and 7); keep one",
        f"dlsubmit: {f}:9: key 'name' appears twice in the same mapping (lines 2 and 9); keep one"]
    j = tmp_path / "dup.json"
    j.write_text('{"jobName": "a",\n "jobName": "b",\n "image": "i",\n "image": "j"}')
    assert cli.main([str(j), "--dry-run"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"dlsubmit: {j}:2: key 'jobName' appears twice in the same mapping (lines 1 and 2); keep one",
        f"dlsubmit: {j}:4: key 'image' appears twice in the same mapping (lines 3 and 4); keep one"]


def test_duplicate_key_in_site_config(tmp_path: Path) -> None:
    from submit.options import load_site

    f = tmp_path / "site.yaml"
    f.write_text("partition: a\npartition: b\n")
    with pytest.raises(SpecError, match="key 'partition' appears twice.*lines 1 and 2"):
        load_site(f)


# ---------------------------------------------------------------- 12: virtual clusters


def test_virtual_cluster_maps_to_partition_account_qos() -> None:
    spec = v2_spec(defaults={"virtualCluster": "vision"})
    opts = RenderOptions(virtual_clusters={"vision": {"partition": "a100", "account": "cv", "qos": "high"}})
    [args] = sbatch_directives(render_sbatch(load.to_job(spec), opts))
    assert (option(args, "partition"), option(args, "account"), option(args, "qos")) == (["a100"], ["cv"], ["high"])
    # a command-line --partition wins over the virtual cluster's
    opts2 = RenderOptions(partition="p2", virtual_clusters=opts.virtual_clusters)
    [args] = sbatch_directives(render_sbatch(load.to_job(spec), opts2))
    assert option(args, "partition") == ["p2"]


def test_unknown_virtual_cluster_lists_the_known_ones() -> None:
    spec = v2_spec(defaults={"virtualCluster": "nlp"})
    with pytest.raises(SpecError) as info:
        render_sbatch(load.to_job(spec), RenderOptions(virtual_clusters={"vision": {"partition": "a"}}))
    assert info.value.problems == ["virtualCluster 'nlp': not a virtual cluster of this site (known: "
                                   "default, vision; admins map them in the site config's virtual_clusters)"]
    # "default" (every OpenPAI install has it) means Slurm's defaults without a site entry
    script = render_sbatch(load.to_job(v2_spec(defaults={"virtualCluster": "default"})), RenderOptions())
    assert "--partition" not in script and "DL_VC_NAME='default'" in script


def test_a_spec_naming_no_virtual_cluster_gets_the_sites_default_entry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The job is labelled ``default`` (PAI_JOB_VC_NAME) when the spec names no virtual cluster,
    so the site's ``default`` entry places it, exactly as ``virtualCluster: default`` does."""
    vcs = {"vision": {"partition": "a100"}, "default": {"partition": "gpu", "account": "all", "qos": "low"}}
    opts = RenderOptions(virtual_clusters=vcs)
    named = render_sbatch(load.to_job(v2_spec(defaults={"virtualCluster": "default"})), opts)
    v1 = {"jobName": "t", "image": "img", "taskRoles": [
        {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 100, "gpuNumber": 0, "command": "true"}]}
    for spec in (v2_spec(), v2_spec(defaults={}), v1):
        script = render_sbatch(load.to_job(spec), opts)
        [args] = sbatch_directives(script)
        assert (option(args, "partition"), option(args, "account"), option(args, "qos")) == (
            ["gpu"], ["all"], ["low"])
        assert "DL_VC_NAME='default'" in script
        if spec is not v1:
            assert script == named
    # a command-line --partition/--account/--qos still wins, as over any virtual cluster's
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"virtual_clusters": vcs}))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(v2_spec()))
    assert cli.main(["--dry-run", "--site-config", str(site), str(job), "--qos", "high"]) == 0
    [args] = sbatch_directives(capsys.readouterr().out)
    assert (option(args, "partition"), option(args, "account"), option(args, "qos")) == (
        ["gpu"], ["all"], ["high"])


# ---------------------------------------------------------------- 13: memory units


def test_memory_is_written_with_its_unit() -> None:
    # memoryMB 1000 on 3 CPUs: ceil(1000 / 3) = 334 MiB per CPU; sbatch(1) --mem-per-cpu takes
    # suffixes K, M, G, T; M is written so no site default unit applies
    spec = v2_spec(roles={"w": {"instances": 1, "resourcePerInstance": {"cpu": 3, "memoryMB": 1000, "gpu": 0},
                                "commands": ["true"]}})
    script = render_sbatch(load.to_job(spec), RenderOptions())
    [args] = sbatch_directives(script)
    assert option(args, "mem-per-cpu") == ["334M"]
    assert "DL_ROLE_MEM_PER_CPU=('334M')" in script


# ---------------------------------------------------------------- several specs in one call


def test_several_specs_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, a, env: calls.append(s) or 100 + len(calls))
    good = _spec_file(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("protocolVersion: 2\nname: b\ntaskRoles: {}\n")
    assert cli.main([str(good), str(bad)]) == 2
    assert calls == [] and f"dlsubmit: {bad}: taskRoles" in capsys.readouterr().err
    second = _spec_file(tmp_path, v2_spec(name="second"))
    assert cli.main([str(good), str(second)]) == 0
    assert sorted(capsys.readouterr().out.split()) == ["101", "102"]
    assert len(calls) == 2


def test_fewer_addresses_than_nodes_is_refused(tmp_path: Path, fake_bin: Path) -> None:
    # spread placement: 2 instances on 2 nodes, but the node list names one host
    spec = v2_spec(roles={"w": role("true", instances=2)}, extras={"placement": "spread"})
    rc, out = run_script(spec, tmp_path, fake_bin, nodelists=("n1",))
    assert rc != 0 and "1 node address(es) for the 2 node(s) of role w" in out


def test_undeclared_param_exits_2_from_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec = v2_spec(roles={"w": role("echo <% $parameters.bs %>")}, parameters={"bs": 8})
    assert cli.main([str(_spec_file(tmp_path, spec)), "--dry-run", "--param", "x=1"]) == 2
    assert capsys.readouterr().err == "dlsubmit: --param x: the spec declares no parameter 'x' (parameters: bs)\n"
