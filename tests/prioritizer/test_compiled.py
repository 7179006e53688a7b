"""The compiled policy for replays (:mod:`prioritizer.compiled`, ``dlprio compile``).

Without a build: the fingerprint, where builds live, which builds count, and what
``DLPRIO_COMPILED`` does when there is none or it does not load (each ``dlprio`` run in a
subprocess, as users start it: the entry point activates before the policy is imported).

With a build (``slow``: mypyc compiles the policy once, about a minute; needs mypy, gcc and
the Python headers, which ``./test.sh`` installs): the regression fixtures of
``tests/prioritizer/sim/test_sim_regression.py`` are byte-identical from the compiled policy, the build is
really what runs, an edited source is never served a stale build, and the daemon's commands
never load it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prioritizer import compiled
from prioritizer.command import CliError
from regression_helpers import DEFAULT, ROOT, Case, read_fixture

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
    """A copy of ``prioritizer/policy``'s sources, ``fast/`` included (no data, no bytecode)."""
    source, target = compiled.policy_dir(), tmp / "policy"
    for path in source.rglob("*.py"):
        copy = target / path.relative_to(source)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
    return target


# ---------------------------------------------------------------------------- no build


def test_fingerprint_follows_every_policy_source(tmp_path: Path) -> None:
    copy = copy_policy(tmp_path)
    first = compiled.fingerprint(copy)
    assert first == compiled.fingerprint(compiled.policy_dir())
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    (copy / "notes.txt").write_text("not a source")
    assert compiled.fingerprint(copy) == first
    for name in ("decide.py", "fast/incremental.py", "model.py", "config.py"):  # compiled, or
        # compiled against
        path = copy / name
        original = path.read_bytes()
        path.write_bytes(original + b"# edited\n")
        assert compiled.fingerprint(copy) != first, name
        path.write_bytes(original)
    assert compiled.fingerprint(copy) == first
    # an editor's lock file (a dangling link) and backups are no modules: no change, no error
    (copy / ".#decide.py").symlink_to("root@host.12345:1700000000")
    (copy / ".decide.py").write_text("X = 1\n")
    assert compiled.fingerprint(copy) == first
    (copy / "new_rule.py").write_text("X = 1\n")
    assert compiled.fingerprint(copy) != first
    (copy / "new_rule.py").unlink()
    (copy / "gone.py").symlink_to(tmp_path / "nowhere.py")
    with pytest.raises(CliError, match=r"cannot read the policy source .*gone\.py") as bad:
        compiled.fingerprint(copy)
    assert bad.value.exit_code == 1


def test_compiled_root_order(tmp_path: Path) -> None:
    assert compiled.compiled_root({"DLPRIO_COMPILED_DIR": str(tmp_path / "x"),
                                   "XDG_CACHE_HOME": "/c"}) == tmp_path / "x"
    assert compiled.compiled_root({"XDG_CACHE_HOME": "/c"}) == Path(
        "/c/tiresias-slurm/compiled")
    home = Path("~/.cache/tiresias-slurm/compiled").expanduser()
    assert compiled.compiled_root({}) == home
    assert compiled.compiled_root({"DLPRIO_COMPILED_DIR": "  "}) == home   # blank: unset
    assert compiled.compiled_root({"XDG_CACHE_HOME": "rel/cache"}) == home   # XDG: ignored
    with pytest.raises(CliError, match=r"DLPRIO_COMPILED_DIR=builds: not an absolute path"):
        compiled.compiled_root({"DLPRIO_COMPILED_DIR": "builds"})


def fake_build(directory: Path, names: tuple[str, ...] = compiled.MODULES,
               fingerprint: str | None = None) -> None:
    """A build directory whose files are not extensions (for the loader's refusals)."""
    directory.mkdir(parents=True)
    files = {name: f"{name}.so" for name in names}
    for file in files.values():
        (directory / file).write_bytes(b"not an ELF file")
    sums = {file: hashlib.sha256(b"not an ELF file").hexdigest() for file in files.values()}
    (directory / compiled.MANIFEST).write_text(json.dumps(
        {"fingerprint": fingerprint or directory.name, "files": files, "sha256": sums}))


