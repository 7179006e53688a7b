"""The compiled policy for replays (:mod:`prioritizer.compiled`, ``dlprio compile``).

Without a build: the fingerprint, where builds live, which builds count, and what
``DLPRIO_COMPILED`` does when there is none or it does not load (each ``dlprio`` run in a
subprocess, as users start it: the entry point activates before the policy is imported).

With a build (``slow``: mypyc compiles the policy once, about a minute; needs mypy, gcc and
the Python headers, which ``./test.sh`` installs): the regression fixtures of
``tests/test_sim_regression.py`` are byte-identical from the compiled policy, the build is
really what runs, an edited source is never served a stale build, and the daemon's commands
never load it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from prioritizer import compiled
from prioritizer.command import CliError
from regression_helpers import ROOT, Case, read_fixture
from test_sim_regression import DEFAULT

SMALL = Case("60job-n2g4", "count", "costs", "srtf")


def dlprio(args: list[str], env: dict[str, str], cwd: Path,
           pythonpath: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``dlprio ARGS`` as the console script runs it (``python -m prioritizer.cli``)."""
    full = dict(os.environ, PYTHONPATH=str(pythonpath), **env)
    return subprocess.run([sys.executable, "-m", "prioritizer.cli", *args], cwd=cwd,
                          env=full, capture_output=True, text=True, check=False)


def policy_file(env: dict[str, str], cwd: Path, command: list[str],
                pythonpath: Path = ROOT) -> str:
    """The file ``prioritizer.policy.decide`` was loaded from after ``entry()`` ran
    ``command`` in a fresh interpreter (``--help`` commands end in SystemExit)."""
    code = ("import sys\nfrom prioritizer import cli\nsys.argv = ['dlprio', *sys.argv[1:]]\n"
            "try:\n    cli.entry()\nexcept SystemExit:\n    pass\n"
            "import prioritizer.policy.decide as d\nprint(d.__file__)\n")
    full = dict(os.environ, PYTHONPATH=str(pythonpath), **env)
    done = subprocess.run([sys.executable, "-c", code, *command], cwd=cwd, env=full,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def copy_policy(tmp: Path) -> Path:
    """A copy of ``prioritizer/policy``'s sources (no data, no bytecode)."""
    target = tmp / "policy"
    target.mkdir()
    for path in compiled.policy_dir().glob("*.py"):
        shutil.copy2(path, target / path.name)
    return target


# ---------------------------------------------------------------------------- no build


def test_fingerprint_follows_every_policy_source(tmp_path: Path) -> None:
    copy = copy_policy(tmp_path)
    first = compiled.fingerprint(copy)
    assert first == compiled.fingerprint(compiled.policy_dir())
    assert len(first) == 64 and int(first, 16) >= 0
    (copy / "notes.txt").write_text("not a source")
    assert compiled.fingerprint(copy) == first
    for name in ("decide.py", "model.py", "config.py"):   # compiled, and compiled against
        path = copy / name
        original = path.read_bytes()
        path.write_bytes(original + b"# edited\n")
        assert compiled.fingerprint(copy) != first, name
        path.write_bytes(original)
    assert compiled.fingerprint(copy) == first
    (copy / "new_rule.py").write_text("X = 1\n")
    assert compiled.fingerprint(copy) != first


def test_compiled_root_order(tmp_path: Path) -> None:
    assert compiled.compiled_root({"DLPRIO_COMPILED_DIR": str(tmp_path / "x"),
                                   "XDG_CACHE_HOME": "/c"}) == tmp_path / "x"
    assert compiled.compiled_root({"XDG_CACHE_HOME": "/c"}) == Path(
        "/c/tiresias-slurm/compiled")
    assert compiled.compiled_root({}) == Path(
        "~/.cache/tiresias-slurm/compiled").expanduser()


def fake_build(directory: Path, names: tuple[str, ...] = compiled.MODULES,
               fingerprint: str | None = None) -> None:
    """A build directory whose files are not extensions (for the loader's refusals)."""
    directory.mkdir(parents=True)
    files = {name: f"{name}.so" for name in names}
    for file in files.values():
        (directory / file).write_bytes(b"not an ELF file")
    (directory / compiled.MANIFEST).write_text(json.dumps(
        {"fingerprint": fingerprint or directory.name, "files": files}))


def test_read_build_needs_a_complete_manifest(tmp_path: Path) -> None:
    good = tmp_path / "a"
    fake_build(good)
    assert set(compiled.read_build(good) or {}) == set(compiled.MODULES)
    assert compiled.read_build(tmp_path / "absent") is None
    fake_build(tmp_path / "other", fingerprint="f" * 64)   # moved from another fingerprint
    assert compiled.read_build(tmp_path / "other") is None
    fake_build(tmp_path / "short", names=compiled.MODULES[:-1])
    assert compiled.read_build(tmp_path / "short") is None
    fake_build(tmp_path / "gone")
    (tmp_path / "gone" / f"{compiled.MODULES[0]}.so").unlink()
    assert compiled.read_build(tmp_path / "gone") is None
    for name, file in (("json", "json.so"), (compiled.MODULES[0], "../a/x.so"),
                       ("0abc__mypyc", "/etc/passwd")):
        fake_build(tmp_path / f"odd-{name}", names=(*compiled.MODULES, name))
        manifest = tmp_path / f"odd-{name}" / compiled.MANIFEST
        data = json.loads(manifest.read_text())
        data["files"][name] = file
        manifest.write_text(json.dumps(data))
        assert compiled.read_build(tmp_path / f"odd-{name}") is None, name
    fake_build(tmp_path / "shared", names=(*compiled.MODULES, "0abc__mypyc"))
    assert "0abc__mypyc" in (compiled.read_build(tmp_path / "shared") or {})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / compiled.MANIFEST).write_text("{not json")
    assert compiled.read_build(tmp_path / "broken") is None


