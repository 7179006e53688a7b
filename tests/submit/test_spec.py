"""Spec validation and conversion (submit/spec_v1.py, spec_v2.py, load.py, params.py).

Every error names the field path as written in the spec; expected messages are written out
here, field by field, from the rules in the OpenPAI schemas (microsoft/pai and microsoft/openpai-protocol).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from submit import load, model, params
from submit.validation import SpecError
from submit_helpers import v2_spec

V1 = {"jobName": "j", "image": "img",
      "taskRoles": [{"name": "w", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 100,
                     "gpuNumber": 1, "command": "echo hi"}]}


def problems(doc: object, overrides: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(SpecError) as info:
        load.to_job(doc, overrides)
    return info.value.problems


def with_role(**changes: object) -> dict:
    spec = v2_spec()
    spec["taskRoles"]["main"].update(changes)
    return spec


def with_resources(**changes: object) -> dict:
    spec = v2_spec()
    spec["taskRoles"]["main"]["resourcePerInstance"].update(changes)
    return spec


GPU_MSG = "taskRoles.main.resourcePerInstance.gpu: must be an integer in 0..1024 or a fraction of one GPU (0 < gpu < 1, e.g. 0.5)"


@pytest.mark.parametrize(("doc", "expected"), [
    (with_resources(gpu=-1), [GPU_MSG]),
    (with_resources(gpu="2"), [GPU_MSG]),
    (with_resources(gpu=True), [GPU_MSG]),
    (with_resources(gpu=1.0), [GPU_MSG]),
    (with_resources(gpu=10**30), [GPU_MSG]),
    (with_resources(cpu=0, memoryMB=-5), [
        "taskRoles.main.resourcePerInstance.cpu: must be an integer in 1..4096",
        "taskRoles.main.resourcePerInstance.memoryMB: must be an integer in 1..1073741824"]),
    (with_role(commands=None), ["taskRoles.main.commands: must be a list, but YAML read the "
                                "value as null (an empty value, ~ or null); write its entries "
                                "under it"]),
    (with_role(commands="python train.py"), ["taskRoles.main.commands: must be a list, e.g. "
                                             "[\"python train.py\"] (got 'python train.py')"]),
    (with_role(resourcePerInstance=None), ["taskRoles.main.resourcePerInstance: must be a "
                                           "mapping, but YAML read the value as null (an empty "
                                           "value, ~ or null); write its entries under it"]),
    (with_role(resourcePerInstance=[1]), ["taskRoles.main.resourcePerInstance: must be a "
                                          "mapping"]),
    (with_role(commands=[]), ["taskRoles.main.commands: must not be empty"]),
    (with_role(commands=["ok", 5]), ['taskRoles.main.commands[1]: expected a string, but YAML read '
                                       'the value as a number; quote it as written, e.g. "5" (got 5)']),
    (with_role(instances=0), ["taskRoles.main.instances: must be an integer in 1..100000"]),
    (with_role(completion={"minFailedInstances": 0}),
     ["taskRoles.main.completion.minFailedInstances: must be -1 or an integer in 1..100000"]),
    (with_role(dockerImage="nope"), ["taskRoles.main.dockerImage: no dockerimage prerequisite named 'nope'"]),
    (v2_spec(protocolVersion=3), ["protocolVersion: must be 2"]),
    (v2_spec(taskRoles={}), ["taskRoles: must not be empty"]),
    (v2_spec(extras={"gangAllocation": "no"}), ["extras.gangAllocation: must be true or false"]),
    (v2_spec(extras={"placement": "pack"}), ["extras.placement: must be one of 'consolidate' or 'spread'"]),
    (v2_spec(extras={"checkpoint": {"signal": "KILL"}}),
     ["extras.checkpoint.signal: must be one of USR1, USR2, TERM, INT, HUP, URG"]),
    (v2_spec(extras={"checkpoint": {"grace": 0}}), ["extras.checkpoint.grace: must be an integer in 1..86400"]),
    (v2_spec(extras={"gpuType": "a100 x"}), ["extras.gpuType: must be a GRES type name ([A-Za-z0-9_.-]+, not starting with -), e.g. a100"]),
    (v2_spec(name=""), ["name: must not be empty"]),
    (v2_spec(name="a\x00b"), ["name: must not contain a NUL character"]),
    (v2_spec(defaults={"deployment": "prod"}),
     ["defaults.deployment: no deployment named 'prod' (deployments: none defined)"]),
    ([1, 2], ["(top level): must be a mapping (a v2 YAML job or a v1 JSON job)"]),
], ids=lambda x: None)
def test_v2_errors_name_the_field(doc: object, expected: list[str]) -> None:
    assert problems(doc) == expected


def test_v2_unknown_field_lists_allowed() -> None:
    [msg] = problems(with_role(zzz=2))
    assert msg.startswith("taskRoles.main.zzz: unknown field (allowed: instances, completion, ")
    assert "resourcePerInstance" in msg and msg.endswith("commands)")


def test_v2_a_misspelt_field_is_named() -> None:
    assert problems(with_role(instancez=2)) == [
        "taskRoles.main.instancez: unknown field; did you mean instances?"]
    # a required field misspelt is one problem, not a missing field and an unknown one
    spec = v2_spec()
    role = spec["taskRoles"]["main"]
    role["resourcePerInstnace"] = role.pop("resourcePerInstance")
    assert problems(spec) == [
        "taskRoles.main.resourcePerInstnace: unknown field; did you mean resourcePerInstance?"]


@pytest.mark.parametrize(("extras", "expected"), [
    ({"placment": "spread"}, "extras.placment: unknown key; did you mean placement?"),
    ({"gpuIsolaton": "task"}, "extras.gpuIsolaton: unknown key; did you mean gpuIsolation?"),
    ({"gpuTpye": "v100"}, "extras.gpuTpye: unknown key; did you mean gpuType?"),
    ({"Placement": "spread"}, "extras.Placement: unknown key; did you mean placement?"),
    ({"oportunistic": True}, "extras.oportunistic: unknown key; did you mean opportunistic?"),
])
def test_a_misspelt_extras_key_is_an_error_not_dropped(extras: dict, expected: str) -> None:
    """``extras`` is open to plugins, but a key that is one of dlsubmit's misspelt would be
    dropped unread (``placment: spread`` ran a 2-node gang on one node)."""
    assert problems(v2_spec(extras=extras)) == [
        f"{expected} (keys unlike dlsubmit's are left to plugins)"]
    v1 = copy.deepcopy(V1) | {"extras": extras}
    assert problems(v1) == [f"{expected} (keys unlike dlsubmit's are left to plugins)"]


def test_plugin_keys_in_extras_are_left_alone() -> None:
    plugins = {"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh"}],
               "hivedScheduler": {"jobPriorityClass": "prod"}, "submitFrom": "webportal",
               "gangAllocation": True, "placement": "spread"}
    job = load.to_job(v2_spec(extras=plugins))
    assert job.placement == "spread"
    # a misspelt key is found with other problems too
    bad = v2_spec(extras={"placment": "spread"})
    bad["taskRoles"]["main"]["instances"] = 0
    assert problems(bad) == ["taskRoles.main.instances: must be an integer in 1..100000",
                             "extras.placment: unknown key; did you mean placement? (keys unlike "
                             "dlsubmit's are left to plugins)"]


def test_v2_every_problem_of_every_role_with_its_key() -> None:
    """msgspec stops at a document's first problem; the walk after it reports every one, with
    the real role names (msgspec itself writes a mapping's key as ``[...]``)."""
    bad = {"instances": 0, "resourcePerInstance": {"gpu": True, "ports": {"bad-name": 1, "ok": 101}},
           "commands": [], "typo": 1}
    doc = v2_spec(roles={"ps.server": bad, "worker": {"commands": ["x", None]}}, zzz=1)
    assert problems(doc) == [
        'taskRoles["ps.server"].instances: must be an integer in 1..100000',
        'taskRoles["ps.server"].resourcePerInstance.gpu: must be an integer in 0..1024 or a fraction of one GPU (0 < gpu < 1, e.g. 0.5)',
        'taskRoles["ps.server"].resourcePerInstance.ports.bad-name (key): must be a shell variable '
        'name ([A-Za-z_][A-Za-z0-9_]*)',
        'taskRoles["ps.server"].resourcePerInstance.ports.ok: must be an integer in 0..100',
        'taskRoles["ps.server"].commands: must not be empty',
        'taskRoles["ps.server"].typo: unknown field (allowed: instances, completion, taskRetryCount, '
        'prerequisites, dockerImage, data, output, script, extraContainerOptions, resourcePerInstance, '
        'commands)',
        "taskRoles.worker.resourcePerInstance: required field is missing",
        "taskRoles.worker.commands[1]: expected a string, but YAML read the value as null (an "
        "empty value, ~ or null); write the text in quotes (got None)",
        "zzz: unknown field (allowed: protocolVersion, name, type, version, contributor, description, "
        "prerequisites, parameters, secrets, jobRetryCount, taskRoles, deployments, defaults, extras)"]


@pytest.mark.parametrize(("prereq", "expected"), [
    ({"uri": ["a", 5]}, 'prerequisites[0].uri[1]: expected a string, but YAML read the value as '
                        'a number; quote it as written, e.g. "5" (got 5)'),
    ({"uri": 5}, "prerequisites[0].uri: must be a string or a list of strings"),
    ({"uri": "a\x00b"}, "prerequisites[0].uri: must not contain a NUL character"),
    ({"type": "image"}, "prerequisites[0].type: must be one of 'dockerimage', 'script', 'output' or 'data'"),
], ids=["list-item", "int", "nul", "type"])
def test_v2_prerequisite_uri_and_type(prereq: dict, expected: str) -> None:
    assert problems(v2_spec(prerequisites=[{"name": "d", "type": "data", **prereq}])) == [expected]


def test_v2_prerequisite_uri_list_names_every_bad_item() -> None:
    """A list ``uri`` is checked item by item: each bad item is one line at its own index."""
    doc = v2_spec(prerequisites=[{"name": "d", "type": "data", "uri": [1, "/x", True, "a\x00b"]},
                                 {"name": "e", "type": "data", "uri": ["/y", [2]]}])
    assert problems(doc) == ['prerequisites[0].uri[0]: expected a string, but YAML read the value '
                             'as a number; quote it as written, e.g. "1" (got 1)',
                             'prerequisites[0].uri[2]: expected a string, but YAML read the value '
                             'as the boolean true; quote it as written, e.g. "yes" (got True)',
                             "prerequisites[0].uri[3]: must not contain a NUL character",
                             "prerequisites[1].uri[1]: must be a string"]


@pytest.mark.parametrize("value", [[1], ["a"], [[1]]], ids=["int", "str", "list"])
def test_a_list_where_a_mapping_belongs_is_one_line_for_the_field(value: list) -> None:
    """Each mapping field given a list: one line naming the field (a ``dict[...]`` field type
    is not a field type with list items, although it has an ``items`` attribute)."""
    for key in ("parameters", "secrets", "taskRoles", "extras"):
        assert problems(v2_spec(**{key: value})) == [f"{key}: must be a mapping"]
    assert problems(with_resources(ports=value)) == [
        "taskRoles.main.resourcePerInstance.ports: must be a mapping"]
    assert problems({**V1, "jobEnvs": value}) == ["jobEnvs: must be a mapping"]


def test_v2_prerequisite_keys_beyond_the_declared_reach_templates() -> None:
    spec = with_role(data="d", commands=["echo <% $data.uri[1] %> <% $data.mount %>"])
    spec["prerequisites"] = [{"name": "d", "type": "data", "uri": ["a", "b"], "mount": "/m"}]
    assert load.to_job(spec).roles[0].command == "echo b /m"


def test_v2_extras_keys_left_for_plugins_and_non_text_keys() -> None:
    job = load.to_job(v2_spec(extras={"hivedScheduler": {"x": [1]}, "placement": "spread"}))
    assert job.placement == "spread"
    assert problems(v2_spec(extras={1: 2})) == ['extras[1] (key): expected a string, but YAML read the value as a number; quote it as '
        'written, e.g. "1" (got 1)']


def test_v2_protocol_version_forms() -> None:
    for version in (2, "2", 2.0):
        assert load.to_job(v2_spec(protocolVersion=version)).version == "v2"
    for version in ("2.0", None, [2]):
        assert problems(v2_spec(protocolVersion=version)) == ["protocolVersion: must be 2"]


def test_v2_role_names_colliding_as_identifiers() -> None:
    role = v2_spec()["taskRoles"]["main"]
    [msg] = problems(v2_spec(roles={"a-b": role, "a_b": copy.deepcopy(role)}))
    assert msg == ("taskRoles.a_b: role name 'a_b' becomes 'a_b' in environment names, like role "
                   "'a-b'; rename one of them")


V1_GPU = "taskRoles[0].gpuNumber: must be an integer in 0..1024 or a fraction of one GPU (0 < gpu < 1, e.g. 0.5)"


def v1_with(**changes: object) -> dict:
    spec = copy.deepcopy(V1)
    for key, value in changes.items():
        if key.startswith("role_"):
            spec["taskRoles"][0][key[5:]] = value
        else:
            spec[key] = value
    return spec


@pytest.mark.parametrize(("doc", "expected"), [
    (v1_with(role_gpuNumber=-1), [V1_GPU]),
    (v1_with(role_gpuNumber="1"), [V1_GPU]),
    (v1_with(retryCount=-3), ["retryCount: must be an integer in -2..1000"]),
    (v1_with(jobEnvs={"bad-key": 1}),
     ["jobEnvs.bad-key (key): must be a shell variable name ([A-Za-z_][A-Za-z0-9_]*)"]),
    (v1_with(jobEnvs={"k": [1]}), ["jobEnvs.k: must be a string"]),
    (v1_with(role_portList=[{"label": "a b"}]),
     ["taskRoles[0].portList[0].label: must be a shell variable name ([A-Za-z_][A-Za-z0-9_]*)"]),
    (v1_with(taskRoles=[]), ["taskRoles: must not be empty"]),
    (v1_with(gpuType="a;b"), ["gpuType: must be a GRES type name ([A-Za-z0-9_.-]+, not starting with -), e.g. a100"]),
    ({"jobName": "x", "taskRoles": [{}]}, [
        "image: required field is missing",
        "taskRoles[0].name: required field is missing",
        "taskRoles[0].taskNumber: required field is missing",
        "taskRoles[0].cpuNumber: required field is missing",
        "taskRoles[0].memoryMB: required field is missing",
        "taskRoles[0].gpuNumber: required field is missing",
        "taskRoles[0].command: required field is missing"]),
    ({"name": "x"}, ["protocolVersion: required field is missing (v2 YAML needs 'protocolVersion: 2'; "
                     "a v1 JSON job needs jobName and a taskRoles list)"]),
], ids=lambda x: None)
def test_v1_errors_name_the_field(doc: object, expected: list[str]) -> None:
    assert problems(doc) == expected


def test_v1_defaults_and_retry_unlimited() -> None:
    job = load.to_job(v1_with(retryCount=-2, jobEnvs={"batch_size": 32, "flag": True}), {"flag": "x"})
    [role] = job.roles
    assert (job.retry_budget, role.min_failed, role.min_succeeded, role.shm_mib) == (-1, 1, -1, 64)
    assert job.envs == (("batch_size", "32"), ("flag", "x"))
    assert role.field_path("gpu") == "taskRoles[0].gpuNumber"


def test_v1_param_override_must_be_identifier() -> None:
    assert problems(V1, {"a-b": "1"}) == ["--param a-b: v1 jobEnvs names must be shell variable names"]


def test_json_comments_are_blanked_outside_strings() -> None:
    text = '{\n  // a comment "with quotes"\n  "jobName": "a//b", /* block\n comment */ "x": "/*y*/"\n}'
    stripped = load.strip_json_comments(text)
    assert json.loads(stripped) == {"jobName": "a//b", "x": "/*y*/"}
    assert stripped.count("\n") == text.count("\n")
    assert stripped.index('"jobName"') == text.index('"jobName"')


def test_json_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text('{\n  "jobName": "x",\n  "image" "y"\n}')
    with pytest.raises(SpecError) as info:
        load.load(f)
    # line 3 is `  "image" "y"`: the second string starts at column 11
    assert info.value.problems == [f"{f}:3:11: JSON syntax error: Expecting ':' delimiter"]


def test_yaml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("protocolVersion: 2\nname: a\n  b: c\n")
    with pytest.raises(SpecError) as info:
        load.load(f)
    # the stray mapping value `b: c` indented under a scalar: its ':' is line 3, column 4
    [msg] = info.value.problems
    assert msg.startswith(f"{f}:3:4: YAML syntax error: mapping values are not allowed here")


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load.load(tmp_path / "missing.yaml")
    f = tmp_path / "latin1.yaml"
    f.write_bytes(b"name: x\nbad: \xff\n")
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert info.value.problems == [f"{f}:2: not UTF-8 text (byte 13)"]


def test_format_detection_by_content(tmp_path: Path) -> None:
    f = tmp_path / "spec.txt"
    f.write_text("// v1 with a comment\n" + json.dumps(V1))
    assert load.load(f).version == "v1"


def test_params_render_scopes_and_leave_unknown() -> None:
    text = ("<% $parameters.n %> <%$parameters.b%> <% $data.uri[0] %> <% $other.x %> "
            "<%$secrets.token%> ${SHELL_VAR} $PAI_X")
    out, secrets = params.render(text, {"parameters": {"n": 64, "b": False},
                                        "data": {"uri": ["http://d"]}, "secrets": {"token": "S"}})
    # a secret is never filled in at submit time: its reference is written in the one
    # spelling the run time replaces
    assert out == ("64 false http://d <% $other.x %> <% $secrets.token %> ${SHELL_VAR} $PAI_X")
    assert secrets == ["token"]


def test_params_reference_to_nothing_is_an_error_naming_it() -> None:
    with pytest.raises(SpecError) as info:
        params.render("a <% $parameters.nope %> b <% $data.uri[5] %>",
                      {"parameters": {"n": 1, "b": 2}, "data": {"uri": ["x"]}}, "taskRoles.w.commands")
    assert info.value.problems == [
        "taskRoles.w.commands: <% $parameters.nope %> names nothing: $parameters has b, n "
        "(declare it under parameters:; --param NAME=VALUE only overrides a declared one)",
        "taskRoles.w.commands: <% $data.uri[5] %> names nothing: $data has uri"]


def test_undeclared_param_override_is_an_error_listing_the_known_ones() -> None:
    spec = with_role(commands=["echo <% $parameters.bs %>"])
    spec["parameters"] = {"bs": 32, "lr": 0.1}
    with pytest.raises(SpecError) as info:
        load.to_job(spec, {"x": "1"})
    assert info.value.problems == ["--param x: the spec declares no parameter 'x' (parameters: bs, lr)"]
    with pytest.raises(SpecError) as info:
        load.to_job(v1_with(jobEnvs={"A": 1}), {"B": "2"})
    assert info.value.problems == ["--param B: the spec declares no jobEnvs entry 'B' (jobEnvs: A)"]


def test_param_overrides_replace_parameters() -> None:
    spec = with_role(commands=["  train --bs <% $parameters.bs %>  ", "\techo <% $parameters.new %>\n"])
    spec["parameters"] = {"bs": 32, "new": ""}
    job = load.to_job(spec, params.parse_overrides(["bs=128", "new=a=b"]))
    assert job.roles[0].command == "train --bs 128\necho a=b"


def test_param_override_syntax() -> None:
    with pytest.raises(SpecError) as info:
        params.parse_overrides(["novalue", "ok=1", "=x"])
    assert info.value.problems == [
        "--param 'novalue': expected NAME=VALUE with NAME like batch_size",
        "--param '=x': expected NAME=VALUE with NAME like batch_size"]


def test_deployment_pre_and_post_commands_wrap_role_commands() -> None:
    spec = with_role(commands=["main"])
    spec["deployments"] = [{"name": "d", "taskRoles": {"main": {"preCommands": [" pre "],
                                                                "postCommands": ["post"]}}}]
    spec["defaults"] = {"deployment": "d"}
    assert load.to_job(spec).roles[0].command == "pre\nmain\npost"


@pytest.mark.parametrize(("name", "ident"), [
    ("worker", "worker"), ("ps-server", "ps_server"), ("2nd", "_2nd"), ("wörker", "w_rker"),
    ("a b.c", "a_b_c"), ("$(x)", "__x_"),
])
def test_role_ident_rule(name: str, ident: str) -> None:
    assert model.role_ident(name) == ident


def _deep(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(("version", "key"), [
    ("v2", "description"), ("v2", "parameters"), ("v2", "unknownKey"), ("v1", "jobEnvs"),
    ("v1", "retryCount"), ("v1", "extras"),
])
def test_deeply_nested_document_is_one_problem_not_a_traceback(version: str, key: str,
                                                               tmp_path: Path) -> None:
    """600 nested lists (JSON reads them; walking them in Python passed the recursion limit):
    one line, wherever they sit, read or ignored."""
    doc = copy.deepcopy(V1) if version == "v1" else v2_spec()
    doc[key] = {"A": _deep(600)} if key in ("parameters", "jobEnvs", "extras") else _deep(600)
    f = tmp_path / "deep.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert info.value.problems == ["(top level): nested too deeply"]


@pytest.mark.parametrize(("name", "text", "where"), [
    ("s.json", '{"jobName": "j", "retryCount": 1%s}', ""),
    ("s.yaml", "protocolVersion: 2\nname: n\njobRetryCount: 1%s\n", "line 3: "),
    ("k.yaml", "protocolVersion: 2\nname: n\nparameters:\n  ? 1%s\n  : x\n", "line 4: "),
], ids=["json", "yaml", "yaml-key"])
def test_integer_past_pythons_digit_limit_is_one_problem(name: str, text: str, where: str,
                                                         tmp_path: Path) -> None:
    """Python refuses to convert an integer of more than 4300 digits (ValueError): one line
    naming the file, not a traceback."""
    f = tmp_path / name
    f.write_text(text % ("0" * 4400))
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert info.value.problems == [f"{f}: {where}a number of 4,401 digits: more than the 4,300 "
                                   "this reader converts (no field takes one)"]


def test_every_one_of_many_problems_is_one_line_in_order() -> None:
    """20,000 bad items: 20,000 lines, in document order, none lost or repeated. (Removing
    repeats is linear in the problems; `time dlsubmit --dry-run` measures it, a test cannot
    without timing.)"""
    doc = copy.deepcopy(V1)
    doc["taskRoles"] = [1] * 20_000
    assert problems(doc) == [f"taskRoles[{i}]: must be a mapping" for i in range(20_000)]


@pytest.mark.parametrize(("written", "message"), [
    ("no", 'expected a string, but YAML read the value as the boolean false; quote it as '
           'written, e.g. "no" (got False)'),
    ("on", 'expected a string, but YAML read the value as the boolean true; quote it as '
           'written, e.g. "on" (got True)'),
    ("0755", 'expected a string, but YAML read the value as a number; quote it as written, '
             'e.g. "0755" (got 493)'),
    ("1_000", 'expected a string, but YAML read the value as a number; quote it as written, '
              'e.g. "1_000" (got 1000)'),
    ("{echo: 1}", "expected a string, but YAML read the value as a mapping (an unquoted ': ' "
                  "makes one); quote the whole text, e.g. \"{echo: 1}\" (got {'echo': 1})"),
    ("~", "expected a string, but YAML read the value as null (an empty value, ~ or null); "
          "write the text in quotes (got None)"),
])
def test_dlsubmit_names_a_text_field_yaml_read_otherwise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], written: str, message: str) -> None:
    """``name: no`` in a job file is YAML's boolean false: dlsubmit says so and how to fix it
    (quote it), exits 2 and submits nothing (a dry run here prints no script)."""
    from submit.cli import main as dlsubmit
    spec = Path(__file__).parents[1] / "fixtures" / "specs" / "v2-single-gpu.yaml"
    text = spec.read_text()
    bad = tmp_path / "job.yaml"
    assert "\nname: single-gpu\n" in text
    bad.write_text(text.replace("\nname: single-gpu\n", f"\nname: {written}\n", 1))
    assert dlsubmit(["--dry-run", str(bad)]) == 2
    assert capsys.readouterr() == ("", f"dlsubmit: name: {message}\n")


