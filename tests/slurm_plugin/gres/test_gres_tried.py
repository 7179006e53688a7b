"""``dlgres --check`` against what ``slurmd -G`` of Debian's Slurm does with the same gres.conf:
22.05.8 (bookworm), 24.11.5 (trixie) and 26.05.5 (sid), each run with a minimal slurm.conf
(``AuthType=auth/none``, node ``n1``, ``Gres=gpu:2`` unless a test says otherwise) and
``File=`` paths made with ``mknod`` (char 195 N). Each docstring quotes what slurmd printed;
the expected findings follow from it. docs/admins.md has the table of all rules tried."""

from __future__ import annotations

from pathlib import Path

from slurm_plugin.gres.check import check_gres
from slurm_plugin.gres.conf import parse_gres_conf
from slurm_plugin.gres.release import Release
from slurm_plugin.gres.slurmconf import parse_slurm_conf
from slurm_plugin.gres.topo_cpu import CpuTopology


def _lines(text: str, release: str, **kw) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in check_gres(text, release=Release(release, "test"), **kw)]


def test_autodetect_plugin_missing_names_the_release_build(tmp_path: Path):
    """Debian's 24.11 and 26.05 have no gpu_nvml.so (slurmd -G, AutoDetect=nvml: "We were configured
    with nvml functionality, but that lib wasn't found on the system" on 24.11, "... we weren't able
    to find that lib when Slurm was configured" on 26.05), and Debian's 24.11 has no gpu_oneapi.so
    ("Configured with oneAPI, but oneAPI isn't enabled during the build"); Debian's 26.05 has it."""
    (tmp_path / "gres_gpu.so").touch()
    for value, so, release in (("nvml", "gpu_nvml.so", "24.11"), ("nvml", "gpu_nvml.so", "26.05"),
                               ("oneapi", "gpu_oneapi.so", "24.11")):
        got = _lines(f"AutoDetect={value}\nName=gpu File=/dev/nvidia0\n", release, plugin_dirs=[str(tmp_path)])
        assert got == [(1, f"AutoDetect={value}: this Slurm has no {so} (in {tmp_path}; Debian's {release} is built "
                           "without it): slurmd logs that the library was not found and detects nothing; give File= "
                           "lines (dlgres writes them)")], (value, release)
    got = _lines("AutoDetect=oneapi\nName=gpu File=/dev/nvidia0\n", "26.05", plugin_dirs=[str(tmp_path)])
    assert [m.split("; ")[1].split(")")[0] for _, m in got] == ["Debian's 26.05 has it: is this the plugin directory?"]


SOCKETS = CpuTopology.from_shape(2, 4)
"""The node of the Cores tries: slurm.conf ``Sockets=2 CoresPerSocket=4 ThreadsPerCore=1``, slurmd
run with ``HWLOC_SYNTHETIC='package:2 core:4 pu:1'``."""


def test_cpus_key_names_the_release_checked():
    """``CPUs=`` is in none of the three man pages; slurmd -G of 24.11 and 26.05 takes
    ``CPUs=0-3`` without a message (it prints ``Cores=0-3``), as 22.05 does."""
    for release in ("24.11", "26.05"):
        got = _lines("Name=gpu File=/dev/nvidia0 CPUs=0-3\nName=gpu File=/dev/nvidia1 CPUs=4-7\n", release,
                     shape=SOCKETS)
        assert got == [(1, f"CPUs= is not in gres.conf(5) of Slurm {release}: use Cores= with logical core indices "
                           "(on this node shape: Cores=0-3)"),
                       (2, f"CPUs= is not in gres.conf(5) of Slurm {release}: use Cores= with logical core indices "
                           "(on this node shape: Cores=4-7)")], release


