"""The sbatch renderer (submit/render.py, packing.py, quoting.py): packing, directives, quoting.

Packing expectations are computed by hand from the default node shape (8 GPUs, 16 cores,
64000 MiB). Quoting is checked against an emulation of sbatch's directive parser
(tests/submit_helpers.py) and by running the job section of the script in real bash.
"""

from __future__ import annotations

import subprocess

import pytest

from slurm_plugin import marker
from submit import load
from submit.model import Job, Port, Role
from submit.options import RenderOptions
from submit.packing import pack
from submit.quoting import slurm_name
from submit.render import render_sbatch
from submit.validation import SpecError
from submit_helpers import HOSTILE, bash_syntax_ok, option, sbatch_directives, v2_spec

OPTS = RenderOptions()


def role(instances: int = 1, cpus: int = 1, mem: int = 100, gpus: int = 0, **kw: object) -> Role:
    return Role(name=str(kw.pop("name", "main")), ident=str(kw.pop("ident", "main")),
                instances=instances, cpus=cpus, memory_mib=mem, gpus=gpus,
                command=str(kw.pop("command", "true")), path="taskRoles.main",
                fields=(("gpu", "resourcePerInstance.gpu"),), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("r", "placement", "expected"), [
    (role(4, 1, 1000, 2), "consolidate", (1, 4, 1000)),      # 8 // 2 = 4 per node
    (role(2, 1, 1000, 8), "consolidate", (2, 1, 1000)),      # a node per instance
    (role(3, 1, 1000, 3), "consolidate", (2, 2, 1000)),      # 8 // 3 = 2 -> 2 nodes, 2 + 1
    (role(5, 4, 100, 0), "consolidate", (2, 3, 25)),         # 16 // 4 = 4 -> 2 nodes, 3 + 2
    (role(3, 3, 20000, 0), "consolidate", (1, 3, 6667)),     # 3 x 3 x 6667 = 60003 <= 64000
    (role(4, 3, 20000, 0), "consolidate", (2, 2, 6667)),     # 64000 // 20001 = 3 -> 2 nodes
    (role(3, 1, 100, 1), "spread", (3, 1, 100)),
], ids=lambda x: None)
def test_pack(r: Role, placement: str, expected: tuple[int, int, int]) -> None:
    lay = pack(r, placement, OPTS)
    assert (lay.nodes, lay.tasks_per_node, lay.mem_per_cpu_mib) == expected


def test_pack_too_big_names_the_field() -> None:
    with pytest.raises(SpecError) as info:
        pack(role(1, 1, 100, 9), "consolidate", OPTS)
    assert info.value.problems == [
        "taskRoles.main.resourcePerInstance.gpu: 9 per instance does not fit on one node (8 GPUs "
        "per node; see --gpus-per-node, --cores-per-node, --mem-per-node)"]


def test_node_shape_option_changes_packing() -> None:
    lay = pack(role(4, 1, 100, 2), "consolidate", RenderOptions(gpus_per_node=4))
    assert (lay.nodes, lay.tasks_per_node) == (2, 2)


def job(*roles: Role, **kw: object) -> Job:
    return Job(name=str(kw.pop("name", "j")), roles=roles, **kw)  # type: ignore[arg-type]


def test_contract_marker_parses_back() -> None:
    script = render_sbatch(job(role(), signal="USR1", grace_s=90), OPTS)
    [args] = sbatch_directives(script)
    assert option(args, "signal") == ["B:USR1@90"]
    assert marker.parse(option(args, "comment")[0]) == marker.CheckpointContract("USR1", 90)


def test_gpu_type_binding_and_cpu_roles() -> None:
    script = render_sbatch(job(role(2, gpus=2), role(1, name="cpu", ident="cpu"), gpu_type="a100"),
                           RenderOptions(enforce_binding=True, partition="p1"))
    gpu, cpu = sbatch_directives(script)
    assert option(gpu, "gres") == ["gpu:a100:4"] and option(gpu, "gres-flags") == ["enforce-binding"]
    assert option(cpu, "gres") == [] and option(cpu, "gres-flags") == []
    assert option(gpu, "partition") == option(cpu, "partition") == ["p1"]


def test_array_needs_equal_resources() -> None:
    with pytest.raises(SpecError, match="extras.gangAllocation: false .* taskRoles.main differs"):
        render_sbatch(job(role(1, gpus=1), role(2), gang=False), OPTS)


def test_too_many_ports() -> None:
    # 7000 tasks x (1 own port + 3 declared) = 28000
    with pytest.raises(SpecError, match="28000 ports requested in all; at most 25000"):
        render_sbatch(job(role(7000, ports=(Port("a", 3),))), OPTS)