@pytest.mark.parametrize(("written", "expected"), [
    ("123", 'the JSON value is a number; write the text in quotes, e.g. "123" (got 123)'),
    ("1.5", 'the JSON value is a number; write the text in quotes, e.g. "1.5" (got 1.5)'),
    ("true", 'the JSON value is the boolean true; write the text in quotes, e.g. "true" '
             '(got True)'),
    ("false", 'the JSON value is the boolean false; write the text in quotes, e.g. "false" '
              '(got False)'),
    ("null", 'the JSON value is null; write the text in quotes, e.g. "null" (got None)'),
], ids=["int", "float", "true", "false", "null"])
def test_v1_json_value_that_is_not_text_is_named_as_json_wrote_it(
        tmp_path: Path, written: str, expected: str) -> None:
    """A v1 JSON spec is parsed as JSON, so its message names no YAML reading; a v2 YAML spec
    loaded afterwards in the same process still gets YAML's wording (per-file syntax)."""
    text = json.dumps(V1).replace('"echo hi"', written)
    for name in ("job.json", "job-without-suffix"):   # JSON by suffix, then by content
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(SpecError) as info:
            load.load(path)
        assert info.value.problems == [f"taskRoles[0].command: expected a string, but {expected}"]
    yaml_spec = tmp_path / "job.yaml"
    yaml_spec.write_text("protocolVersion: 2\nname: j\ntype: job\nprerequisites:\n"
                         "  - {name: img, type: dockerimage, uri: img}\n"
                         "taskRoles:\n  main:\n    dockerImage: img\n    commands: [" + written
                         + "]\n    resourcePerInstance: {cpu: 1, memoryMB: 100, gpu: 1}\n")
    with pytest.raises(SpecError) as info:
        load.load(yaml_spec)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith(
        "taskRoles.main.commands[0]: expected a string, but YAML read the value as ")