def test_part_of_a_socket_in_cores_is_taken_by_slurmd():
    """gres.conf(5) of 24.11 and 26.05: "all the cores in a socket* must be specified together";
    slurmd -G of both takes ``Cores=0-1`` and ``Cores=2-5`` on 2 sockets of 4 cores without a
    message (``Gres Name=gpu ... Cores=0-1 CoreCnt=8``)."""
    got = _lines("Name=gpu File=/dev/nvidia0 Cores=0-1\nName=gpu File=/dev/nvidia1 Cores=4-7\n", "24.11",
                 shape=SOCKETS)
    assert got == [(1, "Cores=0-1: part of socket(s) 0 (cores 0-3): gres.conf(5) of Slurm 24.11 wants all the cores "
                       "of a socket given together (slurmd 24.11 starts with it, without a message)")]


def test_typed_lines_without_file_add_up():
    """Two ``Name=nic Type=x Count=1`` lines (slurm.conf ``GresTypes=nic``, ``Gres=nic:x:2``): slurmd
    -G of 22.05, 24.11 and 26.05 lists both (``Gres Name=nic Type=x Count=1`` twice); without Type
    they stop it ("fatal: gres.conf duplicate records for nic")."""
    for release in ("22.05", "24.11", "26.05"):
        assert _lines("Name=nic Type=x Count=1\nName=nic Type=x Count=1\n", release) == [], release
        assert _lines("Name=nic Count=1\nName=nic Count=1\n", release) == [
            (2, "nic: a second line without File for this node (first: line 1): slurmd stops on duplicate records "
                "('gres.conf duplicate records for nic')")], release


def test_a_gpu_line_without_file_is_dropped():
    """``Name=gpu Count=2`` and ``Name=gpu Type=a Count=2`` (AutoDetect off): slurmd -G of 24.11 and
    26.05 warns "Ignoring file-less GPU gpu:(null) from final GRES list" (``gpu:a`` for the typed
    line) and lists no GPU, so the node registers fewer than its Gres=."""
    for release in ("24.11", "26.05"):
        assert _lines("Name=gpu Count=2\n", release) == [
            (1, f"Name=gpu without File=: slurmd {release} drops a GPU without a device file ('Ignoring file-less "
                "GPU gpu:(null) from final GRES list'), so the node registers fewer GPUs than its slurm.conf Gres= "
                "and slurmctld sets it INVALID; name the /dev/nvidiaN files")], release
        got = _lines("Name=gpu Type=a Count=2\n", release)
        assert [m.split(" (")[1].split(")")[0] for _, m in got] == [
            "'Ignoring file-less GPU gpu:a from final GRES list'"], release
        assert _lines("AutoDetect=nvidia\nName=gpu Count=2\n", release) == [], release


def test_one_sharing_with_all_sharing_on_a_line_starts_slurmd():
    """``Name=shard Count=4 Flags=one_sharing,all_sharing`` after ``Name=gpu File=/dev/nvidia[0-1]``
    (``GresTypes=gpu,shard``): slurmd -G of 24.11 and 26.05 starts and shows
    ``Flags=...,SHARED,ONE_SHARING`` on each shard; the line is used."""
    text = "Name=gpu File=/dev/nvidia[0-1]\nName=shard Count=4 Flags=one_sharing,all_sharing\n"
    for release in ("24.11", "26.05"):
        assert _lines(text, release) == [
            (2, f"Flags=one_sharing,all_sharing: one_sharing and all_sharing are not compatible (slurmd {release} "
                "starts with both and takes one_sharing); keep one")], release
        (rec,) = [r for r in parse_gres_conf(text, Release(release, "test")) if r.name == "shard"]
        assert rec.usable and rec.flags == {"one_sharing"}, release


_STOPS = ("'Flags ({0}) does not match env flags for previous GRES of same node and name'); write the same Flags= "
          "on every gpu line of a node")