def _job_section_values(script: str) -> list[str]:
    """Run the job section of ``script`` in bash and return the values it assigned."""
    section = script.split("# ---- this job ----\n", 1)[1].split("read -r -d ''", 1)[0]
    show = ('printf "%s\\0" "$DL_JOB_NAME" "${DL_ROLE_NAME[@]}" "${DL_ROLE_COMMAND[@]}" '
            '"${DL_ROLE_IMAGE[@]}" "$PAI_DATA_DIR" "$DL_CHECKPOINT_ROOT" "${DL_JOB_ENV[@]}"')
    out = subprocess.run(["bash", "-c", section + "\n" + show], capture_output=True, check=True)
    return out.stdout.decode().split("\0")[:-1]


def image_of(text: str) -> str:
    """``text`` as a container image may be written: without spaces or control characters,
    not starting with '-' (quotes, ``$()``, ``#SBATCH``, globs and unicode stay)."""
    return "".join(c for c in text if c.isprintable() and not c.isspace()).lstrip("-") or "x"


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_strings_survive_every_layer(text: str) -> None:
    spec = {"jobName": text, "image": image_of(text), "dataDir": text, "jobEnvs": {"MYENV": text},
            "taskRoles": [{"name": text, "taskNumber": 1, "cpuNumber": 1, "memoryMB": 10,
                           "gpuNumber": 0, "command": text}]}
    j = load.to_job(spec)
    one_line = slurm_name(text)
    opts = RenderOptions(partition="gpu-a.1", output=one_line, checkpoint_root=one_line,
                         container_runtime="apptainer")
    script = render_sbatch(j, opts)
    ok, err = bash_syntax_ok(script)
    assert ok, err
    [args] = sbatch_directives(script)
    assert option(args, "job-name") == [slurm_name(text)]
    assert option(args, "partition") == ["gpu-a.1"]
    assert option(args, "output") == [one_line]
    written = image_of(text)
    image = written if "://" in written or written.startswith("/") else "docker://" + written
    assert _job_section_values(script) == [text, text, text, image, text, one_line, "MYENV=" + text]


@pytest.mark.parametrize("image", ["$(id) --privileged", "-v/:/host", "img\nname", "a\tb", ""])
def test_an_image_that_no_runtime_could_read_is_refused(image: str) -> None:
    """Spaces, control characters and a leading '-' (an option to the runtime) make no image
    reference; v1's ``image`` and v2's dockerimage ``uri`` say so on one line each."""
    rule = ("must be one container image reference: no spaces or control characters, not "
            "starting with '-' (e.g. nvcr.io/nvidia/pytorch:24.01-py3, ./pt.sqsh, pt.sif)")
    v1 = {"jobName": "j", "image": image, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 10, "gpuNumber": 0,
         "command": "true"}]}
    with pytest.raises(SpecError) as err:
        load.to_job(v1)
    assert err.value.problems == ([f"image: {rule}"] if image else ["image: must not be empty"])
    if image:
        v2 = v2_spec(prerequisites=[{"type": "dockerimage", "name": "i", "uri": image}])
        v2["taskRoles"]["main"]["dockerImage"] = "i"
        v2["taskRoles"]["main"]["commands"] = ["run <% $parameters.nope %>"]
        with pytest.raises(SpecError) as err:
            load.to_job(v2)
        assert err.value.problems[0] == (f"taskRoles.main.dockerImage: the uri of prerequisite "
                                         f"'i' {rule}")
        assert len(err.value.problems) == 2   # the role's bad command is reported beside it


def test_slurm_name_sanitises_control_characters_only() -> None:
    assert slurm_name("a\nb\tc\x7fd ü #") == "a_b_c_d ü #"


@pytest.mark.parametrize(("runtime", "uri", "expected"), [
    ("pyxis", "nvcr.io/nvidia/pytorch:23.10-py3", "nvcr.io#nvidia/pytorch:23.10-py3"),
    ("pyxis", "localhost:5000/img", "localhost:5000#img"),
    ("pyxis", "horovod/horovod:0.16.4", "horovod/horovod:0.16.4"),
    ("apptainer", "horovod/horovod:0.16.4", "docker://horovod/horovod:0.16.4"),
    ("apptainer", "/images/x.sif", "/images/x.sif"),
    ("none", "horovod/horovod:0.16.4", ""),
    # pyxis reads --container-image as a squashfs file only when it starts with "/" or ".";
    # a bare name is a registry image (NVIDIA/pyxis wiki, Usage: "[USER@][REGISTRY#]IMAGE[:TAG]|PATH")
    ("pyxis", "pt.sqsh", "./pt.sqsh"),
    ("pyxis", "images/pt.sqsh", "./images/pt.sqsh"),
    ("pyxis", "images/pt.squashfs", "./images/pt.squashfs"),
    ("pyxis", "./pt.sqsh", "./pt.sqsh"),
    ("pyxis", "../pt.sqsh", "../pt.sqsh"),
    ("pyxis", "/srv/images/pt.sqsh", "/srv/images/pt.sqsh"),
    # pyxis asks enroot for docker://IMAGE itself: the scheme goes, the registry gets its '#'
    ("pyxis", "docker://nvcr.io/nvidia/pytorch:23.10-py3", "nvcr.io#nvidia/pytorch:23.10-py3"),
    ("pyxis", "docker://horovod/horovod:0.16.4", "horovod/horovod:0.16.4"),
    ("pyxis", "dockerd://local-image", "dockerd://local-image"),
])
def test_container_image_forms(runtime: str, uri: str, expected: str) -> None:
    spec = v2_spec(prerequisites=[{"type": "dockerimage", "name": "i", "uri": uri}])
    spec["taskRoles"]["main"]["dockerImage"] = "i"
    script = render_sbatch(load.to_job(spec), RenderOptions(container_runtime=runtime))
    assert f"DL_ROLE_IMAGE=('{expected}')" in script
    assert f"DL_CONTAINER='{runtime}'" in script