def test_a_parameter_value_with_a_nul_is_refused_where_it_is_used() -> None:
    spec = with_role(commands=["echo <% $parameters.x %>"])
    spec["parameters"] = {"x": "a\x00b"}
    assert problems(spec) == ["taskRoles.main.commands: <% $parameters.x %>: the value contains a "
                              "NUL character, which no shell command can hold; remove it"]
    spec["parameters"] = {"x": ["a\x00b"]}   # a container is written as JSON: \u0000, no NUL
    assert load.to_job(spec).roles[0].command == 'echo ["a\\u0000b"]'


@pytest.mark.parametrize(("name", "path"), [
    ("名", 'parameters["名"]'), ("a.b", 'parameters["a.b"]'), ("1st", "parameters.1st"),
    ("-x", "parameters.-x"), ("a b", 'parameters["a b"]')])
def test_a_parameter_name_no_reference_can_name_is_refused(name: str, path: str) -> None:
    spec = with_role(commands=["true"])
    spec["parameters"] = {name: "v", "ok_name-2": "w"}
    assert problems(spec) == [f"{path}: a parameter name is ASCII letters, digits, "
                              "'_' and '-', starting with a letter or '_' (<% $parameters.NAME %> "
                              "could not name it): rename it"]


@pytest.mark.parametrize(("commands", "joined"), [
    # an escaped blank at the end stays: the backslash escapes it, it is no line continuation
    (['printf "[%s]\\n" a\\ ', "echo second"], 'printf "[%s]\\n" a\\ \necho second'),
    (["echo a\\\t  ", "b"], "echo a\\\t\nb"),
    # an even run of backslashes escapes itself: the blanks after it go
    (["echo a\\\\  ", "b"], "echo a\\\\\nb"),
    (["  echo a  \n", "\tb"], "echo a\nb"),
])
def test_commands_are_trimmed_except_an_escaped_blank(commands: list[str], joined: str) -> None:
    assert load.to_job(with_role(commands=commands)).roles[0].command == joined


