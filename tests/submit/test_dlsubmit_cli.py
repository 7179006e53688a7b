"""The ``dlsubmit`` command in-process: options, output forms and exit statuses 0/2/3.

Submission itself is exercised on the live cluster (tests/live/test_submit_live.py); here the Slurm
door is replaced where a refusal must be provoked without a cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slurm_plugin.slurm.client import SlurmRefused, SlurmUnreachable
from submit import cli
from submit.quoting import slurm_name
from submit_helpers import DEFAULT_SHAPE_NOTE, REPO, option, sbatch_directives, v2_spec

HELLO = str(REPO / "tests" / "fixtures" / "specs" / "v2-single-gpu.yaml")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_dry_run_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["--dry-run", HELLO, "--partition", "gpu", "--gpu-type", "a100"], capsys)
    assert (rc, err) == (0, DEFAULT_SHAPE_NOTE)
    [args] = sbatch_directives(out)
    assert option(args, "partition") == ["gpu"] and option(args, "gres") == ["gpu:a100:1"]


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--dry-run", "--json", HELLO], capsys)
    data = json.loads(out)
    assert rc == 0 and data["job_id"] is None and data["script"].startswith("#!/bin/bash\n")


def test_spec_problems_exit_2_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = v2_spec()
    spec["taskRoles"]["main"]["resourcePerInstance"].update(gpu=-1, cpu="x")
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(spec))
    rc, out, err = run([str(f)], capsys)
    assert (rc, out) == (2, "")
    assert err.splitlines() == [
        "dlsubmit: taskRoles.main.resourcePerInstance.cpu: must be an integer in 1..4096",
        "dlsubmit: taskRoles.main.resourcePerInstance.gpu: must be an integer in 0..1024 or a fraction of one GPU (0 < gpu < 1, e.g. 0.5)"]


def test_nothing_submitted_on_spec_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s))
    f = tmp_path / "big.yaml"
    spec = v2_spec()
    spec["taskRoles"]["main"]["resourcePerInstance"]["gpu"] = 9
    f.write_text(yaml.safe_dump(spec))
    rc, _, err = run([str(f)], capsys)
    assert rc == 2 and calls == []
    assert "9 per instance does not fit on one node" in err


@pytest.mark.parametrize("argv", [
    ["--container-runtime", "docker", HELLO], ["--gpus-per-node", "x", HELLO], [],
    ["--grace", "0", "--dry-run", HELLO], ["--param", "oops", "--dry-run", HELLO],
])
def test_bad_options_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(argv, capsys)
    assert rc == 2 and out == "" and "Traceback" not in err and err


@pytest.mark.parametrize(("error", "prefix", "code"), [
    (SlurmRefused(["sbatch"], "sbatch: error: Invalid partition name specified"), "Slurm refused the job", 4),
    (SlurmUnreachable(["sbatch"], "Unable to contact slurm controller"), "Slurm unreachable", 3),
])
def test_slurm_refusal_exits_4_unreachable_3_verbatim(
        error: Exception, prefix: str, code: int, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(script: str, *a: object) -> int:
        raise error
    monkeypatch.setattr(cli, "_submit", refuse)
    rc, out, err = run([HELLO], capsys)
    assert (rc, out) == (code, "-\n")  # one record per spec, always: "-" = no job
    assert err == f"dlsubmit: {prefix}: {error.message}\n"  # type: ignore[attr-defined]


def test_missing_slurm_conf_is_reported_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nonexistent.conf"
    monkeypatch.setenv("SLURM_CONF", str(missing))  # the real client: sbatch is never started
    rc, out, err = run([HELLO], capsys)
    assert (rc, out) == (3, "-\n")  # one record per spec, always: "-" = no job
    assert err == f"dlsubmit: Slurm unreachable: SLURM_CONF: cannot stat file {missing}: No such file or directory\n"


def test_submit_prints_job_id(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scripts: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: scripts.append(s) or 4242)
    rc, out, _ = run([HELLO], capsys)
    assert (rc, out) == (0, "4242\n")
    assert scripts[0].startswith("#!/bin/bash\n#SBATCH --job-name=single-gpu\n")


def test_site_config_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("partition: site-part\ngrace_s: 300\ngpus_per_node: 4\n")
    monkeypatch.setenv("DLSUBMIT_CONFIG", str(site))
    rc, out, _ = run(["--dry-run", HELLO, "--partition", "flag-part"], capsys)
    [args] = sbatch_directives(out)
    assert rc == 0
    assert option(args, "partition") == ["flag-part"] and option(args, "signal") == ["B:USR2@300"]
    site.write_text("nodes: 3\n")
    rc, _, err = run(["--dry-run", HELLO], capsys)
    assert (rc, err) == (2, f"dlsubmit: {site}: nodes: unknown key; allowed: {SITE_KEYS}\n")


SITE_KEYS = ("account, checkpoint_root, container_runtime, cores_per_node, default_fs_uri, "
             "enforce_binding, gpu_type, gpus_per_node, grace_s, max_array_size, max_script_size, "
             "mem_per_node_mib, output, "
             "partition, port_floor, qos, shards_per_gpu, signal, virtual_clusters")


@pytest.mark.parametrize("via_env", [False, True])
def test_site_config_yaml_syntax_error_is_one_line(via_env: bool, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("partition: gpu\ngrace_s: [1\n")
    if via_env:
        monkeypatch.setenv("DLSUBMIT_CONFIG", str(site))
    rc, out, err = run(["--dry-run", HELLO] + ([] if via_env else ["--site-config", str(site)]), capsys)
    assert (rc, out) == (2, "")
    assert err == (f"dlsubmit: {site}:3:1: YAML syntax error: while parsing a flow sequence "
                   "expected ',' or ']', but got '<stream end>'\n")


@pytest.mark.parametrize(("text", "lines"), [
    ("- partition: gpu\n", ["the site config must be a mapping of keys (e.g. 'partition: gpu'), "
                             "not a list"]),
    ("virtual_clusters:\n  vision:\n    acount: cv\n",
     ["virtual_clusters.vision.acount: unknown key; did you mean account?"]),
    ("grace_s: 1.5\n", ["grace_s 1.5: must be whole seconds in 1..86400"]),
    # an unknown key hides no value error: every problem, one line each
    ("partiton: gpu\ngrace_s: 0\ngpus_per_node: 0\nsignal: KILL\n",
     ["partiton: unknown key; did you mean partition?",
      "gpus_per_node 0: must be a whole number in 1..1024",
      "signal 'KILL': must be one of USR1, USR2, TERM, INT, HUP, URG",
      "grace_s 0: must be whole seconds in 1..86400"]),
])
def test_site_config_problems_name_the_key(text: str, lines: list[str], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(text)
    rc, out, err = run(["--dry-run", HELLO, "--site-config", str(site)], capsys)
    assert (rc, out) == (2, "")
    assert err.splitlines() == [f"dlsubmit: {site}: {line}" for line in lines]


@pytest.mark.parametrize(("flag", "value", "line"), [
    ("--gpus-per-node", "0", "--gpus-per-node 0: must be a whole number in 1..1024"),
    ("--gpus-per-node", "1025", "--gpus-per-node 1025: must be a whole number in 1..1024"),
    ("--cores-per-node", "0", "--cores-per-node 0: must be a whole number in 1..100000"),
    ("--mem-per-node", "-5", "--mem-per-node -5: must be a whole number in 1..1073741824"),
    ("--grace", "0", "--grace 0: must be whole seconds in 1..86400"),
    ("--signal", "KILL", "--signal 'KILL': must be one of USR1, USR2, TERM, INT, HUP, URG"),
])
def test_bad_node_shape_and_contract_flags_name_the_flag(flag: str, value: str, line: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["--dry-run", HELLO, flag, value], capsys)
    assert (rc, out, err) == (2, "", f"dlsubmit: {line}\n")


def test_undeclared_parameter_advice_matches_param_behaviour(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    spec = v2_spec()
    spec["taskRoles"]["main"]["commands"] = ["echo <% $parameters.bs %>"]
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(spec))
    rc, _, err = run(["--dry-run", str(f)], capsys)
    assert (rc, err) == (2, "dlsubmit: taskRoles.main.commands: <% $parameters.bs %> names "
                            "nothing: $parameters has no entries (declare it under parameters:; "
                            "--param NAME=VALUE only overrides a declared one)\n")
    rc, _, err = run(["--dry-run", str(f), "--param", "bs=32"], capsys)
    assert (rc, err) == (2, "dlsubmit: --param bs: the spec declares no parameter 'bs' "
                            "(parameters: none)\n")
    spec["parameters"] = {"bs": 16}
    f.write_text(yaml.safe_dump(spec))
    rc, out, err = run(["--dry-run", str(f), "--param", "bs=32"], capsys)
    assert (rc, err) == (0, DEFAULT_SHAPE_NOTE) and "echo 32" in out


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--help"], capsys)
    assert rc == 0
    for flag in ("--dry-run", "--json", "--partition", "--param", "--container-runtime",
                 "--gpus-per-node", "--cores-per-node", "--mem-per-node", "--gpu-type", "--signal",
                 "--grace", "--enforce-binding", "--checkpoint-root", "--output", "--site-config",
                 "Exit status: 0"):
        assert flag in out


ESCAPED_PAIR = r'"\u6a21\u578b-\ud83d\ude80"'  # 模型-🚀 with the emoji as a UTF-16 escape pair


@pytest.mark.parametrize("ext", ["yaml", "json"])
def test_escaped_surrogate_pair_is_one_character(ext: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    spec = v2_spec()
    spec["name"] = "NAME_HERE"
    text = json.dumps(spec) if ext == "json" else yaml.safe_dump(spec)
    f = tmp_path / f"emoji.{ext}"
    f.write_text(text.replace('"NAME_HERE"' if ext == "json" else "NAME_HERE", ESCAPED_PAIR))
    rc, out, err = run(["--dry-run", str(f)], capsys)
    assert (rc, err) == (0, DEFAULT_SHAPE_NOTE)
    out.encode("utf-8")  # no surrogate left anywhere in the script
    [args] = sbatch_directives(out)
    assert option(args, "job-name") == [slurm_name("\u6a21\u578b-\U0001f680")]
    scripts: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: scripts.append(s) or 7)
    rc, out, err = run([str(f)], capsys)
    assert (rc, out, err) == (0, "7\n", "") and "\U0001f680" in scripts[0]


def test_lone_surrogate_is_refused_with_field_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = v2_spec()
    spec["taskRoles"]["main"]["commands"] = ["CMD_HERE"]
    f = tmp_path / "lone.yaml"
    f.write_text(yaml.safe_dump(spec).replace("CMD_HERE", r'"echo \ud83d"'))
    rc, out, err = run(["--dry-run", str(f)], capsys)
    assert (rc, out) == (2, "")
    assert err.startswith("dlsubmit: taskRoles.main.commands[0]: holds a lone UTF-16 surrogate")


def test_unreadable_secrets_file_is_refused_without_secret_references(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nonexistent"
    rc, out, err = run(["--dry-run", HELLO, "--secrets", str(missing)], capsys)
    assert (rc, out, err) == (2, "", f"dlsubmit: --secrets {missing}: cannot read: No such file or directory\n")
    loose = tmp_path / "loose"
    loose.write_text("A=1\n")
    loose.chmod(0o644)
    rc, out, err = run(["--dry-run", HELLO, "--secrets", str(loose)], capsys)
    assert (rc, out, err) == (2, "", f"dlsubmit: --secrets {loose}: mode 0644 lets others read it; "
                                     f"run chmod 600 {loose}\n")


def test_a_secret_value_with_a_nul_byte_is_refused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """bash drops a NUL from a variable: the command would have got ``ab`` for ``a\\0b``."""
    secrets = tmp_path / "secrets"
    secrets.write_bytes(b"OK=1\nTOK=a\x00b\n")
    secrets.chmod(0o600)
    rc, out, err = run(["--dry-run", HELLO, "--secrets", str(secrets)], capsys)
    assert (rc, out, err) == (2, "", f"dlsubmit: --secrets {secrets}:2: the value of TOK holds a "
                                     "NUL byte, which no shell variable can hold; remove it\n")


def test_dry_run_of_several_specs_separates_the_scripts(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "b\nc.yaml"
    other.write_text(Path(HELLO).read_text())
    rc, out, err = run(["--dry-run", HELLO, str(other)], capsys)
    assert (rc, err) == (0, DEFAULT_SHAPE_NOTE)  # said once for both
    rc, script, _ = run(["--dry-run", HELLO], capsys)
    size = len(script.encode())
    assert out == (f"#dlsubmit-spec 1/2 bytes={size} {HELLO}\n{script}"
                   f"#dlsubmit-spec 2/2 bytes={size} {tmp_path}/b\\nc.yaml\n{script}")
    assert cli.split_dry_run(out) == [(HELLO, script), (f"{tmp_path}/b\\nc.yaml", script)]


def test_dry_run_split_survives_lookalike_lines_in_commands(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A user's command may hold any line, the header itself included: the byte count, not a
    search for the header, tells where each script ends."""
    fake = "x\n#dlsubmit-spec 2/2 bytes=5 x.yaml\n# ---- b.yaml ----"
    paths = []
    for i, cmd in enumerate([f"echo '{fake}'", "true"]):
        paths.append(tmp_path / f"s{i}.yaml")
        paths[-1].write_text(yaml.safe_dump(v2_spec(f"s{i}", roles={"main": {
            "instances": 1, "resourcePerInstance": {"cpu": 1, "memoryMB": 100, "gpu": 0},
            "commands": [cmd]}})))
    rc, out, _ = run(["--dry-run", *map(str, paths)], capsys)
    assert "\n#dlsubmit-spec 2/2 bytes=5 x.yaml\n" in out  # the lookalike is a line of its own
    parts = cli.split_dry_run(out)
    assert [name for name, _ in parts] == [str(p) for p in paths]
    for p, (_, script) in zip(paths, parts):
        assert script == run(["--dry-run", str(p)], capsys)[1]