def test_render_is_deterministic() -> None:
    j = load.to_job(v2_spec())
    assert render_sbatch(j, OPTS) == render_sbatch(j, OPTS)


def test_options_reject_bad_values() -> None:
    with pytest.raises(SpecError) as info:
        RenderOptions(container_runtime="docker", gpus_per_node=-1, signal="KILL", partition="a\nb")
    assert info.value.problems == [
        "container_runtime 'docker': must be one of none, pyxis, apptainer",
        "gpus_per_node -1: must be a whole number in 1..1024",
        "signal 'KILL': must be one of USR1, USR2, TERM, INT, HUP, URG",
        "partition 'a\\nb': must be a Slurm name or a comma-separated list of them (letters, "
        "digits, _ . -; not starting with -)"]


@pytest.mark.parametrize(("partition", "ok"), [("gpu,debug", True), ("gpu", True), ("gpu,", False),
                                               (",gpu", False), ("gpu,,debug", False),
                                               ("gpu,-x", False), ("gpu, debug", False)])
def test_a_partition_may_be_a_list_as_sbatch_takes_it(partition: str, ok: bool) -> None:
    """sbatch(1) --partition takes a comma-separated list (the job starts in whichever can
    run it first); every item is a Slurm name, none empty."""
    if ok:
        script = render_sbatch(load.to_job(v2_spec()), RenderOptions(partition=partition))
        assert f"#SBATCH --partition={partition}\n" in script
    else:
        with pytest.raises(SpecError) as info:
            RenderOptions(partition=partition)
        assert info.value.problems == [
            f"partition {partition!r}: must be a Slurm name or a comma-separated list of them "
            "(letters, digits, _ . -; not starting with -)"]


def test_a_command_longer_than_one_argument_may_be_is_refused() -> None:
    # Linux: one argument or NAME=value string of at most 131,072 bytes with its NUL
    # (execve(2), MAX_ARG_STRLEN); the task gets the command as DL_CMD=... and as an argument
    fits = 131_072 - len("DL_CMD=") - 1
    ok = v2_spec(roles={"w": {"instances": 1, "resourcePerInstance": {"cpu": 1, "memoryMB": 100,
                                                                      "gpu": 0},
                              "commands": ["x" * fits]}})
    render_sbatch(load.to_job(ok), RenderOptions())
    ok["taskRoles"]["w"]["commands"] = ["x" * (fits - 1), "y"]   # joined by a newline: 1 more
    with pytest.raises(SpecError) as info:
        render_sbatch(load.to_job(ok), RenderOptions())
    assert info.value.problems == [
        f"taskRoles.w.commands: {fits + 1} bytes in all; Linux passes a task's command of at "
        f"most {fits} (MAX_ARG_STRLEN, one argument): keep long commands in a script file the "
        "job runs"]


def test_a_job_environment_string_longer_than_linux_passes_is_refused() -> None:
    v1 = {"jobName": "j", "image": "img", "jobEnvs": {"BIG": "v" * 131_068},
          "taskRoles": [{"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 100,
                         "gpuNumber": 0, "command": "true"}]}
    with pytest.raises(SpecError) as info:   # BIG= and the value: 131,072 bytes, NUL not counted
        render_sbatch(load.to_job(v1), RenderOptions())
    assert info.value.problems == [
        "jobEnvs.BIG: 131072 bytes as NAME=value; Linux passes at most 131071 (MAX_ARG_STRLEN, "
        "one environment string): keep long values in a file the job reads"]
    v1["jobEnvs"] = {"BIG": "v" * 131_067}
    render_sbatch(load.to_job(v1), RenderOptions())


def test_a_gang_of_more_task_roles_than_slurm_has_components_is_refused() -> None:
    role = {"instances": 1, "resourcePerInstance": {"cpu": 1, "memoryMB": 100, "gpu": 0},
            "commands": ["true"]}
    spec = v2_spec(roles={f"r{i}": dict(role) for i in range(128)})
    assert render_sbatch(load.to_job(spec), RenderOptions()).count("#SBATCH hetjob") == 127
    spec["taskRoles"]["r128"] = dict(role)
    with pytest.raises(SpecError) as info:
        render_sbatch(load.to_job(spec), RenderOptions())
    assert info.value.problems == [
        "taskRoles: 129 task roles make a heterogeneous job of as many components; Slurm accepts "
        "at most 128: merge roles that ask the same resources"]