def test_a_command_ending_in_a_backslash_before_another_is_refused() -> None:
    """The commands are joined one per line: ``echo first\\`` would join ``echo second`` onto
    it (bash would run ``echo firstecho second``). A trailing backslash before another command is
    refused, naming it; on the last command, or escaped (``\\\\``), it is kept."""
    assert problems(with_role(commands=["echo first\\", "echo second", "echo a\\"])) == [
        "taskRoles.main.commands[0]: ends with a backslash, which would join the next command "
        "onto it; drop it, or write \\\\ to print one backslash"]
    assert load.to_job(with_role(commands=["echo a\\\\", "echo b\\"])).roles[0].command == (
        "echo a\\\\\necho b\\")


@pytest.mark.parametrize(("name", "allowed"), [("w" * 227, 226), ("2" + "w" * 225, 225)],
                         ids=["letters", "leading-digit"])
def test_a_role_name_making_an_env_name_srun_drops_is_refused(name: str, allowed: int) -> None:
    """srun hands a task no variable whose name is over 255 characters (Slurm's env.c copies
    names through ``char name[256]``), so PAI_MIN_SUCCEEDED_TASK_COUNT_<role> of a longer name
    never arrived and every task died at ``!dl_var: unbound variable``."""
    role = v2_spec()["taskRoles"]["main"]
    assert model.MAX_TASK_ENV_NAME == 255
    ok = load.to_job(v2_spec(roles={name[: allowed]: role}))
    assert len(f"PAI_MIN_SUCCEEDED_TASK_COUNT_{ok.roles[0].ident}") == 255   # the longest, at the limit
    [msg] = problems(v2_spec(roles={name: role}))
    assert msg == (f"taskRoles.{name}: a role name of {len(name)} characters makes "
                   f"PAI_MIN_SUCCEEDED_TASK_COUNT_<role> 256 characters long; srun passes no "
                   "environment variable name over 255 characters to the tasks (Slurm's "
                   f"src/common/env.c), so every task would fail at start; use at most "
                   f"{allowed} characters")
    v1 = v1_with(taskRoles=[{**V1["taskRoles"][0], "name": name}])
    assert problems(v1) == [msg.replace(f"taskRoles.{name}", "taskRoles[0]")]