def test_flags_on_24_11_are_whole_values():
    """slurmd -G of 24.11: ``Flags=explicit`` on a gpu line gives it no env flag
    (``Flags=Explicit,HAS_FILE``), and the next line without Flags= takes it whole
    (``Flags=Explicit,HAS_FILE`` again); ``Flags=explicit`` or ``Flags=CountOnly`` after a line
    without Flags= stops it ("Flags (explicit) does not match env flags for previous GRES of same
    node and name"); ``Flags=CountOnly,nvidia_gpu_env`` after ``Flags=nvidia_gpu_env`` too."""
    no_env = ("Flags={0} has no env flag: slurmd 24.11 then sets no GPU variable (CUDA_VISIBLE_DEVICES and the "
              "like) for this line; add nvidia_gpu_env (or the vendor's)")
    assert _lines("Name=gpu File=/dev/nvidia0 Flags=explicit\nName=gpu File=/dev/nvidia1\n", "24.11") == [
        (1, no_env.format("explicit")),
        (2, "Flags: inherits explicit from line 1 (slurmd 24.11: it carries a line's Flags= to the next gpu line of "
            "the same node that has none, on this node): write Flags=explicit on this line")]
    assert _lines("Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1 Flags=CountOnly\n", "24.11") == [
        (2, no_env.format("CountOnly")),
        (2, "Flags=CountOnly: not the same as line 1's default env flags (no Flags=) for gpu on this node: slurmd "
            "24.11 stops (" + _STOPS.format("CountOnly"))]
    got = _lines("Name=gpu File=/dev/nvidia0 Flags=nvidia_gpu_env\n"
                 "Name=gpu File=/dev/nvidia1 Flags=CountOnly,nvidia_gpu_env\n", "24.11")
    assert got == [(2, "Flags=CountOnly,nvidia_gpu_env: not the same as line 1's Flags=nvidia_gpu_env for gpu on "
                       "this node: slurmd 24.11 stops (" + _STOPS.format("CountOnly,nvidia_gpu_env"))]


def test_flags_on_26_05_without_env_keep_the_default():
    """slurmd -G of 26.05: ``Flags=explicit`` after ``Flags=nvidia_gpu_env`` starts, the second GPU
    with ``Flags=Explicit,HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT`` (the
    default env flags, not the first line's ``ENV_NVML``); a value with env flags is compared
    whole: ``Flags=CountOnly,nvidia_gpu_env`` after ``Flags=nvidia_gpu_env`` stops it."""
    assert _lines("Name=gpu File=/dev/nvidia0 Flags=nvidia_gpu_env\nName=gpu File=/dev/nvidia1 Flags=explicit\n",
                  "26.05") == [
        (2, "Flags=explicit has no env flag: slurmd 26.05 gives this line the default env flags (amd_gpu_env,"
            "intel_gpu_env,nvidia_gpu_env,opencl_env), not line 1's nvidia_gpu_env; write "
            "Flags=explicit,nvidia_gpu_env")]
    assert _lines("Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1 Flags=CountOnly\n", "26.05") == []
    got = _lines("Name=gpu File=/dev/nvidia0 Flags=nvidia_gpu_env\n"
                 "Name=gpu File=/dev/nvidia1 Flags=CountOnly,nvidia_gpu_env\n", "26.05")
    assert got == [(2, "Flags=CountOnly,nvidia_gpu_env: not the same as line 1's Flags=nvidia_gpu_env for gpu on "
                       "this node: slurmd 26.05 stops (" + _STOPS.format("CountOnly,nvidia_gpu_env"))]


def test_env_flags_on_22_05_are_compared_before_autodetect():
    """slurmd -G of 22.05 stops on ``AutoDetect=nvml``, a gpu line without Flags, then one with
    ``Flags=nvidia_gpu_env`` ("Flags (nvidia_gpu_env) does not match env flags for previous GRES of
    same node and name"): the line without Flags has the four default env flags when compared."""
    text = "AutoDetect=nvml\nName=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1 Flags=nvidia_gpu_env\n"
    assert _lines(text, "22.05") == [
        (3, "Flags: env flags nvidia_gpu_env differ from line 2's amd_gpu_env,intel_gpu_env,nvidia_gpu_env,"
            "opencl_env for gpu on this node: they must be the same for every line of a node and name (slurmd "
            "does not start)")]


