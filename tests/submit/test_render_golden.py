"""Golden-file tests: the full script text for five specs, pinned (docs/design.md, "Tests").

The files in tests/golden/ were read line by line by a person when written; this test only
compares and never writes them. A mismatch prints a unified diff. To accept an intended change,
regenerate the file by hand (``dlsubmit --dry-run ... > tests/golden/NAME.sbatch``), read the
diff, and commit it. The scripts of runtime ``none`` also pass ``sbatch --test-only`` on the live
cluster (tests/live/test_submit_live.py). pyxis and apptainer cannot be installed on this machine:
their output is pinned here and checked with ``bash -n`` only. Four inputs are real specs of the
corpus (tests/corpus.py): those cases are ``corpus`` tests.
"""

from __future__ import annotations

import difflib

import pytest

from submit import load
from submit.options import RenderOptions
from submit.render import render_sbatch
from submit_helpers import GOLDEN_DIR, PAI_DIR, REPO, bash_syntax_ok

CASES = {
    "v2-pytorch-ddp-2x2gpu": (PAI_DIR / "v2-pytorch-ddp-nccl-2x2gpu-hived.yaml", RenderOptions()),
    "v1-tensorflow-hetjob": (PAI_DIR / "v1-tensorflow-distributed-cifar10.json", RenderOptions()),
    "v2-cpu-array": (PAI_DIR / "v2-cpu-500-tasks-no-gang.yaml", RenderOptions(partition="cpu")),
    "pyxis-registry-image": (REPO / "examples" / "specs" / "pyxis-registry-image.yaml",
                             RenderOptions(container_runtime="pyxis", partition="gpu")),
    "apptainer-hello-world": (PAI_DIR / "v2-hello-world-job.yaml",
                              RenderOptions(container_runtime="apptainer", output="logs/%x-%j.out",
                                            checkpoint_root="/shared/ckpt")),
}


def render_case(name: str) -> str:
    path, opts = CASES[name]
    return render_sbatch(load.load(path), opts)


CORPUS_CASES = {"v2-pytorch-ddp-2x2gpu", "v1-tensorflow-hetjob", "v2-cpu-array", "apptainer-hello-world"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.corpus) if n in CORPUS_CASES else n
                                  for n in sorted(CASES)])
def test_golden(name: str) -> None:
    got = render_case(name)
    want = (GOLDEN_DIR / f"{name}.sbatch").read_text(encoding="utf-8")
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            f"golden/{name}.sbatch", "rendered"))
        pytest.fail(f"rendered script differs from the golden file:\n{diff}", pytrace=False)
    ok, err = bash_syntax_ok(got)
    assert ok, err


def test_every_golden_file_has_a_case() -> None:
    assert {p.stem for p in GOLDEN_DIR.glob("*.sbatch")} == set(CASES)