def test_a_port_label_making_an_env_name_srun_drops_is_refused() -> None:
    role = with_resources(ports={"p" * 237: 1})["taskRoles"]["main"]
    role["instances"] = 10
    assert load.to_job(v2_spec(roles={"w": role}))   # PAI_PORT_LIST_w_9_<237> is 255
    role["resourcePerInstance"]["ports"] = {"p" * 238: 1}
    assert problems(v2_spec(roles={"w": role})) == [
        f"taskRoles.w.resourcePerInstance.ports: port label {'p' * 238!r} of 238 characters makes "
        "PAI_PORT_LIST_<role>_<index>_<label> 256 characters long; srun passes no environment "
        "variable name over 255 characters to the tasks (Slurm's src/common/env.c), so every task "
        "would fail at start; with this role name and 10 instance(s) use at most 237 characters"]


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("minFailedInstances", 5, "taskRoles.main.completion.minFailedInstances: 5 is more than the "
     "role's 2 instances (taskRoles.main.instances), so the job could never fail, not even with "
     "every instance failed; use 1..2, or -1 (failures never fail the job)"),
    ("minSucceededInstances", 3, "taskRoles.main.completion.minSucceededInstances: 3 is more than "
     "the role's 2 instances (taskRoles.main.instances), so it could never be reached; use 1..2, "
     "or -1 (every instance must complete)"),
])
def test_a_completion_threshold_above_the_instances_is_refused(field: str, value: int,
                                                               expected: str) -> None:
    """FrameworkController takes -1 or 1..instances: minFailedInstances 5 of 2 instances made a
    job whose every instance failed end succeeded."""
    assert problems(with_role(instances=2, completion={field: value})) == [expected]
    for fine in (2, 1, -1, None):   # up to the instances, -1 and null ("all" / "never") stay valid
        assert load.to_job(with_role(instances=2, completion={field: fine}))
    v1_field = {"minFailedInstances": "minFailedTaskCount",
                "minSucceededInstances": "minSucceededTaskCount"}[field]
    v1_expected = expected.replace("taskRoles.main.completion." + field, "taskRoles[0]." + v1_field)
    assert problems(v1_with(**{"role_" + v1_field: value})) == [
        v1_expected.replace("taskRoles.main.instances", "taskRoles[0].taskNumber")]
    assert load.to_job(v1_with(**{"role_" + v1_field: -1}))