def test_env_uuid_without_autodetect_falls_back_to_indices():
    """slurmd -G of 26.05, ``Name=gpu File=/dev/nvidia[0-1] Flags=env_uuid`` without AutoDetect:
    it starts and warns "Flags=env_uuid set but no GPU UUID available for device /dev/nvidia[0-1].
    Falling back to numeric indices." """
    assert _lines("Name=gpu File=/dev/nvidia[0-1] Flags=env_uuid\n", "26.05") == [
        (1, "Flags=env_uuid without AutoDetect on this node: slurmd 26.05 has no UUID to give (it warns "
            "'Flags=env_uuid set but no GPU UUID available for device /dev/nvidia[0-1]. Falling back to numeric "
            "indices.'); set AutoDetect=nvml or nvidia, or drop the flag")]


def test_untyped_lines_on_a_typed_node_leave_it_without_gpus():
    """slurm.conf ``Gres=gpu:a:2``, gres.conf ``Name=gpu File=/dev/nvidia[0-1]``: slurmd -G of 24.11
    and 26.05 warns "Ignoring file-less GPU gpu:a from final GRES list" and lists no GPU (22.05: "A
    line in gres.conf for GRES gpu has 2 more configured than expected in slurm.conf", no GPU)."""
    slurm = parse_slurm_conf("GresTypes=gpu\nNodeName=n1 Gres=gpu:a:2\n")
    for release in ("24.11", "26.05"):
        assert _lines("Name=gpu File=/dev/nvidia[0-1]\n", release, slurm=slurm) == [
            (1, "gpu: lines without Type, but slurm.conf Gres= of n1 gives only types (a): slurmd ignores them ('A "
                "line in gres.conf for GRES gpu has 2 more configured than expected in slurm.conf'); give them "
                "Type="),
            (1, f"gpu:a: slurm.conf Gres= of n1 gives 2 but no line here does: slurmd {release} drops a GPU without "
                "a device file ('Ignoring file-less GPU gpu:a from final GRES list'), so slurmctld sets the node "
                "INVALID; give gpu:a its File= lines")], release


def test_fewer_shared_gres_than_slurm_conf_stop_slurmd():
    """``Gres=gpu:2,shard:8`` with ``Name=shard Count=4``: slurmd -G of 22.05, 24.11 and 26.05 stops
    ("fatal: _build_shared_list: bad configuration, multiple configurations without "File"");
    ``Gres=gpu:2,mps:200`` with ``Name=mps Count=100 File=/dev/nvidia[0-1]``: "fatal:
    _build_shared_list: multiple configurations with and without "File"". Fewer gpu make the node
    INVALID instead."""
    gpus = "Name=gpu File=/dev/nvidia[0-1]\n"
    shard = parse_slurm_conf("GresTypes=gpu,shard\nNodeName=n1 Gres=gpu:2,shard:8\n")
    mps = parse_slurm_conf("GresTypes=gpu,mps\nNodeName=n1 Gres=gpu:2,mps:200\n")
    for release in ("24.11", "26.05"):
        assert _lines(gpus + "Name=shard Count=4\n", release, slurm=shard) == [
            (2, "shard: 4 here but slurm.conf Gres= of n1 says 8: slurmd stops ('_build_shared_list: bad "
                "configuration, multiple configurations without \"File\"'); give 8 here")], release
        assert _lines(gpus + "Name=mps Count=100 File=/dev/nvidia[0-1]\n", release, slurm=mps) == [
            (2, "mps: 100 here but slurm.conf Gres= of n1 says 200: slurmd stops ('_build_shared_list: multiple "
                "configurations with and without \"File\"'); give 200 here")], release