def test_activate_modes_in_process() -> None:
    import prioritizer.policy.decide  # noqa: F401  (imported: the process keeps it)

    assert compiled.activate({"DLPRIO_COMPILED": "off"}) == "interpreted"
    assert compiled.activate({"DLPRIO_COMPILED": "auto"}) == "interpreted"
    assert compiled.activate({}) == "interpreted"
    with pytest.raises(CliError, match="imported before") as on:
        compiled.activate({"DLPRIO_COMPILED": "on"})
    assert on.value.exit_code == 2
    with pytest.raises(CliError, match=r"DLPRIO_COMPILED='yes': not a mode; valid: auto, "
                                       r"on, off"):
        compiled.activate({"DLPRIO_COMPILED": "yes"})


def test_on_without_a_build_names_the_fix(tmp_path: Path) -> None:
    out = tmp_path / "jobs.csv"
    done = dlprio(SMALL.argv(str(out)), {"DLPRIO_COMPILED": "on",
                                         "DLPRIO_COMPILED_DIR": str(tmp_path / "none")},
                  tmp_path)
    assert done.returncode == 2
    assert "dlprio: DLPRIO_COMPILED=on: no compiled policy for these sources in " \
           f"{tmp_path / 'none'}" in done.stderr
    assert "build it with `dlprio compile`" in done.stderr
    assert not out.exists()


def test_unknown_mode_is_refused_before_the_replay(tmp_path: Path) -> None:
    done = dlprio(SMALL.argv(str(tmp_path / "jobs.csv")), {"DLPRIO_COMPILED": "1"},
                  tmp_path)
    assert done.returncode == 2
    assert done.stderr == "dlprio: DLPRIO_COMPILED='1': not a mode; valid: auto, on, off\n"


