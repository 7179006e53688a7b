"""examples/specs/: every spec renders, the runnable ones name files that exist in the checkout,
and each container example is marked as one and renders for its runtime (a dry run is all
this machine can do with them; tests/live/test_examples_live.py runs the others)."""

from __future__ import annotations

from pathlib import Path

import pytest

from submit.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "examples" / "specs"
RUNNABLE = ["single-gpu.yaml", "ddp-2x2gpu.yaml", "hetjob-chief-workers.yaml"]
CONTAINER = {"pyxis-registry-image.yaml": ("pyxis", "nvcr.io#nvidia/pytorch:23.10-py3"),
             "container-apptainer.yaml": ("apptainer", "docker://pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime")}


SHARDED = ["half-gpu.yaml"]


def test_every_spec_is_listed() -> None:
    assert {p.name for p in SPECS.glob("*.yaml")} == set(RUNNABLE) | set(CONTAINER) | set(SHARDED) | {"ddp-torch-2x2.yaml"}


def test_half_gpu_spec_asks_for_half_the_shards_of_one_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    # 0.5 GPU x 4 shards per GPU = 2 shards; opportunistic goes into the marker
    assert main(["--dry-run", "--shards-per-gpu", "4", str(SPECS / "half-gpu.yaml")]) == 0
    out = capsys.readouterr().out
    assert "#SBATCH --gres=shard:2\n" in out
    assert "#SBATCH --comment=dl:v1;signal=USR2;grace=30;class=opportunistic\n" in out
    assert (ROOT / "examples" / "trainer.py").is_file()


def test_the_torch_ddp_spec_renders_two_nodes_of_two_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    """4 instances of 4 GPUs on nodes of 8 (the default shape): 2 nodes x 2 ranks, one srun task
    each (tests/live/test_ddp_live.py runs it)."""
    assert main(["--dry-run", str(SPECS / "ddp-torch-2x2.yaml")]) == 0
    out = capsys.readouterr().out
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks=4", "#SBATCH --ntasks-per-node=2", "#SBATCH --gres=gpu:8",
                 "#SBATCH --signal=B:USR2@20"):
        assert line in out.splitlines(), line
    assert ".venv/bin/python examples/ddp_train.py --steps 40 --step-s 0.5" in out
    assert (ROOT / "examples" / "ddp_train.py").is_file()


@pytest.mark.parametrize("name", RUNNABLE)
def test_runnable_spec_renders_and_its_program_exists(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dry-run", str(SPECS / name)]) == 0
    out = capsys.readouterr().out
    assert "DL_CONTAINER='none'" in out and ".venv/bin/python examples/trainer.py" in out
    assert (ROOT / "examples" / "trainer.py").is_file()
    assert "Runs as it is on the local cluster" in (SPECS / name).read_text()


@pytest.mark.parametrize("name", sorted(CONTAINER))
def test_container_example_is_marked_and_renders_for_its_runtime(name: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    runtime, image = CONTAINER[name]
    text = (SPECS / name).read_text()
    assert text.startswith("# CONTAINER EXAMPLE") and "does NOT run on the local dlcluster" in text
    assert main(["--dry-run", "--container-runtime", runtime, str(SPECS / name)]) == 0
    out = capsys.readouterr().out
    assert f"DL_CONTAINER='{runtime}'" in out and image in out
