"""Shared test set-up: the hypothesis CI profile and the live-cluster guard.

Tests marked ``@pytest.mark.live`` talk to the real Slurm cluster that ``SLURM_CONF`` names
(default ``/etc/slurm/slurm.conf``, the cluster ``dlcluster up`` starts; ``.ci/run`` and
``./test.sh`` start it). When no cluster answers, a live test fails with a message saying how to
start one; it is never skipped. ``pytest -m "not live"`` runs the pure tests alone.

Tests marked ``@pytest.mark.torch`` need PyTorch (the ``.[torch]`` extra, which ``./test.sh``
installs with scripts/install-torch.sh). Their modules import it only where it is installed
(:data:`TORCH`), so that a venv without it still collects every other test; there each such
test fails with the command that installs it, never skipped.

Tests marked ``@pytest.mark.corpus`` read the real-world corpus beside the repository
(tests/corpus.py). Where it is absent (a user's clone) they are deselected at collection, never
skipped, and the run ends with one line saying how many and where the corpus exists.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

#: SIGTERM unwinds the running test and tears fixtures down (tests/sigterm_teardown.py)
pytest_plugins = ["sigterm_teardown"]

settings.register_profile(
    "ci", deadline=None, derandomize=True, max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

_live_ok: bool | None = None
_corpus_left_out = 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    global _corpus_left_out
    import corpus

    if corpus.present():
        return
    left = [item for item in items if item.get_closest_marker("corpus") is not None]
    if left:
        items[:] = [item for item in items if item.get_closest_marker("corpus") is None]
        config.hook.pytest_deselected(items=left)
    _corpus_left_out = len(left)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _corpus_left_out:
        terminalreporter.write_line(
            f"{_corpus_left_out} corpus tests not collected: ../shared/data is absent (the real-world "
            "corpus exists on the project's CI machines; the default tests use tests/fixtures/)")


@pytest.fixture(autouse=True)
def _require_live_cluster(request: pytest.FixtureRequest) -> None:
    global _live_ok
    if request.node.get_closest_marker("live") is None:
        return
    if _live_ok is None:
        from slurm_plugin.slurm.client import SlurmClient

        _live_ok = SlurmClient(timeout_s=10).ping()
    if not _live_ok:
        pytest.fail(
            f"no live Slurm cluster answers (SLURM_CONF={os.environ.get('SLURM_CONF', '/etc/slurm/slurm.conf')}); "
            "start one with `sudo .venv/bin/dlcluster up` or run `pytest -m 'not live'`",
            pytrace=False,
        )


@pytest.fixture(autouse=True, scope="module")
def _require_torch(request: pytest.FixtureRequest) -> None:
    """Fail a ``torch`` module's tests, before its other module fixtures (a cluster) start,
    where PyTorch is not installed."""
    from torch_check import TORCH

    if TORCH or request.node.get_closest_marker("torch") is None:
        return
    pytest.fail("PyTorch is not installed in this venv: run scripts/install-torch.sh (./test.sh "
                "runs it), or `pytest -m 'not torch'`", pytrace=False)


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def slurm_release() -> tuple[int, int]:
    """``(major, minor)`` of the live cluster's Slurm (``squeue --version`` of the commands on
    PATH): the one place a live test learns the release it runs on (./test.sh runs the live
    subset on every release it brings up)."""
    from slurm_plugin.slurm.client import SlurmClient

    return SlurmClient(timeout_s=10).slurm_release().version


@pytest.fixture(autouse=True, scope="module")
def _no_slurm_output_in_the_checkout() -> Iterator[None]:
    """A job submitted without ``--output`` writes ``slurm-N.out`` into the directory it was
    submitted from, here the checkout: a module that leaves one there fails, naming it (its jobs
    give ``--output``, or run from a temporary directory)."""
    before = set(REPO.glob("slurm-*.out"))
    yield
    left = sorted(p.name for p in set(REPO.glob("slurm-*.out")) - before)
    if left:
        pytest.fail(f"left in the checkout: {', '.join(left)} (a job without --output)",
                    pytrace=False)


@pytest.fixture(autouse=True)
def _no_node_shapes_from_slurm(request: pytest.FixtureRequest,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside live tests, dlsubmit's question for the cluster's node shapes
    (submit/node_shape.py) finds no Slurm, as on a machine without a cluster, so a pure test
    that fakes ``sbatch`` packs for the same defaults whatever cluster runs beside it."""
    cli = sys.modules.get("submit.cli")
    if request.node.get_closest_marker("live") is not None or cli is None:
        return
    from slurm_plugin.slurm.client import SlurmUnreachable

    def unreachable(partition: str | None) -> None:
        raise SlurmUnreachable(["sinfo", "--json"], "no cluster in pure tests")

    monkeypatch.setattr(cli, "_cluster_nodes", lambda: unreachable)


@pytest.fixture(autouse=True)
def _keep_slurm_conf() -> Iterator[None]:
    """A test (or code it calls in-process) that repoints SLURM_CONF must not move later tests
    to another cluster: restore the value the session started with."""
    before = os.environ.get("SLURM_CONF")
    yield
    if os.environ.get("SLURM_CONF") != before:
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before
