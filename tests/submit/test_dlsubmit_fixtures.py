"""Our own OpenPAI specs (tests/fixtures/specs, one per feature) through ``dlsubmit --dry-run``.

Expected values are worked out by hand from each spec and the default node shape (8 GPUs,
16 cores, 64000 MiB): tasks per node = min(instances, 8 // gpu, 16 // cpu, 64000 // memoryMB),
``--mem-per-cpu`` = ceil(memoryMB / cpu), GRES per node = tasks per node x gpu. The same checks on
the real-world specs are in test_dlsubmit_pai_jobs.py (corpus). A new file in the folder
without a row fails ``test_table_covers_every_file``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from submit.cli import main
from submit_helpers import CONTRACT, bash_syntax_ok, res, sbatch_directives

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
# file -> (exit status, [resource args per component] or stderr lines, texts that must appear)
TABLE = {
    # 1 x (2 cpu, 6000 MiB, 1 gpu); commands joined with newlines, the folded one on one line
    "v2-single-gpu.yaml": (0, [res(1, 1, 1, 2, 3000, "gpu:1")],
                           ["'echo start on $(hostname)\ncd /tmp\npython -c",
                            """os.environ['\\''CUDA_VISIBLE_DEVICES'\\''])" --flag-one'\n)"""]),
    # 1 x (4 cpu, 8000, 2 gpu)
    "v1-single-role.json": (0, [res(1, 1, 1, 4, 2000, "gpu:2")], ["'python train.py --epochs 3'"]),
    # ps 2 x (2, 4000, 0): 2 per node; worker 3 x (4, 10000, 2): min(3, 4, 4, 6) = 3 -> gpu:6
    "v1-hetjob-with-comments.jsonc": (
        0, [res(1, 2, 2, 2, 2000, None), res(1, 3, 3, 4, 2500, "gpu:6")],
        ["DL_JOB_ENV=('lr=0.1' 'depth=20')", "DL_ROLE_MIN_SUCCEEDED=('-1' '3')", "DL_ROLE_PORTS=('grpc:1' '')"]),
    # chief 1 x (2, 4000, 1); worker 4 x (4, 16000, 2): min(4, 4, 4, 4) = 4 -> gpu:8
    "v2-hetjob-two-roles.yaml": (
        0, [res(1, 1, 1, 2, 2000, "gpu:1"), res(1, 4, 4, 4, 4000, "gpu:8")],
        ["DL_ROLE_NAME=('chief' 'worker')", "DL_ROLE_MIN_SUCCEEDED=('1' '-1')"]),
    # 2 x (4, 8000, 4): min(2, 2, 4, 8) = 2 -> gpu:8; parameters filled, $output.uri from the prerequisite
    "v2-parameters.yaml": (0, [res(1, 2, 2, 4, 2000, "gpu:8")],
                           ["'python train.py --model resnet18 --batch-size 32 --amp --seed 7 "
                            "--out /scratch/params-out'"]),
    # gangAllocation false: one array element per instance, 0-11
    "v2-no-gang-array.yaml": (0, [["--array=0-11", *res(1, 1, 1, 1, 2000, None)]], ["DL_GANG=0"]),
    "v2-secrets.yaml": (2, ["dlsubmit: commands reference $secrets (token); give their values with --secrets FILE"], []),
    # extras.gpuType a100 -> typed GRES
    "v2-container-registry-image.yaml": (0, [res(1, 1, 1, 4, 4000, "gpu:a100:2")], ["DL_CONTAINER='none'"]),
    "bad-template-not-yaml.yml": (2, ["bad-template-not-yaml.yml:2:8: YAML syntax error"], []),
    "bad-json-trailing-comma.json": (2, ["bad-json-trailing-comma.json:5:1: JSON syntax error"], []),
    "bad-fields.yaml": (2, ["dlsubmit: taskRoles.main.instances: must be an integer in 1..100000",
                            "dlsubmit: taskRoles.main.resourcePerInstance.gpu: must be an integer in 0..1024 or a fraction of one GPU (0 < gpu < 1, e.g. 0.5)",
                            "dlsubmit: taskRoles.main.commands: must not be empty"], []),
}


def test_table_covers_every_file() -> None:
    assert {p.name for p in SPECS.iterdir() if p.name != "README.md"} == set(TABLE)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_fixture_outcome(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, expected, texts = TABLE[name]
    rc = main(["--dry-run", str(SPECS / name)])
    out, err = capsys.readouterr()
    assert rc == status, err
    if status != 0:
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == len(expected)
        for line, want in zip(lines, expected):
            assert want in line
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


def test_secret_never_in_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The spec's secret is ``c2VjcmV0LXRva2Vu`` (base64 of ``secret-token``); the value given at
    submit time (``--secrets``) stays in the user's file: the script names the file and the key."""
    secrets = tmp_path / "secrets"
    secrets.write_text("token=given-at-submit\n")
    secrets.chmod(0o600)
    assert main(["--dry-run", "--secrets", str(secrets), str(SPECS / "v2-secrets.yaml")]) == 0
    out, err = capsys.readouterr()
    for value in ("c2VjcmV0LXRva2Vu", "secret-token", "given-at-submit"):
        assert value not in out
    assert f"DL_SECRETS_FILE='{secrets}'" in out and "DL_SECRET_NAMES=('token')" in out
    assert "secrets: values written in the spec are not used" in err


@pytest.mark.parametrize("runtime, image", [("pyxis", "--container-image=nvcr.io#nvidia/pytorch:23.10-py3"),
                                            ("apptainer", "docker://nvcr.io/nvidia/pytorch:23.10-py3")])
def test_container_runtimes_carry_the_image(runtime: str, image: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dry-run", "--container-runtime", runtime, str(SPECS / "v2-container-registry-image.yaml")]) == 0
    out = capsys.readouterr().out
    assert f"DL_CONTAINER='{runtime}'" in out
    assert image.split("=", 1)[-1] in out
