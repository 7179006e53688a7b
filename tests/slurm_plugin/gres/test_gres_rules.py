"""``dlgres --check``: one test per gres.conf(5) rule of Slurm 22.05 (and the slurm.conf(5) rules
that tie it to GresTypes and a node's ``Gres=``). Each docstring quotes the man page; what slurmd
22.05 does with the fault was tried with ``slurmd -G`` (tests/live/test_gres_live.py repeats a few).
Expected messages are written here from the rule, not copied from the checker's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.gres.check import check_gres
from slurm_plugin.gres.cli import main
from slurm_plugin.gres.slurmconf import SlurmConfError, parse_node_gres, parse_slurm_conf

SLURM = parse_slurm_conf(
    "GresTypes=gpu,mps\n"
    "NodeName=DEFAULT Sockets=2 CoresPerSocket=8\n"
    "NodeName=n[01-02] Gres=gpu:a100:2\n"
    "NodeName=n03 Gres=gpu:2,mps:200\n"
)


def _lines(text: str, **kw) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in check_gres(text, **kw)]


def _only(text: str, line: int, *words: str, **kw) -> None:
    """Exactly one finding, on ``line``, whose message holds every word."""
    got = _lines(text, **kw)
    assert len(got) == 1, got
    assert got[0][0] == line, got
    for w in words:
        assert w in got[0][1], (w, got)


# --- the line itself ------------------------------------------------------------------------

def test_first_key_is_nodename_name_or_autodetect():
    """gres.conf(5): "the first parameter on the line should be NodeName. If configuring Generic
    Resources without specifying nodes, the first parameter on the line should be Name."
    (slurmd: "Parsing error at unrecognized key: NodeName", fatal.)"""
    _only("Name=gpu NodeName=n01 File=/dev/nvidia0\n", 1, "NodeName= must be the first key")
    _only("File=/dev/nvidia0 Name=gpu\n", 1, "starts with 'file'")
    assert _lines("NodeName=n01 Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\nAutoDetect=off\n") == []


def test_parameter_names_are_case_insensitive():
    """gres.conf(5): "Parameter names are case insensitive." """
    assert _lines("nodename=n01 NAME=gpu FiLe=/dev/nvidia0 COREs=0-3\n") == []


def test_unknown_key():
    """gres.conf(5) lists the keys AutoDetect, Count, Cores, File, Flags, Links, MultipleFiles, Name,
    NodeName, Type (slurmd: a parse error, fatal)."""
    _only("Name=gpu Fiel=/dev/nvidia0\n", 1, "unknown key 'fiel'")


def test_a_gres_line_needs_a_name():
    """gres.conf(5), Name: "Name of the generic resource." (slurmd: "Invalid GRES data, no type
    name", the line is dropped.)"""
    _only("NodeName=n01 Type=a100 File=/dev/nvidia0\n", 1, "no Name=")


def test_comments_run_to_the_end_of_the_line():
    """gres.conf(5): "Any text following a "#" in the configuration file is treated as a comment
    through the end of that line." """
    assert _lines("# Name=gpu Bogus=1\nName=gpu File=/dev/nvidia0 # Count=7\n") == []


# --- AutoDetect -------------------------------------------------------------------------------

def test_autodetect_values():
    """gres.conf(5), AutoDetect: "Currently, the options are: nvml ... off ... rsmi" (slurmd:
    "unknown autodetect flag", ignored)."""
    _only("AutoDetect=nvlm\nName=gpu File=/dev/nvidia0\n", 1, "AutoDetect=nvlm: unknown")


def test_autodetect_needs_its_library(tmp_path: Path):
    """gres.conf(5), AutoDetect nvml: "Automatically detect NVIDIA GPUs. Requires the NVIDIA
    Management Library (NVML)." Debian's Slurm 22.05 ships no gpu_nvml.so: slurmd logs "We were
    configured with nvml functionality, but that lib wasn't found" and detects nothing."""
    without = tmp_path / "plugins"
    without.mkdir()
    (without / "gpu_generic.so").write_bytes(b"")
    _only("AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", 1, "no gpu_nvml.so", plugin_dirs=[str(without)])
    (without / "gpu_nvml.so").write_bytes(b"")
    assert _lines("AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", plugin_dirs=[str(without)]) == []


def test_node_local_autodetect_must_agree():
    """gres.conf(5), AutoDetect: "A node-specific AutoDetect only needs to be specified once per
    node. If specified multiple times for the same nodes, they must all be the same value." """
    text = "NodeName=n[01-02] AutoDetect=nvml\nNodeName=n02 AutoDetect=off\nName=gpu File=/dev/nvidia0\n"
    _only(text, 2, "AutoDetect=off for n02 but line 1 set nvml")


def test_autodetect_cannot_be_used_with_cloud_nodes():
    """gres.conf(5), AutoDetect: "AutoDetect cannot be used with cloud nodes." """
    conf = parse_slurm_conf("GresTypes=gpu\nNodeName=c[1-2] State=CLOUD Gres=gpu:1\nNodeName=n01 Gres=gpu:1\n")
    _only("AutoDetect=off\nNodeName=c[1-2],n01 AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", 2,
          "AutoDetect=nvml on cloud node(s) c[1-2]", slurm=conf)
    assert _lines("NodeName=n01 AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", slurm=conf) == []


def test_autodetect_type_must_be_a_substring_of_the_detected_name():
    """gres.conf(5), Type: "If using autodetect functionality and defining the Type in your
    gres.conf file, the Type specified should match or be a substring of the value that is
    detected, using an underscore in lieu of any spaces." """
    names = ["NVIDIA H100 80GB HBM3"]
    _only("AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia0\n", 2, "Type=a100 is not part", detected=names)
    assert _lines("AutoDetect=nvml\nName=gpu Type=h100 File=/dev/nvidia0\n", detected=names) == []
    assert _lines("AutoDetect=nvml\nName=gpu Type=h100_80gb File=/dev/nvidia0\n", detected=names) == []


# --- Count ------------------------------------------------------------------------------------

def test_count_is_a_number_with_an_optional_suffix():
    """gres.conf(5), Count: "A suffix of "K", "M", "G", "T" or "P" may be used to multiply the number
    by 1024, 1048576, 1073741824, etc." (slurmd: "invalid count 1x", fatal.)"""
    _only("Name=bandwidth Count=1x\n", 1, "Count=1x: not a number")
    assert _lines("Name=bandwidth Type=lustre Count=4G Flags=CountOnly\n") == []


def test_count_with_file_is_the_number_of_files():
    """gres.conf(5), File: "If File is specified then Count must be either set to the number of file
    names specified or not set" (slurmd: "count does not match File value", fatal)."""
    _only("NodeName=n02 Name=gpu Type=a100 File=/dev/nvidia[0-1] Count=4\n", 1, "Count=4 but File= names 2 file(s)")
    assert _lines("NodeName=n02 Name=gpu Type=a100 File=/dev/nvidia[0-1] Count=2\n") == []


def test_mps_count_is_per_file():
    """gres.conf(5), File: "The exception to this is MPS/Sharding. ... Count would specify the number
    of entries that would correspond to that GPU." """
    assert _lines("Name=mps Count=100 File=/dev/nvidia0\n") == []


def test_at_most_1024_files_per_node():
    """gres.conf(5), File: "When specifying File, Count is limited in size (currently 1024) for each
    node." """
    text = "NodeName=n01 Name=gpu File=/dev/nvidia[0-1023]\nNodeName=n01 Name=gpu File=/dev/nvidia1024\n"
    _only(text, 2, "1025 device files: gres.conf(5) says at most 1024", "slurmd starts with them")


# --- File / MultipleFiles ---------------------------------------------------------------------

def test_file_and_multiplefiles_are_mutually_exclusive():
    """gres.conf(5), File: "File and MultipleFiles are mutually exclusive." (slurmd: fatal.)"""
    text = "NodeName=n03 Name=gpu Type=a100 File=/dev/nvidia0 MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n"
    _only(text, 1, "mutually exclusive")
    assert _lines("Name=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n") == []


def test_file_is_a_fully_qualified_path():
    """gres.conf(5), File: "Fully qualified pathname of the device files associated with a
    resource." (slurmd: "can't stat gres.conf file nvidia0", fatal.)"""
    _only("Name=gpu File=nvidia0\n", 1, "'nvidia0' is not a fully qualified path")


def test_file_is_required_for_typed_gpus():
    """gres.conf(5), File: "NOTE: File is required for all gpu typed GRES." slurmd -G of 22.05 lists
    no GPU for a gpu line without File, typed or not (``Name=nic Count=2`` is listed)."""
    _only("NodeName=n01 Name=gpu Type=a100 Count=2\n", 1, "Type=a100 without File=", "slurmd 22.05 drops")
    _only("NodeName=n01 Name=gpu Count=2\n", 1, "Name=gpu without File=", "without a message")


def test_file_on_all_records_of_a_gres_or_none():
    """gres.conf(5), File: "If you specify the File parameter for a resource on some node, the option
    must be specified on all nodes" (slurmd: "some records have "File" specification while others
    do not", fatal)."""
    _only("NodeName=n01 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n01 Name=gpu Count=2\n", 2,
          "line 1 gives File= but this line does not")


def test_file_on_all_nodes_of_a_gres_or_none():
    """gres.conf(5), File: "If you specify the File parameter for a resource on some node, the option
    must be specified on all nodes and Slurm will track the assignment of each specific resource on
    each node." """
    _only("NodeName=n01 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n02 Name=gpu Count=2\n", 2,
          "line 1 gives File= but this line does not")
    assert _lines("NodeName=n01 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n02 Name=gpu File=/dev/nvidia[0-1]\n") == []


def test_each_device_file_belongs_to_one_line():
    """gres.conf(5), File: "Slurm will track the assignment of each specific resource on each node":
    a file on two gpu lines of a node stops slurmd -G of 22.05, 24.11 and 26.05 ("gpu duplicate
    device file name (/dev/nvidia0)", "fatal: Gres GPU plugin failed to load configuration"),
    types or not."""
    _only("NodeName=a[1-2] Name=gpu File=/dev/nvidia0\nNodeName=a2 Name=gpu File=/dev/nvidia0\n", 2,
          "File=/dev/nvidia0 already given on line 1", "slurmd stops ('gpu duplicate device file name "
          "(/dev/nvidia0)', then 'Gres GPU plugin failed to load configuration')")


def test_node_names_keep_leading_zeros():
    """gres.conf(5), NodeName: "The NodeName specification can use a Slurm hostlist specification":
    ``gpu[01-02]`` is gpu01 and gpu02, not gpu1 (no clash with a ``gpu1`` line)."""
    text = "NodeName=gpu[01-02] Name=gpu File=/dev/nvidia0\nNodeName=gpu1 Name=gpu File=/dev/nvidia0\n"
    assert _lines(text) == []
    _only(text + "NodeName=gpu02 Name=gpu File=/dev/nvidia0\n", 3, "already given on line 1")


def test_duplicate_records_without_file():
    """gres.conf(5), Count: "Number of resources of this name/type available on this node." Two lines
    without File for one node, name and type (slurmd: "gres.conf duplicate records for gpu", fatal)."""
    _only("NodeName=n01 AutoDetect=off\nNodeName=n01 Name=gpu\nNodeName=n01 Name=gpu\n", 3,
          "a second line without File for n01 (first: line 2)")


# --- Flags ------------------------------------------------------------------------------------

def test_flags_values():
    """gres.conf(5), Flags: "Allowed values at present are: CountOnly, one_sharing, all_sharing,
    nvidia_gpu_env, amd_gpu_env, intel_gpu_env, opencl_env, no_gpu_env" (slurmd ignores others)."""
    _only("Name=gpu File=/dev/nvidia0 Flags=nvidia_env\n", 1, "unknown flag 'nvidia_env'")


def test_no_gpu_env_excludes_other_env_flags():
    """gres.conf(5), Flags no_gpu_env: "This is mutually exclusive to all other environment-related
    flags." (slurmd: fatal.)"""
    _only("Name=gpu File=/dev/nvidia0 Flags=no_gpu_env,nvidia_gpu_env\n", 1, "no_gpu_env excludes")


def test_one_sharing_and_all_sharing_exclude_each_other():
    """gres.conf(5), Flags one_sharing: "This flag is not combatible with all_sharing for a specific
    gres." """
    _only("Name=mps Count=100 File=/dev/nvidia0 Flags=one_sharing,all_sharing\n", 1, "not compatible")


def test_sharing_flags_are_for_shared_gres():
    """gres.conf(5), Flags one_sharing: "To be used on a shared gres." """
    _only("Name=gpu File=/dev/nvidia0 Flags=one_sharing\n", 1, "Flags=one_sharing on gpu: it is for a shared GRES")
    assert _lines("Name=gpu File=/dev/nvidia0\nName=mps Count=100 File=/dev/nvidia0 Flags=all_sharing\n") == []


def test_sharing_flags_are_global_for_a_gres():
    """gres.conf(5), Flags one_sharing: "If a gres has this flag configured it is global, so all other
    nodes with that gres will have this flag implied. This flag is not combatible with all_sharing
    for a specific gres." """
    text = ("NodeName=n01 Name=mps Count=100 File=/dev/nvidia0 Flags=one_sharing\n"
            "NodeName=n02 Name=mps Count=100 File=/dev/nvidia0 Flags=all_sharing\n")
    _only(text, 2, "line 1 sets one_sharing", "global")


def test_env_flags_are_inherited_by_the_line_below():
    """gres.conf(5), Flags: "Environment-related flags set on one GRES line will be inherited by the
    GRES line directly below it if no environment-related flags are specified on that line and if
    it is of the same node, name, and type."
    The inheriting line is reported with the line the flags come from, and the fix."""
    env_rule = "gres.conf(5): env flags carry to the next gpu line of the same node that sets none"
    text = "Name=gpu Type=a100 File=/dev/nvidia0 Flags=nvidia_gpu_env\nName=gpu Type=a100 File=/dev/nvidia1\n"
    assert _lines(text) == [(2, f"Flags: inherits nvidia_gpu_env from line 1 ({env_rule}, on this node): "
                                "write Flags=nvidia_gpu_env on this line")]
    # every line below the first inherits: each is reported, each naming line 1
    text = ("Name=gpu File=/dev/nvidia0 Flags=amd_gpu_env,opencl_env\n" + "".join(
        f"Name=gpu File=/dev/nvidia{i}\n" for i in (1, 2, 3)))
    assert _lines(text) == [(n, f"Flags: inherits amd_gpu_env,opencl_env from line 1 ({env_rule}, on this node): "
                                "write Flags=amd_gpu_env,opencl_env on this line") for n in (2, 3, 4)]
    # per node: line 2 is n01's second gpu line, n02 has one line
    text = "NodeName=n[01-02] Name=gpu File=/dev/nvidia0 Flags=nvidia_gpu_env\nNodeName=n01 Name=gpu File=/dev/nvidia1\n"
    assert _lines(text) == [(2, f"Flags: inherits nvidia_gpu_env from line 1 ({env_rule}, on n01): "
                                "write Flags=nvidia_gpu_env on this line")]
    # written on every line: nothing inherited
    text = "Name=gpu File=/dev/nvidia0 Flags=nvidia_gpu_env\nName=gpu File=/dev/nvidia1 Flags=nvidia_gpu_env\n"
    assert _lines(text) == []


def test_sharing_flag_is_inherited_by_every_line_of_the_gres():
    """gres.conf(5), Flags one_sharing: "If a gres has this flag configured it is global, so all other
    nodes with that gres will have this flag implied." The line that takes it silently is reported."""
    text = ("NodeName=n01 Name=mps Count=100 File=/dev/nvidia0 Flags=one_sharing\n"
            "NodeName=n02 Name=mps Count=100 File=/dev/nvidia0\n")
    assert _lines(text) == [(2, "Flags: inherits one_sharing from line 1 (gres.conf(5): one_sharing is global: "
                                "every mps line of every node takes it): write Flags=one_sharing on this line")]


def test_env_flags_must_be_the_same_for_a_node_and_name():
    """gres.conf(5), Flags: "Environment-related flags must be the same for GRES of the same node,
    name, and type." (slurmd 22.05 compares node and name: "does not match env flags for previous
    GRES of same node and name", fatal.)"""
    text = "Name=gpu Type=a100 File=/dev/nvidia0 Flags=nvidia_gpu_env\nName=gpu Type=a100 File=/dev/nvidia1 Flags=opencl_env\n"
    _only(text, 2, "env flags opencl_env differ from line 1's nvidia_gpu_env")


# --- Links and Cores (see also tests/slurm_plugin/gres/test_gres_check.py) ------------------------

def test_links_line_holds_a_single_file():
    """gres.conf(5), Links: "If specified, then this line can only contain a single GRES device
    (i.e. can only contain a single file via File)." """
    _only("Name=gpu File=/dev/nvidia[0-1] Links=-1,0\n", 1, "a line with Links must name a single File")


def test_links_minus_one_is_the_device_itself():
    """gres.conf(5), Links: "A -1 indicates the device itself and a 0 indicates no connection." """
    _only("Name=gpu File=/dev/nvidia0 Links=-1,2\nName=gpu File=/dev/nvidia1 Links=2,2\n", 2,
          "-1 wasn't found", "slurmd ignores these Links")


# --- slurm.conf ---------------------------------------------------------------------------------

def test_name_must_be_in_grestypes():
    """gres.conf(5), Name: "The name must match a value in GresTypes in slurm.conf." (slurmd:
    "Ignoring gres.conf record, invalid name".)"""
    _only("NodeName=n01 Name=shard Count=4\nNodeName=n01 Name=gpu Type=a100 File=/dev/nvidia[0-1]\n", 1,
          "Name=shard is not in slurm.conf GresTypes (gpu,mps)", slurm=SLURM)


def test_count_must_match_the_nodes_gres():
    """slurm.conf(5), Gres: "The final field must specify a generic resources count." Fewer GPUs in
    gres.conf than the node's Gres= make the node INVALID (seen live: "gres/gpu count reported lower
    than configured (7 < 8)"); more are ignored (slurmd: "has 1 more configured
    than expected in slurm.conf. Ignoring extra GRES")."""
    _only("NodeName=n[01-02] Name=gpu Type=a100 File=/dev/nvidia0\n", 1,
          "gpu:a100: 1 here but slurm.conf Gres= of n[01-02] says 2", slurm=SLURM)
    _only("NodeName=n01 Name=gpu Type=a100 File=/dev/nvidia[0-2]\n", 1, "3 here", "says 2", "ignores", slurm=SLURM)
    assert _lines("NodeName=n[01-02] Name=gpu Type=a100 File=/dev/nvidia[0-1]\n"
                  "NodeName=n03 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n03 Name=mps Count=200 File=/dev/nvidia[0-1]\n",
                  slurm=SLURM) == []


def test_type_must_be_one_of_the_nodes_types():
    """slurm.conf(5), Gres: "The optional type field might be used to identify a model of that
    generic resource." A gres.conf type the node's Gres= lacks is ignored by slurmd, and the
    node's own type, given by no line, has no File: slurmd -G of 22.05 with ``Gres=gpu:a:2`` and
    ``Name=gpu Type=b File=...``: "A line in gres.conf for GRES gpu:b has 2 more configured than
    expected in slurm.conf", and no GPU listed."""
    assert _lines("NodeName=n01 Name=gpu Type=v100 File=/dev/nvidia[0-1]\n", slurm=SLURM) == [
        (1, "gpu:v100: slurm.conf Gres= of n01 has no type v100 (a100): slurmd ignores these GRES"),
        (1, "gpu:a100: slurm.conf Gres= of n01 gives 2 but no line here does: slurmd 22.05 drops a GPU without a "
            "device file (without a message), so slurmctld sets the node INVALID; give gpu:a100 its File= lines")]


def test_nodename_must_be_a_node_of_slurm_conf():
    """gres.conf(5), NodeName: "specifying the node(s) that each line should apply to": a name no
    node of slurm.conf has (here n1 for n01) configures nothing."""
    _only("NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-1]\n", 1, "n1 not in slurm.conf", slurm=SLURM)


def test_slurm_conf_gres_format():
    """slurm.conf(5), Gres: "The format is: "<name>[:<type>][:no_consume]:<number>[K|M|G]"." """
    assert parse_node_gres("slurm.conf:1", "gpu:tesla:1,gpu:kepler:1,bandwidth:lustre:no_consume:4G") == {
        ("gpu", "tesla"): 1, ("gpu", "kepler"): 1, ("bandwidth", "lustre"): 4 * 1024**3}
    with pytest.raises(SlurmConfError, match="^slurm.conf:3: Gres=gpu:a100"):
        parse_node_gres("slurm.conf:3", "gpu:a100")


# --- no cascade, and the CLI ---------------------------------------------------------------------

def test_one_bad_line_does_not_cascade():
    """A line slurmd cannot use is reported once; the lines after it are not judged by a GPU
    numbering or a count it would have changed."""
    text = ("NodeName=n01 Name=gpu Type=a100 File=/dev/nvidia[0-1 Links=-1,0\n"  # cut range
            "NodeName=n01 Name=gpu Type=a100 File=/dev/nvidia1 Links=0,-1\n")
    got = _lines(text, slurm=SLURM)
    assert [g[0] for g in got] == [1], got
    assert _lines("NodeName=n01 Name=gpu Type=a100 File=/dev/nvidia0 Count=1x\n"
                  "NodeName=n01 Name=gpu Type=a100 File=/dev/nvidia1\n", slurm=SLURM)[0][0] == 1
    assert len(_lines("NodeName=n01 Name=gpu Type=a100 File=/dev/nvidia0 Count=1x\n"
                      "NodeName=n01 Name=gpu Type=a100 File=/dev/nvidia1\n", slurm=SLURM)) == 1


def test_cli_reads_slurm_conf_and_plugin_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"GresTypes=gpu\nPluginDir={tmp_path}\nNodeName=n01 Gres=gpu:a100:2\n")
    gres = tmp_path / "gres.conf"
    gres.write_text("NodeName=n01 AutoDetect=nvml\nNodeName=n01 Name=gpu\nNodeName=n01 Name=gpu\n")
    assert main(["--check", str(gres), "--slurm-conf", str(conf)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{gres}:1: AutoDetect=nvml: this Slurm has no gpu_nvml.so (in {tmp_path};")
    assert out[1].startswith(f"{gres}:2: gpu: lines without Type, but slurm.conf Gres= of n01 gives only types")
    assert out[2].startswith(f"{gres}:2: gpu:a100: slurm.conf Gres= of n01 gives 2 but no line here does")
    assert out[3].startswith(f"{gres}:3: gpu: a second line without File for n01 (first: line 2)")
    bad = tmp_path / "bad.conf"
    bad.write_text("NodeName=n01 Gres=gpu:a100\n")
    assert main(["--check", str(gres), "--slurm-conf", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"dlgres: {bad}:1: Gres=gpu:a100: item")


def test_cli_checks_type_against_recorded_nvml_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """gres.conf(5), Type: "the Type specified should match or be a substring of the value that is
    detected" — the names come from --fake-nvml (an HGX H100 record: "NVIDIA H100 80GB HBM3")."""
    nvml = Path(__file__).resolve().parents[2] / "fixtures" / "nvml" / "hgx-h100.json"
    gres = tmp_path / "gres.conf"
    gres.write_text("AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia0\n")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "gpu_nvml.so").write_bytes(b"")
    assert main(["--check", str(gres), "--fake-nvml", str(nvml), "--plugin-dir", str(plugins)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{gres}:2: Type=a100 is not part of any GPU name NVML reports (NVIDIA H100 80GB HBM3)")
    gres.write_text("AutoDetect=nvml\nName=gpu Type=h100 File=/dev/nvidia0\n")
    assert main(["--check", str(gres), "--fake-nvml", str(nvml), "--plugin-dir", str(plugins)]) == 0


def test_an_untyped_node_gres_drops_the_type():
    """slurm.conf(5), Gres: "The optional type field might be used to identify a model of that
    generic resource." A node with Gres=gpu:2 (no type) and typed gres.conf lines: slurmd warns
    ("has 2 more configured than expected") and uses them without their type."""
    _only("NodeName=n03 Name=gpu Type=a100 File=/dev/nvidia[0-1]\n", 1,
          "Type=a100 but slurm.conf Gres= of n03 has no type (gpu:2)", slurm=SLURM)
    assert _lines("NodeName=n03 Name=gpu File=/dev/nvidia[0-1]\n", slurm=SLURM) == []
    got = _lines("NodeName=n03 Name=gpu File=/dev/nvidia0\n", slurm=SLURM)
    assert got == [(1, "gpu: 1 here but slurm.conf Gres= of n03 says 2: slurmctld sets the node INVALID "
                   "('gres/gpu count reported lower than configured')")]


@pytest.mark.parametrize("text, name", [
    ("ClusterName=Alpha\n", "alpha"),
    ("clustername = Gamma   # ours\n", "gamma"),                        # blanks around '='
    ("# ClusterName=commented\nSlurmctldPort=1\n", None),
])
def test_slurm_conf_cluster_name(text: str, name: str | None) -> None:
    assert parse_slurm_conf(text).cluster_name == name


def test_slurm_conf_takes_one_key_per_line_outside_records() -> None:
    """parse_config.c parses one key per line (``_parse_next_key``) and the rest is a parse
    error; Debian's 22.05.8 ``scontrol show config`` on a slurm.conf ending in
    ``SlurmctldTimeout=121 SlurmdTimeout=301``: 'Parse error in file ... line 64: " SlurmdTimeout=301"'.
    A NodeName line holds its record's keys."""
    with pytest.raises(SlurmConfError) as err:
        parse_slurm_conf("GresTypes=gpu\nSlurmctldPort=6817 ClusterName=beta\n", "/etc/s.conf")
    assert str(err.value) == (
        "/etc/s.conf:2: ClusterName= after SlurmctldPort= on one line: Slurm reads one key per "
        "line outside NodeName, PartitionName, NodeSet, FrontendName and DownNodes lines "
        "(slurmctld and slurmd stop: 'Parse error in file'); put ClusterName on its own line")
    assert parse_slurm_conf("NodeName=n1 CPUs=8 Gres=gpu:2\n").node_gres == {"n1": {("gpu", ""): 2}}


def test_slurm_conf_blanks_around_equals_in_node_gres() -> None:
    conf = parse_slurm_conf("GresTypes = gpu\nNodeName = n1 Gres = gpu:a100:8\n")
    assert conf.gres_types == {"gpu"} and conf.node_gres == {"n1": {("gpu", "a100"): 8}}
