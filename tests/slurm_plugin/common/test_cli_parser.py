"""Every command exits quietly, status 0, when its reader closed stdout (``dlprio simulate | head``).

The in-process test drives :func:`slurm_plugin.common.cli.quiet_on_closed_stdout` over a real pipe
whose read end is closed; the others run each installed command with its stdout pipe closed
before it writes, so the write (or the final flush) meets EPIPE exactly as under ``| head -1``.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from slurm_plugin.common.cli import EXIT_CLOSED_STDOUT, quiet_on_closed_stdout

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
TIRESIAS = ROOT / "data" / "traces" / "tiresias"
HELLO = ROOT / "tests" / "fixtures" / "specs" / "v2-single-gpu.yaml"
NVML = ROOT / "tests" / "fixtures" / "nvml" / "hgx-h100.json"


def test_closed_pipe_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    out = io.TextIOWrapper(io.FileIO(write_fd, "w"), write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    calls: list[list[str] | None] = []

    @quiet_on_closed_stdout
    def main(argv: list[str] | None = None) -> int:
        calls.append(argv)
        print("row 1")
        return 7

    assert main(["x"]) == EXIT_CLOSED_STDOUT == 0
    assert calls == [["x"]]
    print("after: goes to /dev/null, no error")  # fd was pointed at /dev/null
    monkeypatch.undo()
    out.close()


def test_status_passes_through_when_stdout_is_open(capsys: pytest.CaptureFixture[str]) -> None:
    @quiet_on_closed_stdout
    def main(argv: list[str] | None = None) -> int:
        print("hello")
        return 3

    assert main([]) == 3
    assert capsys.readouterr().out == "hello\n"


@pytest.mark.parametrize("argv", [
    ["dlprio", "simulate", "--trace", str(TIRESIAS / "60_job.csv"), "--cluster", str(TIRESIAS / "n2g4.csv")],
    # the node shape given, so that dry-run's note on the default shape is not printed
    ["dlsubmit", "--dry-run", "--gpus-per-node", "8", "--cores-per-node", "16", "--mem-per-node", "64000",
     str(HELLO)],
    ["dlgres", "--fake-nvml", str(NVML), "--sockets", "2", "--cores-per-socket", "56", "--threads-per-core", "2"],
    ["dlcluster", "status", "--help"],
], ids=lambda a: a[0])
def test_every_command_is_quiet_on_a_closed_stdout(argv: list[str]) -> None:
    proc = subprocess.Popen([str(BIN / argv[0]), *argv[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes anything
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=120), err) == (0, "")


@pytest.mark.parametrize("argv", [
    ["dlprio", "simulate", "--trace", str(TIRESIAS / "60_job.csv"), "--cluster", str(TIRESIAS / "n2g4.csv")],
    ["dlsubmit", "--dry-run", "--gpus-per-node", "8", "--cores-per-node", "16", "--mem-per-node", "64000",
     str(HELLO)],
    ["dlgres", "--fake-nvml", str(NVML), "--sockets", "2", "--cores-per-socket", "56", "--threads-per-core", "2"],
    ["dlqueue", "--help"],
    ["dlcluster", "status", "--help"],
], ids=lambda a: a[0])
def test_every_command_says_so_when_stdout_cannot_be_written(argv: list[str]) -> None:
    with open("/dev/full", "w") as full:   # every write fails with ENOSPC
        proc = subprocess.run([str(BIN / argv[0]), *argv[1:]], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, timeout=120, check=False)
    assert (proc.returncode, proc.stderr) == (
        1, f"{argv[0]}: cannot write to stdout: No space left on device\n")


def test_an_error_of_the_command_itself_is_not_taken_for_stdout(
        capsys: pytest.CaptureFixture[str]) -> None:
    @quiet_on_closed_stdout
    def main(argv: list[str] | None = None) -> int:
        print("partial")
        raise PermissionError(13, "Permission denied")

    with pytest.raises(PermissionError):
        main([])
    assert capsys.readouterr().out == "partial\n"


# --- one argument parser for every command: ``--opt=--`` is the string "--" (CPython gh-109475)

from slurm_plugin.common.cli import ArgumentParser  # noqa: E402


def _parsers() -> list[tuple[str, "ArgumentParser"]]:
    import argparse

    from prioritizer.cli import build_parser as dlprio
    from slurm_plugin.localcluster.cli import build_parser as dlcluster
    from slurm_plugin.gres.cli import _parser as dlgres
    from submit.cli import build_parser as dlsubmit
    from submit.queue_cli import build_parser as dlqueue

    out, todo = [], [("dlprio", dlprio()[0]), ("dlsubmit", dlsubmit()), ("dlqueue", dlqueue()),
                     ("dlcluster", dlcluster()), ("dlgres", dlgres())]
    while todo:
        name, parser = todo.pop()
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
    return out


def test_explicit_double_dash_value_is_a_string() -> None:
    p = ArgumentParser(prog="x")
    p.add_argument("--node")
    p.add_argument("--mode", nargs="?", const="c")
    p.add_argument("rest", nargs="*")
    args = p.parse_args(["--node=--", "--mode=--", "--", "--not-an-option"])
    assert args.node == "--" and args.mode == "--" and args.rest == ["--not-an-option"]
    with pytest.raises(SystemExit):       # ``--`` after a space still ends the options
        p.parse_args(["--node", "--"])


def test_every_command_and_subcommand_uses_the_mended_parser() -> None:
    parsers = _parsers()
    assert len(parsers) >= 12            # 5 commands and their subcommands
    for name, parser in parsers:
        assert isinstance(parser, ArgumentParser), name
        for action in parser._actions:   # each string option takes "--" as its value
            if action.option_strings and action.nargs is None and action.type is None \
                    and action.choices is None and action.const is None:
                assert parser._get_values(action, ["--"]) == "--", (name, action.dest)


def test_dlgres_node_double_dash_is_a_clear_error() -> None:
    """``dlgres --node=--`` (an input hypothesis finds) is one line naming the option, no
    TypeError."""
    proc = subprocess.run([str(BIN / "dlgres"), "--fake-nvml", str(NVML), "--sockets", "2", "--cores-per-socket", "56",
                           "--threads-per-core", "2", "--node=--"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--node '--' is not a Slurm node name" in proc.stderr and "Traceback" not in proc.stderr


# --- one escaping of user text for printing (slurm_plugin.common.cli.visible)

from slurm_plugin.common.cli import visible  # noqa: E402

#: a backslash, a newline, an ANSI "clear screen", a bidi override and an undecodable byte
HOSTILE_PATH = "/nonexistent/a\\b\n\x1b[2J\u202e\udcff.yaml"
HOSTILE_SHOWN = "/nonexistent/a\\b\\n\\x1b[2J\\u202e\\udcff.yaml"


def test_visible_escapes_each_kind_once() -> None:
    assert visible(HOSTILE_PATH) == HOSTILE_SHOWN
    assert visible("tab\there\rCR\x7f\x85") == "tab\\there\\rCR\\x7f\\x85"
    assert visible("tag\U000e0001 é 中 [red]x[/red]") == "tag\\U000e0001 é 中 [red]x[/red]"
    assert visible(Path("/a\nb")) == "/a\\nb"


def test_dlprio_dlsubmit_and_tables_show_a_hostile_path_alike(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The three commands quote a user's path with the one function: the same escapes, the
    backslash not doubled, the line not broken."""
    from prioritizer import tables
    from prioritizer.cli import main as dlprio
    from submit.cli import main as dlsubmit

    assert dlsubmit(["--dry-run", HOSTILE_PATH]) == 2
    err = capsys.readouterr().err
    assert err == f"dlsubmit: {HOSTILE_SHOWN}: cannot read: No such file or directory\n"
    assert dlprio(["simulate", "--trace", HOSTILE_PATH, "--nodes", "1",
                   "--gpus-per-node", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"dlprio: {HOSTILE_SHOWN}: cannot read (No such file or directory)\n"
    assert tables.render(["PATH"], [[HOSTILE_PATH]]).splitlines()[1] == HOSTILE_SHOWN


# --- an empty option value is exit 2 for every command (ArgumentParser, not each command)

def test_every_option_of_every_command_refuses_an_empty_value(
        capsys: pytest.CaptureFixture[str]) -> None:
    checked = 0
    for name, parser in _parsers():
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0:   # flags take no value
                continue
            with pytest.raises(SystemExit) as stop:
                parser._get_values(action, [""])
            option = "/".join(action.option_strings)
            assert (stop.value.code, capsys.readouterr().err) == (
                2, f"{name.split()[0]}: {option}: empty value; give a value or leave the "
                   "option out\n"), (name, option)
            checked += 1
    assert checked >= 60     # dlsubmit alone has 17 options that take a value


@pytest.mark.parametrize("argv, option", [
    (["dlsubmit", "--dry-run", "--partition=", str(HELLO)], "--partition"),
    (["dlqueue", "-u", ""], "-u/--user"),
    (["dlqueue", "--snapshot="], "--snapshot"),
    (["dlprio", "status", "--config="], "--config"),
    (["dlprio", "history", "export", "-o", ""], "-o/--output"),
    (["dlgres", "--fake-nvml", str(NVML), "--node="], "--node"),
    (["dlcluster", "status", "--name="], "--name"),
], ids=lambda a: a if isinstance(a, str) else " ".join(a[:2]))
def test_each_command_stops_at_an_empty_option_value(argv: list[str], option: str) -> None:
    """The installed commands: one line naming the option and the fix, exit 2, nothing else
    done (dlqueue asks no Slurm: SLURM_CONF names no cluster here)."""
    env = {**os.environ, "SLURM_CONF": "/nonexistent/slurm.conf"}
    proc = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"{argv[0]}: {option}: empty value; give a value or leave the option out\n")


def test_an_option_may_allow_an_empty_value() -> None:
    p = ArgumentParser(prog="x")
    p.add_argument("--sep", allow_empty=True)
    p.add_argument("--name")
    assert p.parse_args(["--sep="]).sep == "" and p.parse_args(["--sep", ""]).sep == ""
    with pytest.raises(SystemExit):
        p.parse_args(["--name", ""])
    assert p.parse_args([]).name is None


# --- a value that starts with '-' as a separate word: one line naming the option and the fix

@pytest.mark.parametrize("argv, option, word, fix", [
    (["dlqueue", "-u", "-x"], "-u/--user", "-x", "--user=-x"),
    (["dlqueue", "-j", "--me"], "-j/--jobs", "--me", "--jobs=--me"),
    (["dlsubmit", "--dry-run", "--param", "-a", str(HELLO)], "--param", "-a", "--param=-a"),
    (["dlprio", "status", "--config", "-c"], "--config", "-c", "--config=-c"),
    (["dlprio", "history", "export", "-o", "-out.csv"], "-o/--output", "-out.csv",
     "--output=-out.csv"),
    (["dlgres", "--fake-nvml", str(NVML), "--node", "-n1"], "--node", "-n1", "--node=-n1"),
    (["dlcluster", "status", "--name", "-c"], "--name", "-c", "--name=-c"),
    (["dlqueue", "-u", "-\x1b[2J"], "-u/--user", "-\\x1b[2J", "--user=-\\x1b[2J"),
    (["dlqueue", "-u", "--", "x"], "-u/--user", "--", "--user=--"),
    (["dlgres", "--type", "--"], "--type", "--", "--type=--"),
    (["dlsubmit", "--dry-run", "--param", "--", str(HELLO)], "--param", "--", "--param=--"),
], ids=lambda a: a if isinstance(a, str) else " ".join(a[:3]))
def test_a_dash_value_as_a_separate_word_is_one_clear_line(argv: list[str], option: str,
                                                           word: str, fix: str) -> None:
    env = {**os.environ, "SLURM_CONF": "/nonexistent/slurm.conf"}
    proc = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"{argv[0]}: {option}: expected a value, got the option-like word {word}; a "
               f"value that starts with '-' is joined to its option: {fix}\n")


