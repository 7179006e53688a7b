"""The real-world corpus layer of the tests: public files that live only beside the repository.

Our CI machines hold a folder of real public inputs next to the checkout (``../shared/data``:
OpenPAI job specs, ``nvidia-smi topo -m`` captures, gres.conf/slurm.conf files from real sites).
A user's clone does not have it, so the default suite never needs it: the behaviours are tested
on our own fixtures (tests/fixtures/), and the tests that run the real files as well are marked
``@pytest.mark.corpus``. tests/conftest.py leaves those out at collection when the folder is
absent (one summary line says how many); ``.ci/run`` refuses to start without it.

This module is the only place that names the folder. Its paths may not exist: use
:func:`files` for parametrisation (an empty list, never an error, when the folder is absent).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "data"
"""The corpus root (``../shared/data`` from the repository root)."""
PAI_JOBS = CORPUS / "pai-jobs"
TOPO = CORPUS / "topo"
SLURM_CONFIGS = CORPUS / "slurm-configs"


def present() -> bool:
    """True when the corpus folder exists beside the repository."""
    return CORPUS.is_dir()


def files(folder: Path, *suffixes: str) -> list[Path]:
    """The plain files of ``folder`` (README.md excluded) with one of ``suffixes`` (all when none
    given), sorted by name; [] when the folder is absent."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.name != "README.md" and (not suffixes or p.suffix in suffixes))
