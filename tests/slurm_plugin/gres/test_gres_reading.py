"""``dlgres --check`` reads gres.conf and slurm.conf as Slurm's one config parser reads them
(src/common/parse_config.c: ``_get_next_line``, ``_parse_include_directive``, the key=value
pattern; gres.conf's keys and counts from src/common/gres.c; slurm.conf's node records from
slurm.conf(5)). Expected values are worked out by hand from those sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.gres.check import check_gres
from slurm_plugin.gres.cli import main
from slurm_plugin.gres.conf import parse_count, parse_line
from slurm_plugin.gres.release import Release
from slurm_plugin.gres.slurmconf import SlurmConfError, parse_slurm_conf

GPU01 = "NodeName=gpu01 Name=gpu Type=a100 File=/dev/nvidia[0-3]\n"
COUNT_RULE = ("not a number below 2^63 with an optional K, M, G, T, P (1024s) or KB, MB, GB, TB, PB (1000s) "
              "suffix (slurmd stops: 'invalid count')")


def _check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["--check", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _messages(text: str, **kw) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in check_gres(text, **kw)]


# --- Include -----------------------------------------------------------------------------------

def test_slurm_conf_include_is_read_inline(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """slurm.conf(5): "If a line begins with the word "Include" followed by whitespace and then a
    file name, that file will be included inline"; the nodes it defines are slurm.conf's nodes."""
    (tmp_path / "a.conf").write_text("NodeName=gpu[01-02] Name=gpu Type=a100 File=/dev/nvidia[0-3]\n")
    (tmp_path / "nodes.conf").write_text("NodeName=gpu[01-02] Gres=gpu:a100:4 CPUs=8\n")
    (tmp_path / "s.conf").write_text(f"GresTypes=gpu\nInclude {tmp_path}/nodes.conf\n")
    assert _check(capsys, str(tmp_path / "a.conf"), "--slurm-conf", str(tmp_path / "s.conf")) == (
        0, f"{tmp_path / 'a.conf'}: no findings\n", "")