@pytest.mark.parametrize("argv, option", [
    (["dlqueue", "-u"], "-u/--user"),
    (["dlsubmit", "--dry-run", str(HELLO), "--secrets"], "--secrets"),
    (["dlprio", "status", "--config"], "--config"),
    (["dlprio", "explain", "5", "--config"], "--config"),
    (["dlgres", "--fake-nvml", str(NVML), "--node"], "--node"),
    (["dlcluster", "down", "--name"], "--name"),
], ids=lambda a: a if isinstance(a, str) else " ".join(a[:2]))
def test_an_option_as_the_last_word_is_one_clear_line(argv: list[str], option: str) -> None:
    """``-u''`` or ``-u $UNSET`` reaches the command as a last word ``-u``: one line, exit 2."""
    env = {**os.environ, "SLURM_CONF": "/nonexistent/slurm.conf"}
    proc = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"{argv[0]}: {option}: expected a value, got the end of the command line; give a "
               "value or leave the option out\n")


def test_the_joined_form_the_message_gives_is_accepted() -> None:
    from submit.queue_cli import build_parser as dlqueue

    p = ArgumentParser(prog="x")
    p.add_argument("-o", "--out")
    p.add_argument("--flag", action="store_true")
    assert p.parse_args(["--out=-x", "--flag"]).out == "-x"
    assert p.parse_args(["-o", "-5"]).out == "-5"     # a negative number stays a value
    assert dlqueue().parse_args(["--user=-x"]).user == ["-x"]