def edit_manifest(directory: Path, **changes: object) -> None:
    manifest = directory / compiled.MANIFEST
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), **changes}))


def test_inspect_names_what_is_wrong_with_a_build(tmp_path: Path) -> None:
    good = tmp_path / "a"
    fake_build(good)
    files, problem = compiled.inspect(good)
    assert set(files or {}) == set(compiled.MODULES) and problem == ""
    assert compiled.inspect(tmp_path / "absent") == (None, "")
    first = f"{compiled.MODULES[0]}.so"

    def damaged(name: str) -> str:
        files, problem = compiled.inspect(tmp_path / name)
        assert files is None and compiled.read_build(tmp_path / name) is None
        return problem

    fake_build(tmp_path / "other", fingerprint="f" * 64)   # moved from another fingerprint
    assert damaged("other") == "manifest.json is not this build's"
    fake_build(tmp_path / "short", names=compiled.MODULES[:-1])
    assert damaged("short") == "manifest.json does not list the policy modules"
    fake_build(tmp_path / "gone")
    (tmp_path / "gone" / first).unlink()
    assert damaged("gone") == f"{first} is not a regular file"
    fake_build(tmp_path / "cut")   # a truncated extension: SIGBUS when mapped, so refused
    (tmp_path / "cut" / first).write_bytes(b"not an")
    assert damaged("cut") == f"{first} is not the file that was built"
    fake_build(tmp_path / "link")
    (tmp_path / "outside.so").write_bytes(b"not an ELF file")
    (tmp_path / "link" / first).unlink()
    (tmp_path / "link" / first).symlink_to(tmp_path / "outside.so")
    assert damaged("link") == f"{first} is not a regular file"
    (tmp_path / "none").mkdir()
    assert damaged("none") == "no manifest.json"
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / compiled.MANIFEST).write_text("{not json")
    assert damaged("broken") == "manifest.json unreadable (JSONDecodeError)"
    for name, file, problem in (
            ("json", "json.so", "manifest.json names 'json', which is not a policy module"),
            (compiled.MODULES[0], "../a/x.so",
             "manifest.json names a file outside the build: '../a/x.so'"),
            ("0abc__mypyc", "/etc/passwd",
             "manifest.json names a file outside the build: '/etc/passwd'"),
            (compiled.MODULES[1], "..", "manifest.json names a file outside the build: '..'"),
            (compiled.MODULES[1], "a\0b",
             "manifest.json names a file outside the build: 'a\\x00b'")):
        odd = tmp_path / f"odd-{len(list(tmp_path.iterdir()))}"
        fake_build(odd, names=(*compiled.MODULES, name))
        listed = json.loads((odd / compiled.MANIFEST).read_text())["files"]
        edit_manifest(odd, files={**listed, name: file})
        assert damaged(odd.name) == problem, name
    fake_build(tmp_path / "shared", names=(*compiled.MODULES, "0abc__mypyc"))
    assert "0abc__mypyc" in (compiled.read_build(tmp_path / "shared") or {})


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


#: user 2 (tenant B) submits four 1-GPU jobs of 1000 s at 0, user 1 (tenant A) one 2-GPU job
#: of 500 s at 100 (the reclaim of tests/prioritizer/sim/test_simulate_tenants.py: on 1 node x
#: 4 GPUs without costs A takes 2 GPUs back from B at 100; avg JCT 1100 s, 2 preemptions)
TENANT_TRACE = ("u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
                "0,2,1,0,1,0,1000,0,Pass\n1,2,1,0,1,0,1000,0,Pass\n2,2,1,0,1,0,1000,0,Pass\n"
                "3,2,1,0,1,0,1000,0,Pass\n4,1,2,0,1,100,500,0,Pass\n")