def test_one_bad_spec_among_several_submits_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s) or 7)
    paths = []
    for i, gpu in enumerate([0, -1, 0]):
        spec = v2_spec(f"j{i}")
        spec["taskRoles"]["main"]["resourcePerInstance"]["gpu"] = gpu
        paths.append(tmp_path / f"j{i}.yaml")
        paths[-1].write_text(yaml.safe_dump(spec))
    rc, out, err = run([str(p) for p in paths], capsys)
    assert (rc, out, calls) == (2, "", [])
    assert err == f"dlsubmit: {paths[1]}: taskRoles.main.resourcePerInstance.gpu: must be an integer in 0..1024 or a fraction of one GPU (0 < gpu < 1, e.g. 0.5)\n"
    rc, out, _ = run([str(paths[0]), str(paths[2])], capsys)
    assert (rc, out) == (0, "7\n7\n") and len(calls) == 2
    # specs are submitted concurrently (submit/cli.py, _submit_all): the calls' order is free
    names = sorted(script.split("--job-name=", 1)[1].split("\n", 1)[0] for script in calls)
    assert names == ["j0", "j2"]


def test_final_gc_is_skipped_only_when_main_runs_as_the_command() -> None:
    """submit/ending.py: with sys.argv (argv None) the collector is frozen as main returns;
    called with a list (as these tests do) nothing changes. In a child process: freezing this
    one would keep its garbage."""
    code = ("import gc, sys\nfrom submit.ending import without_final_gc\n"
            "main = without_final_gc(lambda argv: 7)\n"
            "assert main(['x']) == 7 and gc.get_freeze_count() == 0\n"
            "assert main() == 7 and gc.get_freeze_count() > 0\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(("flag", "value"), [
    ("--checkpoint-root", "/scratch/\udce9t\udce9"),   # the bytes e9 74 e9: Latin-1, not UTF-8
    ("--param", "x=\udcff"),
    ("--output", "out-\udcff-%j.log"),
    ("--partition", "gp\udcffu"),
])
def test_an_option_value_that_is_not_utf8_is_refused(flag: str, value: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["--dry-run", f"{flag}={value}", HELLO], capsys)
    assert (rc, out) == (2, "")
    shown = value.replace("\udce9", "\\udce9").replace("\udcff", "\\udcff")
    assert err == (f"dlsubmit: {flag} {shown}: not UTF-8 text; the batch script holds it as "
                   "UTF-8: give it in UTF-8\n")