# --- every argparse usage error is one line, without the usage block --------------------------

def _main_of(command: str) -> "Callable[[list[str]], int]":
    from prioritizer.cli import main as dlprio
    from slurm_plugin.localcluster.cli import main as dlcluster
    from slurm_plugin.gres.cli import main as dlgres
    from submit.cli import main as dlsubmit
    from submit.queue_cli import main as dlqueue

    return {"dlprio": dlprio, "dlsubmit": dlsubmit, "dlqueue": dlqueue, "dlgres": dlgres,
            "dlcluster": dlcluster}[command]


@pytest.mark.parametrize("argv, line", [
    (["dlsubmit", "--container-runtime", "docker", str(HELLO)],
     "dlsubmit: --container-runtime: invalid choice 'docker' (choose from none, pyxis, apptainer)"),
    (["dlsubmit", "--dry-run"], "dlsubmit: the following arguments are required: JOB.yaml|JOB.json"),
    (["dlsubmit", "--dry-run", "--bogus", str(HELLO)], "dlsubmit: unrecognized arguments: --bogus"),
    (["dlsubmit", "--grace", "soon", str(HELLO)], "dlsubmit: --grace: invalid int value: 'soon'"),
    (["dlqueue", "-u", "nosuchuser-0", "--snapshot", "/nonexistent"],
     "dlqueue: -u/--user: unknown user 'nosuchuser-0' (not in the passwd database)"),
    (["dlprio", "nosuch"], "dlprio: COMMAND: invalid choice 'nosuch' (choose from simulate, run, "
     "once, explain, status, history, tune, compile)"),
    (["dlprio", "simulate"], "dlprio: the following arguments are required: --trace"),
    # an unknown option is the mistake to name, not the argument it stood in for
    (["dlprio", "simulate", "--trase", "t.csv"], "dlprio: unrecognized arguments: --trase"),
    (["dlprio", "explain", "-x"], "dlprio: unrecognized arguments: -x"),
    (["dlsubmit", "-x"], "dlsubmit: unrecognized arguments: -x"),
    (["dlsubmit", "--dry-ru", "--bogus=1"], "dlsubmit: unrecognized arguments: --bogus=1"),
    # a word with a space is a value to argparse, however it starts: the argument is missing
    (["dlprio", "simulate", "--jobs-csv", "-o x.csv"],
     "dlprio: the following arguments are required: --trace"),
    (["dlgres", "--sockets", "many"], "dlgres: --sockets: invalid int value: 'many'"),
    (["dlcluster", "nosuch"], "dlcluster: command: invalid choice 'nosuch' (choose from up, env, down, status, ctl)"),
], ids=lambda a: a if isinstance(a, str) else " ".join(a[:2]))
def test_every_usage_error_is_one_line_with_exit_2(argv: list[str], line: str,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", "/nonexistent/slurm.conf")
    try:
        rc = _main_of(argv[0])(argv[1:])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert (rc, out, err.count("\n")) == (2, "", 1), err
    assert err == line + "\n"


def test_one_line_usage_error_rewrites_argparse_wording() -> None:
    from slurm_plugin.common.cli import one_line_usage_error

    assert one_line_usage_error("argument --mode: invalid choice: 'x' (choose from 'a', 'b')") == (
        "--mode: invalid choice 'x' (choose from a, b)")
    assert one_line_usage_error("unrecognized arguments: -z") == "unrecognized arguments: -z"