TENANTS = ('virtual_clusters:\n  A: {users: ["1"], guaranteed_gpus: 2}\n'
           '  B: {users: ["2"], guaranteed_gpus: 2}\n')


def tenant_replay(tmp_path: Path, env: dict[str, str],
                  tenants_flag: str = "--tenants") -> subprocess.CompletedProcess[str]:
    """``dlprio simulate --tenants`` of :data:`TENANT_TRACE` (``--tenants=FILE`` when
    ``tenants_flag`` ends in ``=``)."""
    (tmp_path / "t.csv").write_text(TENANT_TRACE)
    (tmp_path / "ten.yaml").write_text(TENANTS)
    flag = [tenants_flag + "ten.yaml"] if tenants_flag.endswith("=") else [tenants_flag,
                                                                          "ten.yaml"]
    return dlprio(["simulate", "--trace", "t.csv", "--nodes", "1", "--gpus-per-node", "4",
                   "--zero-cost", *flag, "--json"], env, tmp_path)


def test_tenants_with_compiled_on_names_the_fix(tmp_path: Path) -> None:
    """The tenant replay extends the scheduler in Python, which a compiled class refuses, so
    it runs the interpreted policy: ``on`` (it must be the compiled one) is refused."""
    done = tenant_replay(tmp_path, {"DLPRIO_COMPILED": "on",
                                    "DLPRIO_COMPILED_DIR": str(tmp_path / "none")})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("dlprio: DLPRIO_COMPILED=on: simulate --tenants replays with the "
                           "interpreted policy (its tenant scheduler extends the policy's in "
                           "Python, which a compiled class does not allow); set "
                           "DLPRIO_COMPILED=auto or off\n")


@pytest.mark.parametrize(("env", "message"), [
    ({"DLPRIO_COMPILED": "1"}, "dlprio: DLPRIO_COMPILED='1': not a mode; valid: auto, on, off\n"),
    ({"DLPRIO_COMPILED": " on"},
     "dlprio: DLPRIO_COMPILED=' on': not a mode; valid: auto, on, off\n"),
    ({"DLPRIO_COMPILED_DIR": "rel/builds"},
     "dlprio: DLPRIO_COMPILED_DIR=rel/builds: not an absolute path; give the directory from / "
     "(every replay of a sweep must find it)\n"),
], ids=["mode", "spaced-mode", "relative-dir"])
def test_bad_settings_are_refused_before_the_replay(tmp_path: Path, env: dict[str, str],
                                                    message: str) -> None:
    done = dlprio(SMALL.argv(str(tmp_path / "jobs.csv")), env, tmp_path)
    assert (done.returncode, done.stderr) == (2, message)
    assert not (tmp_path / "jobs.csv").exists()


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


def test_a_damaged_build_is_named_and_not_loaded(tmp_path: Path) -> None:
    root = tmp_path / "builds"
    here = root / compiled.fingerprint()
    fake_build(here)
    (here / f"{compiled.MODULES[1]}.so").write_bytes(b"cut")
    env = {"DLPRIO_COMPILED_DIR": str(root)}
    out = tmp_path / "jobs.csv"
    done = dlprio(SMALL.argv(str(out)), env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"dlprio: the compiled policy in {here} is damaged "
                           f"({compiled.MODULES[1]}.so is not the file that was built); using "
                           "the interpreted policy (`dlprio compile --force` rebuilds it)\n")
    assert out.read_bytes() == read_fixture(SMALL.fixture)
    out.unlink()
    done = dlprio(SMALL.argv(str(out)), {**env, "DLPRIO_COMPILED": "on"}, tmp_path)
    assert done.returncode == 2 and "is damaged" in done.stderr and not out.exists()
    status = dlprio(["compile", "--status"], env, tmp_path)
    assert status.returncode == 1
    assert status.stdout.startswith(f"dlprio compile: the build in {here} is damaged (")