def test_repeated_prerequisite_and_deployment_names_are_refused_naming_both() -> None:
    """A role's dockerImage (and defaults.deployment) names one item; with two of that name the
    first won without a word and a role ran the wrong image."""
    spec = with_role(dockerImage="img", commands=["true"])
    spec["prerequisites"] = [{"name": "img", "type": "dockerimage", "uri": "a:1"},
                             {"name": "data", "type": "data", "uri": "/d"},
                             {"name": "img", "type": "dockerimage", "uri": "b:2"},
                             {"name": "img", "type": "script", "uri": "s.sh"}]
    spec["deployments"] = [{"name": "dep"}, {"name": "dep", "taskRoles": {"main": {"preCommands": ["x"]}}}]
    spec["defaults"] = {"deployment": "dep"}
    assert problems(spec) == ["prerequisites[2].name: 'img' repeats prerequisites[0]; rename one",
                              "prerequisites[3].name: 'img' repeats prerequisites[0]; rename one",
                              "deployments[1].name: 'dep' repeats deployments[0]; rename one"]
    spec["prerequisites"][2:] = []
    spec["deployments"][1]["name"] = "dep2"
    assert load.to_job(spec).roles[0].image == "a:1"


def test_v1_repeated_port_labels_of_a_role_are_refused() -> None:
    ports = [{"label": "ssh", "portNumber": 1}, {"label": "http"}, {"label": "ssh", "portNumber": 2}]
    assert problems(v1_with(role_portList=ports)) == [
        "taskRoles[0].portList[2].label: 'ssh' repeats taskRoles[0].portList[0]; rename one"]