def test_a_stdout_that_cannot_be_written_is_one_line_exit_1() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run([str(Path(sys.executable).parent / "dlsubmit"), "--dry-run",
                               "--gpus-per-node", "8", "--cores-per-node", "16",
                               "--mem-per-node", "64000", HELLO],
                              stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    assert (proc.returncode, proc.stderr) == (
        1, "dlsubmit: cannot write to stdout: No space left on device\n")


def test_a_closed_stdout_is_refused_before_anything_is_done(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_submit", lambda *a: pytest.fail("submitted with stdout closed"))
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "argv", ["dlsubmit"])
    rc = cli.main([HELLO])
    monkeypatch.undo()
    assert (rc, capsys.readouterr().err) == (1, "dlsubmit: cannot write to stdout: it is closed; "
                                             "run it with stdout open (> /dev/null to discard "
                                             "what it prints)\n")


@pytest.mark.parametrize("argv", [["-spec.yaml"], ["--dry-run", "-spec.yaml"],
                                  [HELLO, "-spec.yaml", "--dry-run"], ["-spec"]],
                         ids=["alone", "after-an-option", "after-a-spec", "no-suffix-but-a-file"])
def test_a_spec_named_with_a_leading_dash_is_one_line_saying_how_to_name_it(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("-spec.yaml", "-spec"):
        (tmp_path / name).write_text(Path(HELLO).read_text())
    word = next(w for w in argv if w.startswith("-spec"))
    assert run(argv, capsys) == (
        2, "", f"dlsubmit: {word}: taken for an option (it starts with '-'); for a spec file of that "
               f"name write 'dlsubmit -- {word}' or 'dlsubmit ./{word}'\n")
    rc, out, _ = run(["--dry-run", "--", word], capsys)   # both ways the line gives work
    assert (rc, run(["--dry-run", f"./{word}"], capsys)[:2]) == (0, (0, out))


@pytest.mark.parametrize(("argv", "err"), [
    (["--bogus", HELLO], "dlsubmit: unrecognized arguments: --bogus\n"),   # no spec's name
    (["--output", "-o.yaml", HELLO], "dlsubmit: --output: expected a value, got the option-like "
     "word -o.yaml; a value that starts with '-' is joined to its option: --output=-o.yaml\n"),
])
def test_an_unknown_option_that_names_no_spec_keeps_its_own_line(
        argv: list[str], err: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(argv, capsys) == (2, "", err)


@pytest.mark.parametrize("argv", [
    [HELLO, "--dry-run", "OTHER"], [HELLO, "--partition", "gpu", "--dry-run", "OTHER"],
    ["--dry-run", HELLO, "--partition=gpu", "OTHER"], ["--dry-run", HELLO, "--", "OTHER"],
    ["--dry-run", "--partition", "gpu", "--", HELLO, "OTHER"],
], ids=["option-between-specs", "options-between-specs", "joined-value-between",
        "spec-after-dashes", "all-specs-after-dashes"])
def test_options_and_specs_mix_in_any_order(argv: list[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    other = "--dry-run" if "--" in argv else "b.yaml"   # after '--' every word is a spec
    (tmp_path / other).write_text(Path(HELLO).read_text())
    rc, out, err = run([other if w == "OTHER" else w for w in argv], capsys)
    assert (rc, err) == (0, DEFAULT_SHAPE_NOTE)
    assert [name for name, _ in cli.split_dry_run(out)] == [HELLO, other]