def test_an_unreadable_policy_source_falls_back(tmp_path: Path) -> None:
    """A source that cannot be read (a dangling ``x.py``) cannot be fingerprinted: ``auto``
    says so and replays interpreted; an editor's lock file ``.#x.py`` is no source at all."""
    tree = tmp_path / "checkout"
    for package in ("prioritizer", "slurm_plugin"):
        shutil.copytree(ROOT / package, tree / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    policy = tree / "prioritizer" / "policy"
    (policy / ".#decide.py").symlink_to("root@host.12345:1700000000")
    env = {"DLPRIO_COMPILED_DIR": str(tmp_path / "builds")}
    out = tmp_path / "jobs.csv"
    done = dlprio(SMALL.argv(str(out)), env, tmp_path, tree)
    assert (done.returncode, done.stderr) == (0, "")
    (policy / "gone.py").symlink_to(tmp_path / "nowhere.py")
    done = dlprio(SMALL.argv(str(out)), env, tmp_path, tree)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"dlprio: cannot read the policy source {policy / 'gone.py'} "
                                  "(No such file or directory); using the interpreted policy")
    assert out.read_bytes() == read_fixture(SMALL.fixture)
    status = dlprio(["compile", "--status"], env, tmp_path, tree)
    assert status.returncode == 1 and "Traceback" not in status.stderr
    assert "cannot read the policy source" in status.stderr


@pytest.mark.parametrize(("blocked", "missing"), [
    ("'mypy', 'mypyc', 'mypyc.build'", "mypy"), ("'setuptools'", "setuptools"),
    ("'mypy', 'mypyc', 'mypyc.build', 'setuptools'", "mypy and setuptools")])
def test_compile_without_its_tools_names_the_install(tmp_path: Path, blocked: str,
                                                     missing: str) -> None:
    code = (f"import sys\nfor m in ({blocked},):\n    sys.modules[m] = None\n"
            "from prioritizer import cli\nsys.argv = ['dlprio', 'compile']\n"
            "sys.exit(cli.entry())\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), DLPRIO_COMPILED_DIR=str(tmp_path / "b"))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr == (
        f"dlprio: building the compiled policy needs {missing}: pip install -e '.[compiled]' "
        "in a checkout (pip install 'tiresias-slurm[compiled]' otherwise), and a C compiler "
        "with the Python headers (Debian: apt-get install gcc libc6-dev python3-dev)\n")
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("where", ["a-file", "a-file/sub", "/proc/dlprio-builds"])
def test_compile_into_a_place_it_cannot_write(tmp_path: Path, where: str) -> None:
    (tmp_path / "a-file").write_text("")
    root = tmp_path / where
    done = dlprio(["compile"], {"DLPRIO_COMPILED_DIR": str(root)}, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"dlprio: build directory {root}: ")
    assert done.stderr.endswith("; set DLPRIO_COMPILED_DIR to a directory you can write\n")
    assert done.stderr.count("\n") == 1


def test_status_without_a_build(tmp_path: Path) -> None:
    root = tmp_path / "builds"
    fake_build(root / ("0" * 64))
    done = dlprio(["compile", "--status"], {"DLPRIO_COMPILED_DIR": str(root)}, tmp_path)
    assert done.returncode == 1
    assert f"no build for these sources (fingerprint {compiled.fingerprint()[:12]})" \
        in done.stdout
    assert "builds for other sources: 000000000000" in done.stdout
    both = dlprio(["compile", "--status", "--prune"], {"DLPRIO_COMPILED_DIR": str(root)},
                  tmp_path)
    assert (both.returncode, both.stderr) == (
        2, "dlprio: --status builds and removes nothing: leave out --force and --prune\n")
    assert (root / ("0" * 64)).is_dir()