def test_v1_repeated_role_name_is_said_to_repeat_the_role() -> None:
    """The same name twice is a repeat, not an identifier collision; names that differ but
    become one identifier keep the collision message."""
    role = V1["taskRoles"][0]
    assert problems(v1_with(taskRoles=[role, {**role, "name": "x"}, {**role}])) == [
        "taskRoles[2].name: 'w' repeats taskRoles[0]; rename one"]
    assert problems(v1_with(taskRoles=[role, {**role, "name": "w-"}, {**role, "name": "w_"}])) == [
        "taskRoles[2]: role name 'w_' becomes 'w_' in environment names, like role 'w-'; "
        "rename one of them"]


def test_empty_or_blank_commands_are_refused_like_no_commands() -> None:
    blank = "must not be empty or blank: it would run nothing"
    assert problems(with_role(commands=["  ", "", "echo ok", "\t\n"])) == [
        f"taskRoles.main.commands[0]: {blank}", f"taskRoles.main.commands[1]: {blank}",
        f"taskRoles.main.commands[3]: {blank}"]
    assert problems(v1_with(role_command=" \n ")) == [f"taskRoles[0].command: {blank}"]


@pytest.mark.parametrize(("char", "shown", "escape"), [
    ("\x1b", "U+001B ('\\x1b')", "\\x1b"), ("\x7f", "U+007F ('\\x7f')", "\\x7f"),
    ("\x00", "U+0000 ('\\x00')", "\\x00"), ("\ufffe", "U+FFFE ('\\ufffe')", "\\ufffe")],
    ids=["esc", "del", "nul", "fffe"])