def test_a_build_that_does_not_load(tmp_path: Path) -> None:
    """``auto`` warns and replays with the interpreted policy (same CSV); ``on`` refuses."""
    root = tmp_path / "builds"
    fake_build(root / compiled.fingerprint())
    env = {"DLPRIO_COMPILED_DIR": str(root)}
    out = tmp_path / "jobs.csv"
    done = dlprio(SMALL.argv(str(out)), env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"the compiled policy in {root / compiled.fingerprint()} does not load" \
        in done.stderr
    assert "using the interpreted policy" in done.stderr
    assert out.read_bytes() == read_fixture(SMALL.fixture)
    assert policy_file(env, tmp_path, ["simulate", "--help"]).endswith("decide.py")
    out.unlink()
    done = dlprio(SMALL.argv(str(out)), {**env, "DLPRIO_COMPILED": "on"}, tmp_path)
    assert done.returncode == 2
    assert "DLPRIO_COMPILED=on: the compiled policy in" in done.stderr
    assert "`dlprio compile --force`" in done.stderr
    assert not out.exists()


def test_compile_without_mypy_names_the_install(tmp_path: Path) -> None:
    code = ("import sys\nsys.modules['mypy'] = None\nfrom prioritizer import cli\n"
            "sys.argv = ['dlprio', 'compile']\nsys.exit(cli.entry())\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), DLPRIO_COMPILED_DIR=str(tmp_path / "b"))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "building the compiled policy needs mypy: pip install " \
           "'tiresias-slurm[compiled]'" in done.stderr
    assert "apt-get install gcc libc6-dev python3-dev" in done.stderr
    assert not (tmp_path / "b").exists()


def test_status_without_a_build(tmp_path: Path) -> None:
    root = tmp_path / "builds"
    fake_build(root / ("0" * 64))
    done = dlprio(["compile", "--status"], {"DLPRIO_COMPILED_DIR": str(root)}, tmp_path)
    assert done.returncode == 1
    assert f"no build for these sources (fingerprint {compiled.fingerprint()[:12]})" \
        in done.stdout
    assert "builds for other sources: 000000000000" in done.stdout


def test_prune_keeps_the_current_build_and_foreign_files(tmp_path: Path) -> None:
    keep, old = "a" * 64, "b" * 64
    for name in (keep, old):
        fake_build(tmp_path / name)
    (tmp_path / "build-failed-bbbbbbbbbbbb.log").write_text("log")
    (tmp_path / "notes").mkdir()
    (tmp_path / "README").write_text("a shared directory's own file")
    (tmp_path / ("c" * 64)).symlink_to(tmp_path / "notes")
    removed = compiled.prune(tmp_path, keep=keep)
    assert removed == [tmp_path / old, tmp_path / "build-failed-bbbbbbbbbbbb.log"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["README", "a" * 64, "c" * 64, "notes"])
    assert compiled.prune(tmp_path / "absent", keep=keep) == []


# ---------------------------------------------------------------------------- one build


@pytest.fixture(scope="module")
def build_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compiled")
    done = dlprio(["compile"], {"DLPRIO_COMPILED_DIR": str(root)}, root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"dlprio compile: built the compiled policy in {root}/")
    # no mypyc warning: "Treating generator comprehension as list" made fifo replays 4x slower
    assert done.stderr == ""
    return root


@pytest.mark.slow
def test_the_build_is_what_replays_run(build_root: Path, tmp_path: Path) -> None:
    env = {"DLPRIO_COMPILED_DIR": str(build_root)}
    build = build_root / compiled.fingerprint()
    manifest = json.loads((build / compiled.MANIFEST).read_text())
    assert manifest["fingerprint"] == build.name
    assert set(compiled.MODULES) < set(manifest["files"])   # and mypyc's shared module
    assert sorted(p.name for p in build_root.iterdir()) == [build.name]   # no leftovers
    again = dlprio(["compile"], env, tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("dlprio compile: up to date: ")
    assert dlprio(["compile", "--status"], env, tmp_path).returncode == 0
    fake_build(build_root / ("e" * 64))
    pruned = dlprio(["compile", "--prune"], env, tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    assert f"removed 1 other build(s) and log(s) from {build_root}" in pruned.stdout
    assert sorted(p.name for p in build_root.iterdir()) == [build.name]
    for command in (["simulate", "--help"], ["tune", "--help"], ["history", "--help"]):
        assert policy_file(env, tmp_path, command) == str(
            build / manifest["files"]["prioritizer.policy.decide"]), command
    assert policy_file({**env, "DLPRIO_COMPILED": "off"}, tmp_path,
                       ["simulate", "--help"]).endswith("decide.py")
    for command in (["run", "--help"], ["once", "--help"], ["explain", "--help"]):
        assert policy_file({**env, "DLPRIO_COMPILED": "on"}, tmp_path,
                           command).endswith("decide.py"), command


@pytest.mark.slow
@pytest.mark.parametrize("case", DEFAULT, ids=[c.name for c in DEFAULT])
def test_compiled_jobs_csv_is_byte_identical(case: Case, build_root: Path,
                                             tmp_path: Path) -> None:
    out = tmp_path / "jobs.csv"
    done = dlprio(case.argv(str(out)), {"DLPRIO_COMPILED": "on",
                                        "DLPRIO_COMPILED_DIR": str(build_root)}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == read_fixture(case.fixture), f"{case.name} differs"


@pytest.mark.slow
def test_an_edited_policy_is_never_served_the_old_build(build_root: Path,
                                                        tmp_path: Path) -> None:
    """A checkout whose policy differs by one comment: ``auto`` runs its own source,
    ``--status`` says there is no build for it, and ``on`` refuses."""
    tree = tmp_path / "checkout"
    for package in ("prioritizer", "slurm_plugin"):
        shutil.copytree(ROOT / package, tree / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    decide = tree / "prioritizer" / "policy" / "decide.py"
    decide.write_text(decide.read_text() + "# a comment\n")
    env = {"DLPRIO_COMPILED_DIR": str(build_root)}
    assert policy_file(env, tmp_path, ["simulate", "--help"], tree) == str(decide)
    status = dlprio(["compile", "--status"], env, tmp_path, tree)
    assert status.returncode == 1
    assert f"builds for other sources: {compiled.fingerprint()[:12]}" in status.stdout
    out = tmp_path / "jobs.csv"
    done = dlprio(SMALL.argv(str(out)), {**env, "DLPRIO_COMPILED": "on"}, tmp_path, tree)
    assert done.returncode == 2 and "no compiled policy for these sources" in done.stderr


@pytest.mark.slow
def test_a_tune_array_task_runs_the_build(build_root: Path, tmp_path: Path) -> None:
    """``dlprio tune --executor slurm``'s array task (``python -m prioritizer.tune.task``)
    imports the build first: with ``on`` it would exit 2 had the policy loaded before."""
    import dataclasses

    from prioritizer.policy.config import PolicyConfig
    from prioritizer.sim.engine import Cluster
    from prioritizer.tune.rank import make_task, run_task

    task = make_task(str(ROOT / "data" / "traces" / "tiresias" / "60_job.csv"), None, (None, None),
                     Cluster(nodes=2, gpus_per_node=4, placement="count"),
                     PolicyConfig(policy="tiresias-las"))
    (tmp_path / "tasks.json").write_text(json.dumps([dataclasses.asdict(task)]))
    env = dict(os.environ, PYTHONPATH=str(ROOT), DLPRIO_COMPILED="on",
               DLPRIO_COMPILED_DIR=str(build_root))
    done = subprocess.run([sys.executable, "-m", "prioritizer.tune.task", str(tmp_path), "0"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "result-0.json").read_text()) == run_task(task)
    env["DLPRIO_COMPILED_DIR"] = str(tmp_path / "none")
    done = subprocess.run([sys.executable, "-m", "prioritizer.tune.task", str(tmp_path), "0"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("dlprio tune task: DLPRIO_COMPILED=on: no compiled policy")