def test_links_slurmd_cannot_read_are_ignored_and_others_taken():
    """slurmd -G of 22.05, 24.11 and 26.05 check each Links= on its own (gres.c
    ``gres_links_validate``) and go on without the Links they refuse: ``Links=0,0`` "error:
    gres_links_validate: -1 wasn't found in links string '0,0'", ``Links=-1,a`` "Failed to parse
    token 'a' in links string '-1,a'" (``1024`` the same; ``1023`` and ``-2`` are taken),
    ``Links=-1,-1`` "links string '-1,-1' has more than one -1", each followed by "error: gres.conf:
    Ignoring invalid Links=... for Name=gpu" and the GPU listed with ``Links=(null)``. They take
    without a message ``Links=-1,0,0`` on a node of 2 GPUs, ``-1,1`` and ``2,-1`` (asymmetric),
    ``0,-1`` on the first GPU, an empty entry (``-1,,0``) and ``File=/dev/nvidia[0-1] Links=-1,0``."""
    ignored = ("Links={0}: slurmd ignores these Links ('gres_links_validate: {1}', then 'gres.conf: Ignoring invalid "
               "Links={0} for Name=gpu'); give one integer per GPU, -1 for itself")
    for release in ("22.05", "24.11", "26.05"):
        for bad, said in (("0,0", "-1 wasn't found in links string '0,0'"),
                          ("-1,a", "Failed to parse token 'a' in links string '-1,a'"),
                          ("-1,1024", "Failed to parse token '1024' in links string '-1,1024'"),
                          ("-1,-1", "links string '-1,-1' has more than one -1")):
            got = _lines(f"Name=gpu File=/dev/nvidia0 Links={bad}\nName=gpu File=/dev/nvidia1 Links=0,-1\n", release)
            assert got == [(1, ignored.format(bad, said))], (release, bad)
        got = _lines("Name=gpu File=/dev/nvidia0 Links=-1,0,0\nName=gpu File=/dev/nvidia1 Links=0,-1\n"
                     "Name=gpu File=/dev/nvidia[2-3] Links=-1,0\n", release, slurm=parse_slurm_conf(
                         "GresTypes=gpu\nNodeName=n1 Gres=gpu:4\n"))
        assert [m.split(": ")[0] + " ... " + m.rsplit(" (", 1)[1] for _, m in got] == [
            "Links has 3 entries but the node has 4 GPUs ... slurmd takes it without a message)",
            "Links has 2 entries but the node has 4 GPUs ... slurmd takes it without a message)",
            "Links= with 2 files ... slurmd takes it without a message)"], release


def test_a_device_file_on_two_lines_of_a_name():
    """slurmd -G of 22.05, 24.11 and 26.05 (``GresTypes=gpu,nic,mps,fpga``): two ``Name=nic
    File=/dev/x`` lines stop it ("error: nic duplicate device file name (/dev/x)", "fatal: Gres NIC
    plugin failed to load configuration"), as gpu lines do; ``Name=mps Count=100 File=/dev/nvidia0``
    then ``Name=mps Count=100 File=/dev/nvidia[0-1]`` starts with "error: Discarding gres/'shared'
    configuration (File=/dev/nvidia0) without matching gres/'sharing' record" and mps 100 on
    nvidia0, 50 on nvidia1 (shard the same); a nic line and a gpu line on ``/dev/nvidia1`` start
    with both listed, without a message; two ``Name=fpga File=/dev/x`` lines (no plugin) start with
    both listed (24.11 and 26.05 log "error: fpga duplicate device file name (/dev/x)", 22.05
    nothing)."""
    gpus = "Name=gpu File=/dev/nvidia[0-1]\n"
    for release in ("22.05", "24.11", "26.05"):
        assert _lines(gpus + "Name=nic File=/dev/x\nName=nic File=/dev/x\n", release) == [
            (3, "File=/dev/x already given on line 2 for the same node(s): slurmd stops ('nic duplicate device file "
                "name (/dev/x)', then 'Gres NIC plugin failed to load configuration'); each device belongs to one "
                "line")], release
        assert _lines(gpus + "Name=mps Count=100 File=/dev/nvidia0\nName=mps Count=100 File=/dev/nvidia[0-1]\n",
                      release) == [
            (3, "File=/dev/nvidia0 already given on line 2 for mps on the same node(s): slurmd drops this line's mps "
                "on /dev/nvidia0 ('Discarding gres/'shared' configuration (File=/dev/nvidia0) without matching "
                "gres/'sharing' record') and starts with fewer mps; each device belongs to one mps line")], release
        assert _lines(gpus + "Name=nic File=/dev/nvidia1\n", release) == [], release
        assert _lines(gpus + "Name=fpga File=/dev/x\nName=fpga File=/dev/x\n", release) == [], release