def test_relative_include_is_looked_for_beside_the_including_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]):
    """parse_config.c ``_add_full_path``: a name not starting with "/" is joined to the directory
    of the file holding the Include (not the current directory); a finding on an included line
    names that file and its own line."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "gpus.conf").write_text("# the GPUs\nNodeName=gpu01 Name=gpu Count=x\n")
    (etc / "gres.conf").write_text("include gpus.conf\n")
    monkeypatch.chdir(tmp_path)
    assert _check(capsys, str(etc / "gres.conf")) == (
        1, f"{etc / 'gpus.conf'}:2: Count=x: {COUNT_RULE}\n", "")


def test_a_line_of_another_file_is_named_with_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """With includes, "line 1" alone would be ambiguous: a reference to a line names its file."""
    gres, more = tmp_path / "gres.conf", tmp_path / "more.conf"
    gres.write_text("Name=gpu File=/dev/nvidia0\nInclude more.conf\n")
    more.write_text("# more\nName=gpu File=/dev/nvidia0\n")
    assert _check(capsys, str(gres), "--json")[1].count(f'"file": "{more}"') == 1
    assert _check(capsys, str(gres)) == (
        1, f"{more}:2: File=/dev/nvidia0 already given on line 1 of {gres} for the same node(s): slurmd stops ('gpu "
           "duplicate device file name (/dev/nvidia0)', then 'Gres GPU plugin failed to load configuration'); each "
           "device belongs to one line\n", "")


def test_missing_include_is_one_line_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """parse_config.c: an Include that cannot be read fails the whole file ('"Include" failed in
    file %s line %d'): slurmd and slurmctld stop."""
    inc = tmp_path / "inc.conf"
    inc.write_text("# site\nInclude /nonexistent/a.conf\n")
    assert _check(capsys, str(inc)) == (
        2, "", f"dlgres: {inc}:2: Include /nonexistent/a.conf: cannot read /nonexistent/a.conf: No such file or "
               "directory (slurmd and slurmctld stop: '\"Include\" failed')\n")


def test_include_loop_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a, b = tmp_path / "a.conf", tmp_path / "b.conf"
    a.write_text("Include b.conf\n")
    b.write_text("Name=gpu File=/dev/nvidia0\nInclude a.conf\n")
    assert _check(capsys, str(a)) == (
        2, "", f"dlgres: {b}:2: Include a.conf loops ({a} -> {b} -> {a}); Slurm would read it without end\n")


@pytest.mark.parametrize("name", ["nodes.d/*.conf", "*"])
def test_include_with_a_star_is_refused_even_where_a_file_has_that_name(tmp_path: Path, name: str,
                                                                     capsys: pytest.CaptureFixture[str]):
    """Debian's 24.11.5 and 26.05.5 stop on an Include name with '*' ("Slurm does not support glob
    parsing", then '"Include" failed'), even when a file of that very name exists (scontrol of
    each, with and without DebugFlags=GLOB_SILENCE); 22.05 reads it as a plain name. So the
    Include is refused although the file named is there and would check clean."""
    (tmp_path / "nodes.d").mkdir()
    (tmp_path / name).write_text(GPU01)
    conf = tmp_path / "gres.conf"
    conf.write_text(f"# site\nInclude {name}\n")
    assert _check(capsys, str(conf)) == (
        2, "", f"dlgres: {conf}:2: Include {name}: a '*' in the name stops slurmd and slurmctld on 24.11 and "
               "26.05 as Debian builds them ('Slurm does not support glob parsing', then '\"Include\" failed'), "
               "and 22.05 reads it as a file name; write one Include line per file\n")


def test_include_with_a_question_mark_is_read_as_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Only '*' takes Slurm's glob branch: a name with '?' is stat()ed as written on every release
    (24.11.5 and 26.05.5: "s_p_parse_file: cannot stat file .../n?.conf" when none has it)."""
    (tmp_path / "n?.conf").write_text(GPU01)
    conf = tmp_path / "gres.conf"
    conf.write_text("Include n?.conf\n")
    assert _check(capsys, str(conf)) == (0, f"{conf}: no findings\n", "")


# --- lines, comments, continuations ------------------------------------------------------------

def test_trailing_backslash_continues_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """parse_config.c ``_strip_continuation``: an odd run of backslashes at the end joins the next
    line; Slurm numbers the joined line by its first line."""
    conf = tmp_path / "t.conf"
    conf.write_text("NodeName=gpu01 Name=gpu \\\n  File=/dev/nvidia[0-1]\n")
    assert _check(capsys, str(conf)) == (0, f"{conf}: no findings\n", "")
    assert _messages("# x\nNodeName=n1 Name=gpu \\\n  Count=x\nName=gpu Count=y\n") == [
        (2, f"Count=x: {COUNT_RULE}"), (4, f"Count=y: {COUNT_RULE}")]


def test_lines_end_at_newline_only():
    """``fgets`` ends a line at "\\n" only: a form feed or U+2028 in a comment is part of the
    comment, and the next line keeps its number."""
    assert _messages("# header\x0c page break\nNodeName=n1 Name=gpu Count=x\n") == [(2, f"Count=x: {COUNT_RULE}")]
    assert _messages("# a\u2028Name=gpu Count=y\nNodeName=n1 Name=gpu Count=x\n") == [(2, f"Count=x: {COUNT_RULE}")]


def test_escaped_hash_is_no_comment():
    """``_strip_comments``: "#" after an odd number of backslashes is kept, and ``_strip_escapes``
    drops the backslash: ``Type=a\\#b`` is the type ``a#b``."""
    got = _messages("Name=gpu Type=a\\#b File=/dev/nvidia0\n")
    assert [m.split(": not a gres Type")[0] for _, m in got] == ["Type=a#b"]


def test_non_utf8_byte_in_a_comment_is_harmless_and_in_a_value_names_the_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    conf = tmp_path / "t.conf"
    conf.write_bytes(b"# caf\xe9 au lait\nName=gpu File=/dev/nvidia0\n")
    assert _check(capsys, str(conf)) == (0, f"{conf}: no findings\n", "")
    conf.write_bytes(b"# ok\nName=gpu Type=caf\xe9 File=/dev/nvidia0\n")
    assert _check(capsys, str(conf)) == (
        2, "", f"dlgres: {conf}:2: byte 0xe9 is not UTF-8 text (outside a comment); dlgres reads values as UTF-8: "
               "write them in ASCII\n")


# --- the key=value pattern --------------------------------------------------------------------

def test_blanks_around_equals_and_quotes():
    """parse_config.c's pattern: ``[[:space:]]*`` on both sides of "=", and a value in double
    quotes is read without them."""
    assert _messages("NodeName = gpu01 Name = gpu File = /dev/nvidia[0-1]\n") == []
    assert _messages('Name=gpu Type="a100" File=/dev/nvidia0\n') == []
    conf = parse_slurm_conf('GresTypes = "gpu"\nNodeName=gpu01 Gres="gpu:a100:4"\n')
    assert (conf.gres_types, conf.node_gres) == ({"gpu"}, {"gpu01": {("gpu", "a100"): 4}})


@pytest.mark.parametrize("text, message", [
    ("NodeName=n1 Name=gpu File=\n", "File= has no value: slurmd stops on it ('Parse error in file'); give a value "
                                     "or drop it"),
    ("Name=\n", "Name= has no value: slurmd stops on it ('Parse error in file'); give a value or drop it"),
    ("NodeName= Name=gpu File=/dev/nvidia0\n", "NodeName= is empty, so Slurm takes the next word 'Name=gpu' as its "
                                               "value and the line applies to no node; give NodeName a value"),
    ("Name=gpu Type= File=/dev/nvidia0\n", "Type= is empty, so Slurm takes the next word 'File=/dev/nvidia0' as its "
                                           "value; give Type a value"),
], ids=["end-of-line", "alone", "nodename-takes-next", "type-takes-next"])
def test_empty_value(text: str, message: str):
    """The pattern's value is ``"[^"]*"`` or ``[^[:space:]]+``: at the end of a line ``Key=``
    matches nothing and is left over (a parse error); before another word, that word is the value."""
    assert _messages(text) == [(1, message)]


def test_slurm_conf_parse_error_names_the_file_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    gres = tmp_path / "gres.conf"
    gres.write_text(GPU01)
    conf = tmp_path / "cluster.conf"
    conf.write_text("GresTypes=gpu\nNodeName=gpu01 Gres=\n")
    assert _check(capsys, str(gres), "--slurm-conf", str(conf)) == (
        2, "", f"dlgres: {conf}:2: Slurm cannot read 'Gres=' (slurmctld and slurmd stop: 'Parse error in file'); "
               "give each key a value\n")


# --- slurm.conf node records ---------------------------------------------------------------------

def test_nodename_default_lines_add_to_the_defaults():
    """slurm.conf(5): each NodeName=DEFAULT line "will replace or add to previous default values
    and will not reinitialize the default values"."""
    conf = parse_slurm_conf("GresTypes=gpu\nNodeName=DEFAULT Gres=gpu:a100:4\nNodeName=DEFAULT State=UNKNOWN\n"
                            "NodeName=gpu01\nNodeName=DEFAULT Gres=gpu:2\nNodeName=gpu02\n")
    assert conf.node_gres == {"gpu01": {("gpu", "a100"): 4}, "gpu02": {("gpu", ""): 2}}
    assert _messages(GPU01, slurm=conf) == []


def test_a_node_named_twice_stops_slurm_and_is_read_by_its_first_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A node on two NodeName lines: "Duplicated NodeName %s in the config file" is fatal in
    src/common/read_config.c (slurm.conf(5) says the later record is ignored), and slurmd -G of
    22.05, 24.11 and 26.05 stops with "fatal: Duplicated NodeHostName n1 in config file"; the check
    reads on with the first record."""
    conf = tmp_path / "my-slurm.conf"
    conf.write_text("GresTypes=gpu\nNodeName=gpu01 Gres=gpu:a100:4\nNodeName=gpu[01-02] Gres=gpu:a100:8\n")
    gres = tmp_path / "gres.conf"
    gres.write_text(GPU01)
    assert parse_slurm_conf(conf.read_text()).node_gres == {"gpu01": {("gpu", "a100"): 4},
                                                           "gpu02": {("gpu", "a100"): 8}}
    assert _check(capsys, str(gres), "--slurm-conf", str(conf)) == (
        1, f"{conf}:3: NodeName=gpu01 again (first: {conf}:2): Slurm stops (slurmd: 'Duplicated NodeHostName "
           "gpu01 in config file'); merge the two lines\n", "")


def test_slurm_conf_gres_mixing_typed_and_untyped_is_refused():
    """slurm.conf(5), Gres: "It is forbidden to specify both an untyped GRES and a typed GRES with
    the same <name>"."""
    with pytest.raises(SlurmConfError, match=r"^slurm.conf:2: Gres=gpu:a100:2,gpu:2: gpu both with a type "
                                             r"\(gpu:a100\) and without"):
        parse_slurm_conf("GresTypes=gpu\nNodeName=gpu01 Gres=gpu:a100:2,gpu:2\n")


# --- gres.conf keys, counts and records (src/common/gres.c) -------------------------------------

def test_files_and_link_are_aliases():
    """gres.c's option table has ``Files`` beside ``File`` and ``Link`` beside ``Links``."""
    rec = parse_line(1, "Name=gpu Files=/dev/nvidia[0-1]")
    assert rec is not None and (rec.usable, rec.files, rec.count) == (True, ["/dev/nvidia0", "/dev/nvidia1"], 2)
    assert _messages("Name=gpu File=/dev/nvidia0 Link=-1\n") == []


def test_top_level_autodetect_takes_no_other_key():
    """gres.c: at the start of a line AutoDetect is a plain string option, so the pairs after it
    are left over: a parse error."""
    assert _messages("AutoDetect=nvml Name=gpu Type=a100 File=/dev/nvidia[0-3]\n") == [
        (1, "AutoDetect= then Name= on one line: at the top of a line AutoDetect is a setting of its own, so slurmd "
            "stops on the rest ('Parse error in file'); put AutoDetect on its own line, or after NodeName= for those "
            "nodes")]


def test_multiple_files_of_one_file_is_fatal():
    """gres.c: ``fatal("MultipleFiles does not contain multiple files. Use File instead")``."""
    assert _messages("NodeName=n1 Name=gpu MultipleFiles=/dev/nvidia0\n") == [
        (1, "MultipleFiles=/dev/nvidia0 names one file: slurmd stops ('MultipleFiles does not contain multiple "
            "files. Use File instead'); write File=")]


@pytest.mark.parametrize("text, count", [
    ("4", 4), ("+4", 4), ("2k", 2048), ("2KiB", 2048), ("2KB", 2000), ("3mb", 3_000_000), ("1P", 1024**5),
    ("9223372036854775806", 9223372036854775806),
    ("9223372036854775807", None), ("99999999999999999999999", None), ("-1", None), ("1x", None), ("", None),
])
def test_count_as_slurmd_reads_it(text: str, count: int | None):
    """gres.c: ``strtoll`` (LONG_MAX on overflow is "invalid count"), then ``suffix_mult`` of what
    follows; a result at or beyond NO_VAL64 (2^64-2) is an invalid count too."""
    assert parse_count(text) == count


def test_count_beyond_int64_is_a_finding():
    assert _messages("Name=gpu Count=99999999999999999999999\n") == [
        (1, f"Count=99999999999999999999999: {COUNT_RULE}")]


def test_typed_and_untyped_records_of_one_node_and_name():
    """gres.c ``_foreach_gres_conf``: fatal("gres.conf for %s, some records have "Type="
    specification while others do not"), per node (another node may differ)."""
    text = ("NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia0\nNodeName=n1 Name=gpu File=/dev/nvidia1\n"
            "NodeName=n2 Name=gpu File=/dev/nvidia0\n")
    assert _messages(text) == [
        (2, "gpu: line 1 gives Type= and line 2 does not, for n1: slurmd stops ('gres.conf for gpu, some records "
            "have \"Type=\" specification while others do not'); give every gpu line a Type, or none")]


def test_autodetect_nvml_without_its_library_on_debian_22_05(tmp_path: Path):
    """Debian's 22.05 packages carry no gpu_nvml.so: the message says so, not "every build has it"."""
    got = _messages("AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", plugin_dirs=[str(tmp_path)],
                    release=Release("22.05", "test"))
    assert got == [(1, f"AutoDetect=nvml: this Slurm has no gpu_nvml.so (in {tmp_path}; Debian's 22.05 is built "
                       "without it): slurmd logs that the library was not found and detects nothing; give File= "
                       "lines (dlgres writes them)")]


def test_paths_with_control_characters_are_shown_escaped(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]):
    """A path (given, or named by an Include line of the file) reaches the terminal with its
    ESC written as ``\\x1b``, never as the escape that would restyle the output."""
    odd = tmp_path / "a\x1b[31mb"
    odd.mkdir()
    gres = odd / "gres.conf"
    gres.write_text("NodeName=n1 Name=gpu Count=x\n")
    rc, out, err = _check(capsys, str(gres))
    assert rc == 1 and "\x1b" not in out and f"{tmp_path}/a\\x1b[31mb/gres.conf:1: " in out
    rc, out, err = _check(capsys, str(gres), "--slurm-conf", str(odd / "missing.conf"))
    assert rc == 2 and "\x1b" not in err and f"{tmp_path}/a\\x1b[31mb/missing.conf" in err


def test_include_percent_c_is_the_cluster_name_read_so_far(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]):
    """slurm.conf(5) INCLUDE MODIFIERS: %c is ClusterName (parse_config.c _parse_for_format:
    the one read so far in that file, lower-cased); gres.conf has no ClusterName, so there
    Slurm stops with "Did not get ClusterName for include path"."""
    (tmp_path / "slurm.conf").write_text("ClusterName=Alpha\nGresTypes=gpu\nInclude nodes-%c.conf\n")
    (tmp_path / "nodes-alpha.conf").write_text("NodeName=gpu01 Gres=gpu:a100:1\n")
    gres = tmp_path / "gres.conf"
    gres.write_text("NodeName=gpu01 Name=gpu Type=a100 File=/dev/nvidia0\n")
    assert _check(capsys, str(gres), "--slurm-conf", str(tmp_path / "slurm.conf")) == (
        0, f"{gres}: no findings\n", "")
    gres.write_text("Include more-%c.conf\n")
    assert _check(capsys, str(gres)) == (
        2, "", f"dlgres: {gres}:1: Include more-%c.conf: %c needs a ClusterName= line before it "
               "in this file (slurmd and slurmctld stop: 'Did not get ClusterName for include "
               "path')\n")