def test_prune_removes_builds_and_leftovers_only(tmp_path: Path) -> None:
    keep, old = "a" * 64, "b" * 64
    for name in (keep, old):
        fake_build(tmp_path / name)
    (tmp_path / "build-failed-bbbbbbbbbbbb.log").write_text("log")
    (tmp_path / "notes").mkdir()
    (tmp_path / "README").write_text("a shared directory's own file")
    (tmp_path / ("c" * 64)).symlink_to(tmp_path / "notes")
    (tmp_path / ("d" * 64)).mkdir()   # named like a build, but no manifest names it: kept
    (tmp_path / ("d" * 64) / "data.txt").write_text("precious")
    (tmp_path / ".build-killed").mkdir()   # work of a build killed an hour ago and more
    (tmp_path / ".build-running").mkdir()   # work of a build in progress
    now = (tmp_path / ".build-running").stat().st_mtime
    os.utime(tmp_path / ".build-killed", (now - compiled.STALE_WORK_S - 1,) * 2)
    removed = compiled.prune(tmp_path, keep=keep, now=now)
    assert removed == [tmp_path / ".build-killed", tmp_path / old,
                       tmp_path / "build-failed-bbbbbbbbbbbb.log"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".build-running", "README", "a" * 64, "c" * 64, "d" * 64, "notes"])
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
    assert f"removed 1 other build(s), log(s) and work director(ies) from {build_root}" \
        in pruned.stdout
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
@pytest.mark.parametrize("flag", ["--tenants", "--tenants="])
def test_a_tenant_replay_runs_beside_a_build(build_root: Path, tmp_path: Path,
                                             flag: str) -> None:
    """With a current build (``auto``), ``simulate --tenants`` replays with the interpreted
    policy: the reclaim of :data:`TENANT_TRACE`, not mypyc's "interpreted classes cannot
    inherit from compiled"."""
    done = tenant_replay(tmp_path, {"DLPRIO_COMPILED_DIR": str(build_root)}, flag)
    assert (done.returncode, done.stderr) == (0, "")
    out = json.loads(done.stdout)[0]
    assert (out["avg_jct_s"], out["preemptions"]) == (1100.0, 2)


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


@pytest.mark.slow
def test_a_stopped_compile_leaves_nothing_behind(tmp_path: Path) -> None:
    """SIGTERM while mypyc runs: the compile and the compilers it started stop, its work
    directory goes, no build appears, and the exit status is the signal's (143)."""
    root = tmp_path / "builds"
    env = dict(os.environ, PYTHONPATH=str(ROOT), DLPRIO_COMPILED_DIR=str(root))
    proc = subprocess.Popen([sys.executable, "-m", "prioritizer.cli", "compile"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(root.glob(".build-*/build.log")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2)   # mypy is type-checking by now
    assert proc.poll() is None, proc.communicate()
    assert working_in(root), "the compile should be running in the build directory"
    proc.send_signal(signal.SIGTERM)
    # stopped, not waited for: the compile left has tens of seconds of work (a limit on
    # stopping, not a speed figure)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 143, (out, err)
    assert list(root.iterdir()) == []
    time.sleep(1)
    assert working_in(root) == []


def working_in(root: Path) -> list[int]:
    """Processes whose working directory lies under ``root`` (the compile runs mypy and gcc
    in ``root/.build-*/src``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd").startswith(str(root)):
                found.append(int(entry.name))
        except OSError:   # gone, or not ours to read
            continue
    return found


@pytest.mark.slow
def test_a_compiler_that_fails_is_named_with_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "builds"
    done = dlprio(["compile"], {"DLPRIO_COMPILED_DIR": str(root), "CC": "false"}, tmp_path)
    assert done.returncode == 1, done.stderr
    log = next(root.glob("build-failed-*.log"))
    assert done.stderr.startswith(f"dlprio: mypyc could not compile the policy (full log: {log}):")
    assert done.stderr.endswith(
        "dlprio: the C compiler did not run: install gcc and the Python headers (Debian: "
        "apt-get install gcc libc6-dev python3-dev), or name a compiler in CC\n")
    assert [p.name for p in root.iterdir()] == [log.name]   # no work left, no build
