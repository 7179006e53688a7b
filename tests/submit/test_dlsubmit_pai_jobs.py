"""Every real OpenPAI spec of the corpus (tests/corpus.py) through ``dlsubmit --dry-run``: one row each.

Expected values are worked out by hand from each spec and the default node shape (8 GPUs,
16 cores, 64000 MiB): tasks per node = min(instances, 8 // gpu, 16 // cpu, 64000 // memoryMB),
``--mem-per-cpu`` = ceil(memoryMB / cpu), GRES per node = tasks per node x gpu. A new file in the
directory without a row fails ``test_table_covers_every_file``. Our own specs, one per feature,
get the same checks in test_dlsubmit_fixtures.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from submit.cli import main
from submit_helpers import CONTRACT, PAI_DIR, bash_syntax_ok, option, res, sbatch_directives

pytestmark = pytest.mark.corpus

# file -> (exit status, [resource args per component] or stderr fragment, texts that must appear)
TABLE = {
    # mpi: 1 x (8 cpu, 16384 MiB, 0 gpu); worker: 2 x (8 cpu, 16384, 2 gpu) -> 16//8 = 2 per node
    "v1-cntk-mpi-with-comments.json": (0, [res(1, 1, 1, 8, 2048, None),
                                           res(1, 2, 2, 8, 2048, "gpu:4")],
                                       ["mpirun --allow-run-as-root -np 2"]),
    # main and worker: 1 x (4 cpu, 16384, 2 gpu)
    "v1-horovod-mpi-cifar10.json": (0, [res(1, 1, 1, 4, 4096, "gpu:2"),
                                        res(1, 1, 1, 4, 4096, "gpu:2")],
                                    ["DL_ROLE_MIN_SUCCEEDED=('1' '-1')", "'sleep infinity'"]),
    # ps_server 2 x (2, 8192, 0): 64000//8192 = 7 >= 2; worker 2 x (2, 16384, 4): 8//4 = 2
    "v1-job-tutorial-complete-example-with-comments.jsonc": (
        0, [res(1, 2, 2, 2, 4096, None), res(1, 2, 2, 2, 8192, "gpu:8")],
        ["DL_JOB_ENV=('batch_size=32' 'job_model=resnet20')",
         "DL_ROLE_PORTS=('http:1 ssh:1' 'http:1 ssh:1')", "DL_ROLE_MIN_SUCCEEDED=('-1' '2')"]),
    "v1-pytorch-mnist-minimal.json": (0, [res(1, 1, 1, 4, 2048, "gpu:1")],
                                      ["'cd examples/mnist && python main.py'"]),
    "v1-tensorflow-distributed-cifar10.json": (
        0, [res(1, 2, 2, 2, 4096, None), res(1, 2, 2, 2, 8192, "gpu:8")],
        ["--ps_hosts=$PAI_TASK_ROLE_ps_server_HOST_LIST"]),
    # gangAllocation false: one array element per instance, 1 + 500 = 501 elements
    "v2-cpu-500-tasks-no-gang.yaml": (0, [["--array=0-500", *res(1, 1, 1, 1, 50000, None)]],
                                      ["DL_GANG=0", "DL_ROLE_INSTANCES=('1' '500')"]),
    "v2-hello-world-job.yaml": (0, [res(1, 1, 1, 1, 6500, "gpu:1")],
                                ["'git clone https://github.com/tensorflow/models\ncd models\n"]),
    # 16 cpu per instance: one instance per node; parameters rendered into the folded command
    "v2-horovod-pytorch-mpirun.yaml": (
        0, [res(1, 1, 1, 16, 1024, "gpu:4"), res(1, 1, 1, 16, 1024, "gpu:4")],
        ["-x NCCL_DEBUG=INFO -x NCCL_SOCKET_IFNAME=eth0",
         "--model resnet50 --batch-size 64", "'sleep 10\nmpirun"]),
    # `name: {{jobname}}`: the inner flow mapping {jobname} is the unhashable key, line 2 column 8
    "v2-jinja-templated-stress-job.yml": (2, "v2-jinja-templated-stress-job.yml:2:8: YAML syntax error", []),
    "v2-protocol-spec-example-tf-ps-worker-secrets.yaml": (
        0, [res(1, 1, 1, 2, 8192, "gpu:4"), res(1, 1, 1, 2, 4096, None)],
        ["wget https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz -P data_cifar10",
         "git clone https://MaggieQi:<% $secrets.github_token %>@github.com/MaggieQi/benchmarks "
         "script_tensorflow_cnnbenchmarks", "--model=resnet20", "--batch_size=32",
         "hdfs dfs -cp output_tensorflow_cifar10_model hdfs://10.151.40.179:9000/core/cifar10_model"]),
    # 2 x (8 cpu, 16384, 2 gpu): 16//8 = 2 per node -> one node, 4 GPUs
    "v2-pytorch-ddp-nccl-2x2gpu-hived.yaml": (0, [res(1, 2, 2, 8, 2048, "gpu:4")],
                                              ["DL_ROLE_PORTS=('SynPort:1')"]),
    "v2-tensorflow-cifar10-ps-worker.yaml": (
        0, [res(1, 1, 1, 2, 8192, "gpu:4"), res(1, 1, 1, 2, 8192, "gpu:1")],
        ["'rm /usr/local/cuda/lib64/stubs/libcuda.so.1\nwget -qO- "
         "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz | tar xvz",
         "echo \"Uploading data ...\"'"]),
}


def test_table_covers_every_file() -> None:
    files = {p.name for p in PAI_DIR.iterdir() if p.is_file() and p.name != "README.md"}
    assert files == set(TABLE)


@pytest.fixture
def site(tmp_path: Path) -> list[str]:
    """A site config mapping the corpus's virtual cluster ``your_virtual_cluster`` (the v1
    tutorial's placeholder) to the cluster's defaults, and a secrets file for the secrets example."""
    conf = tmp_path / "site.yaml"
    conf.write_text("virtual_clusters:\n  your_virtual_cluster: {}\n")
    secrets = tmp_path / "secrets"
    secrets.write_text("github_token=cGFzc3dvcmQ=\n")
    secrets.chmod(0o600)
    return ["--site-config", str(conf), "--secrets", str(secrets)]


@pytest.mark.parametrize("name", sorted(TABLE))
def test_pai_job_outcome(name: str, site: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status, expected, texts = TABLE[name]
    rc = main(["--dry-run", str(PAI_DIR / name), *site])
    out, err = capsys.readouterr()
    assert rc == status, err
    if status != 0:
        assert out == ""
        assert isinstance(expected, str) and expected in err
        return
    comps = sbatch_directives(out)
    assert len(comps) == len(expected)
    for i, (args, want) in enumerate(zip(comps, expected)):
        resources = [a for a in args if not a.startswith(("--job-name", "--requeue", "--open-mode",
                                                          "--signal", "--comment"))]
        assert resources == want, f"component {i}"
    assert [a for a in comps[0] if a in CONTRACT or a.startswith(("--signal", "--comment"))] == CONTRACT
    for text in texts:
        assert text in out
    ok, msg = bash_syntax_ok(out)
    assert ok, msg


def test_secrets_never_in_script(site: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """The secrets example holds docker_password 'password' and github_token 'cGFzc3dvcmQ='."""
    rc = main(["--dry-run", str(PAI_DIR / "v2-protocol-spec-example-tf-ps-worker-secrets.yaml"), *site])
    out, err = capsys.readouterr()
    assert rc == 0
    assert "cGFzc3dvcmQ=" not in out
    assert "password" not in out.lower().replace("docker_password", "")
    assert "secrets: values written in the spec are not used" in err


def test_job_names_from_specs(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--dry-run", str(PAI_DIR / "v1-cntk-mpi-with-comments.json")])
    comps = sbatch_directives(capsys.readouterr().out)
    assert [option(c, "job-name") for c in comps] == [["cntk-mpi"], ["cntk-mpi"]]