def test_a_character_yaml_does_not_allow_is_one_line_with_line_and_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], char: str, shown: str, escape: str) -> None:
    """PyYAML reports such a character with an offset on a second line (``in "<unicode
    string>", position 27``); dlsubmit places it like any YAML syntax error, escaped."""
    from submit.cli import main as dlsubmit
    f = tmp_path / "job.yaml"
    f.write_text(f'protocolVersion: 2\nname: "a{char}b"\n')
    assert dlsubmit(["--dry-run", str(f)]) == 2
    assert capsys.readouterr() == ("", (
        f"dlsubmit: {f}:2:9: YAML syntax error: the character {shown} is not allowed in YAML; "
        f'remove it, or write it as the escape "{escape}" inside double quotes\n'))


SPEC_HEAD = ("protocolVersion: 2\nname: j\ntaskRoles:\n  w:\n    resourcePerInstance: {cpu: 1, memoryMB: 100}\n"
             "    commands:\n")


@pytest.mark.parametrize(("commands", "expected"), [
    # ": " in an unquoted command makes a mapping; the fix quotes the line as written
    ("      - echo step: 1   # a comment\n",
     "taskRoles.w.commands[0]: expected a string, but YAML read the value as a mapping (an unquoted "
     "': ' makes one); quote the whole text, e.g. \"echo step: 1\" (got {'echo step': 1})"),
    ("      - ok\n      - [a, b]\n",
     "taskRoles.w.commands[1]: expected a string, but YAML read the value as a list (an unquoted "
     "'- ' or '[' starts one); quote the whole text, e.g. \"[a, b]\" (got ['a', 'b'])"),
    ('      - echo "x": 1\n',   # its own double quotes: the hint quotes with single ones
     "taskRoles.w.commands[0]: expected a string, but YAML read the value as a mapping (an unquoted "
     "': ' makes one); quote the whole text, e.g. 'echo \"x\": 1' (got {'echo \"x\"': 1})"),
    ("      - 0x1F\n      - yes\n",
     ["taskRoles.w.commands[0]: expected a string, but YAML read the value as a number; quote it "
      'as written, e.g. "0x1F" (got 31)',
      "taskRoles.w.commands[1]: expected a string, but YAML read the value as the boolean true; "
      'quote it as written, e.g. "yes" (got True)']),
    # an anchor or a tag is no part of the text: the hint quotes the value alone
    ("      - &c echo a: 1\n      - !!int 0755\n",
     ["taskRoles.w.commands[0]: expected a string, but YAML read the value as a mapping (an "
      "unquoted ': ' makes one); quote the whole text, e.g. \"echo a: 1\" (got {'echo a': 1})",
      "taskRoles.w.commands[1]: expected a string, but YAML read the value as a number; quote it "
      'as written, e.g. "0755" (got 493)']),
    # a quoted scalar that a tag made a number: the text inside the quotes, not the quotes
    ("      - !!int \"5\"\n      - !!float '1.5'\n",
     ["taskRoles.w.commands[0]: expected a string, but YAML read the value as a number; quote it "
      'as written, e.g. "5" (got 5)',
      "taskRoles.w.commands[1]: expected a string, but YAML read the value as a number; quote it "
      'as written, e.g. "1.5" (got 1.5)']),
], ids=["mapping", "list", "mapping-with-quotes", "number-and-bool", "anchor-and-tag",
        "tagged-quoted"])
def test_a_command_yaml_read_as_something_else_says_what_and_how_to_quote_it(
        tmp_path: Path, commands: str, expected: str | list[str]) -> None:
    f = tmp_path / "job.yaml"
    f.write_text(SPEC_HEAD + commands)
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert info.value.problems == (expected if isinstance(expected, list) else [expected])


@pytest.mark.parametrize(("written", "expected"), [
    ("12", "extras.checkpoint.signal: must be one of USR1, USR2, TERM, INT, HUP, URG (YAML read 12 "
           "as a number, not text; got 12)"),
    ("true", "extras.checkpoint.signal: must be one of USR1, USR2, TERM, INT, HUP, URG (YAML read "
             "true as a boolean, not text; got True)"),
])
def test_a_restricted_text_field_read_as_a_number_gives_its_choices_not_a_quoted_hint(
        tmp_path: Path, written: str, expected: str) -> None:
    """Quoting ``signal: 12`` as "12" would still be refused: the hint is the valid values."""
    f = tmp_path / "job.yaml"
    f.write_text(SPEC_HEAD + f"      - echo ok\nextras:\n  checkpoint: {{signal: {written}}}\n")
    with pytest.raises(SpecError) as info:
        load.load(f)
    assert info.value.problems == [expected]
    v1 = tmp_path / "job.json"
    v1.write_text(json.dumps({**V1, "extras": {"checkpoint": {"signal": 12}}}))
    with pytest.raises(SpecError) as info:
        load.load(v1)
    assert info.value.problems == ["extras.checkpoint.signal: must be one of USR1, USR2, TERM, INT, "
                                   "HUP, URG (the JSON value 12 is a number, not text; got 12)"]