def test_a_device_file_twice_in_one_line():
    """slurmd -G of 22.05, 24.11 and 26.05 keeps a file that a File= range names twice:
    ``Name=gpu File=/dev/nvidia[0,0]`` stops it ("error: gpu duplicate device file name
    (/dev/nvidia0)"), ``Name=nic File=/dev/x[1,1]`` alike; ``Name=mps Count=200
    File=/dev/nvidia[0,0]`` (beside ``Name=gpu File=/dev/nvidia[0-1]``) starts with "error:
    Discarding gres/'shared' configuration (File=/dev/nvidia0) without matching gres/'sharing'
    record" and ``Gres Name=mps ... Count=100 ... File=/dev/nvidia0``: 100 of the 200 mps."""
    for release in ("22.05", "24.11", "26.05"):
        assert _lines("Name=gpu File=/dev/nvidia[0,0]\n", release) == [
            (1, "File=/dev/nvidia0 given twice on this line: slurmd stops ('gpu duplicate device file name "
                "(/dev/nvidia0)', then 'Gres GPU plugin failed to load configuration'); each device belongs to one "
                "line")], release
        assert _lines("Name=gpu File=/dev/nvidia0\nName=nic File=/dev/x[1,1]\n", release) == [
            (2, "File=/dev/x1 given twice on this line: slurmd stops ('nic duplicate device file name (/dev/x1)', "
                "then 'Gres NIC plugin failed to load configuration'); each device belongs to one line")], release
        assert _lines("Name=gpu File=/dev/nvidia[0-1]\nName=mps Count=200 File=/dev/nvidia[0,0]\n", release) == [
            (2, "File=/dev/nvidia0 given twice on this mps line: slurmd drops this line's mps on /dev/nvidia0 "
                "('Discarding gres/'shared' configuration (File=/dev/nvidia0) without matching gres/'sharing' "
                "record') and starts with fewer mps; each device belongs to one mps line")], release


def test_slurmd_limits_a_range_of_files_not_a_node():
    """gres.conf(5): "Count is limited in size (currently 1024) for each node", but slurmd -G of
    22.05, 24.11 and 26.05 (one device node per file) starts with ``File=/dev/nvidia[0-1024]``,
    ``[0-4095]`` and ``[0-65535]`` (``Gres Name=gpu ... Count=65536``), and 22.05 with
    ``[0-65535,65536-65537]`` (Count=65538); each stops on ``File=/dev/nvidia[0-65536]``: "error:
    _parse_single_range: Too many hosts in range `0-65536'", "fatal: can't parse
    File=/dev/nvidia[0-65536]" (hostlist.c ``MAX_RANGE``, 64K names a range)."""
    for release in ("22.05", "24.11", "26.05"):
        assert _lines("Name=gpu File=/dev/nvidia[0-1024]\n", release) == [
            (1, "this node: 1025 device files: gres.conf(5) says at most 1024 per node ('Count is limited in size "
                "(currently 1024) for each node'); slurmd starts with them, without a message")], release
        assert _lines("Name=gpu File=/dev/nvidia[0-65536]\n", release) == [
            (1, "File=/dev/nvidia[0-65536]: the range 0-65536 names more than 65536 files: slurmd stops "
                "('_parse_single_range: Too many hosts in range `0-65536'', then 'can't parse "
                "File=/dev/nvidia[0-65536]')")], release
        (rec,) = parse_gres_conf("Name=gpu File=/dev/nvidia[0-65535]\n", Release(release, "test"))
        assert rec.usable and rec.count == 65536, release
