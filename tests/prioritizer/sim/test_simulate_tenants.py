"""``dlprio simulate --tenants``: a replay whose per-tenant figures are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prioritizer.cli import main

HEADER = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
#: user 2 (tenant B) submits four 1-GPU jobs of 1000 s at 0; user 1 (tenant A) one 2-GPU
#: job of 500 s at 100
ROWS = ("0,2,1,0,1,0,1000,0,Pass\n1,2,1,0,1,0,1000,0,Pass\n2,2,1,0,1,0,1000,0,Pass\n"
        "3,2,1,0,1,0,1000,0,Pass\n4,1,2,0,1,100,500,0,Pass\n")
TENANTS = """virtual_clusters:
  A: {users: ["1"], guaranteed_gpus: 2}
  B: {users: ["2"], guaranteed_gpus: 2}
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    trace, tenants = tmp_path / "t.csv", tmp_path / "ten.yaml"
    trace.write_text(HEADER + ROWS)
    tenants.write_text(TENANTS)
    return str(trace), str(tenants)


def test_reclaim_in_a_replay(files: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """1 node x 4 GPUs, zero cost. B's four jobs take all 4 GPUs at 0 (B borrows 2). At 100
    A's job is within A's guarantee (0 + 2 <= 2): B's jobs 0 and 1 (equal queue and service:
    lowest ids first; after job 0 B is at 3 > 2, still borrowing) are requeued and A runs
    100-600 (JCT 500). Jobs 2 and 3 end at 1000; 0 and 1 (100 s done) restart at 600 and end
    at 1500: B's JCTs 1500, 1500, 1000, 1000, mean 1250. (Pure 2D-LAS: A waits until 1000.)
    Alone on 2 GPUs: A's JCT 500 (rho 1); B's jobs run 0-1000 and 1000-2000, mean 1500
    (rho 1250/1500 = 0.8333). Jain's index of (1, 0.8333): 1.8333^2 / (2 x 1.6944) =
    0.99180. GPU shares over 1500 s x 4 GPUs: A 2 x 500 / 6000 = 0.1667; B (4 x 100 + 2 x 500
    + 4 x 400 + 2 x 500) / 6000 = 0.6667. A asks its guarantee 100-600 (0.1389 h) and has it
    all that time."""
    trace, tenants = files
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--zero-cost", "--tenants", tenants, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)[0]
    assert out["avg_jct_s"] == 1100.0 and out["preemptions"] == 2
    a, b = out["tenants"]
    assert (a["name"], a["guaranteed_gpus"], a["avg_jct_s"], a["rho"]) == ("A", 2, 500.0, 1.0)
    assert (b["name"], b["avg_jct_s"], a["preemptions"], b["preemptions"]) == ("B", 1250.0, 0, 2)
    assert b["rho"] == pytest.approx(0.83333, abs=1e-5)
    assert out["jain_index"] == pytest.approx(0.99180, abs=1e-5)
    assert a["gpu_share"] == pytest.approx(0.16667, abs=1e-5)
    assert b["gpu_share"] == pytest.approx(0.66667, abs=1e-5)
    assert a["hours_below_guarantee_share"] == 0.0
    assert a["demand_at_guarantee_h"] == pytest.approx(500 / 3600)


def test_the_tenant_table_is_the_house_table(files: tuple[str, str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The replay above as a person reads it: the per-tenant table in the layout of every
    table (prioritizer.tables: columns two spaces apart, split() reads them by position). B
    holds at least its 2 guaranteed GPUs all the time it has jobs (4, 2, 4, 2): 0 % of hours
    below; guarantee share 2 / 4 GPUs."""
    trace, tenants = files
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--zero-cost", "--tenants", tenants]) == 0
    out = capsys.readouterr().out
    lines = out[out.index("tenants under"):].splitlines()
    assert lines[0] == "tenants under tiresias-las: Jain's index of rho 0.992"
    assert "guaranteed GPUs  jobs  avg JCT s" in lines[1]
    assert [line.split() for line in lines[2:]] == [
        ["A", "2", "1", "500.0", "0", "0.167", "0.500", "0.00%", "1.000"],
        ["B", "2", "4", "1250.0", "2", "0.667", "0.500", "0.00%", "0.833"]]


def test_without_tenants_the_2_gpu_job_waits(files: tuple[str, str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The same replay without --tenants: nobody preempts (every job in queue 0); A's job
    starts at 1000 and ends at 1500 (JCT 1400), B's end at 1000: mean (4000 + 1400) / 5."""
    trace, _ = files
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--zero-cost", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)[0]
    assert (out["avg_jct_s"], out["preemptions"]) == (1080.0, 0)
    assert "tenants" not in out


def test_bad_tenants_file_is_one_line_each(files: tuple[str, str], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    trace, _ = files
    bad = tmp_path / "bad.yaml"
    bad.write_text("virtual_clusters:\n  A: {users: ['1'], guaranteed_gpus: 4}\n"
                   "  B: {users: ['1'], guaranteed_gpus: 2}\n")
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--tenants", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"dlprio: {bad}: virtual_clusters: guaranteed_gpus sum to 6, above the "
        "cluster's 4 GPUs; lower them so that every guarantee can be met at once",
        f"dlprio: {bad}: virtual_clusters.B.users: user '1' is in 'A' too; a user belongs to one "
        "virtual cluster"]


def test_tenants_plot(files: tuple[str, str], tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    """--tenants-plot writes a PNG; without --tenants it is refused, naming what it needs."""
    trace, tenants = files
    out = tmp_path / "tenants.png"
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--zero-cost", "--tenants", tenants, "--tenants-plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--tenants-plot", str(out)]) == 2
    assert capsys.readouterr().err.strip() == "dlprio: --tenants-plot needs --tenants FILE.yaml"


def test_sharing_trace_with_tenants_is_refused_before_the_replay(
        files: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Shard or opportunistic jobs replay without tenants: one line and exit 2, no traceback."""
    _, tenants = files
    trace = tmp_path / "shared.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration,opportunistic\n"
                     "a,0.5,0,100,\nb,1,5,10,1\n")
    assert main(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4",
                 "--tenants", tenants]) == 2
    assert capsys.readouterr().err.strip() == (
        "dlprio: --tenants: the trace has shard or opportunistic jobs, which replay without "
        "tenants; drop --tenants or the sharing columns")


@pytest.mark.parametrize("text, line", [
    ("virtual_clusters:\n  A: {users: ['1'], guaranteed_gpus: 2}\nfair_share_half_lfe_s: 100\n",
     "fair_share_half_lfe_s: unknown key; did you mean 'fair_share_half_life_s'?"),
    ("virtual_clusters:\n  A: {users: ['1'], guaranteed_gpus: 2, user_limit_factor: 1.0e+308}\n",
     "virtual_clusters.A.user_limit_factor: 1e+308 x guaranteed_gpus 2 is above 2,147,483,648 "
     "GPUs, more than any cluster; leave user_limit_factor out for no user limit"),
    ("virtual_clusters:\n  A: {users: ['1', ''], guaranteed_gpus: 2}\n",
     "virtual_clusters.A.users: must be a list of user names (none empty)"),
    ("virtual_clusters:\n  A: {users: ['1', '2', '1'], guaranteed_gpus: 2}\n",
     "virtual_clusters.A.users: '1' listed more than once; list each user once"),
])
def test_tenants_file_mistakes_are_one_line(files: tuple[str, str], tmp_path: Path, text: str,
                                            line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in a top-level key, a user limit whose GPUs overflow (1e308 x 2 is no finite
    number), an empty user name and a user listed twice in one list: one line each, exit 2,
    before any replay."""
    trace, _ = files
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--tenants", str(bad)]) == 2
    assert capsys.readouterr().err == f"dlprio: {bad}: {line}\n"


@pytest.mark.parametrize("users, line", [
    ("[alice, 010]", "users[1]: a user name: expected a string, but YAML read the value as a "
     'number; quote it as written, e.g. users: ["8"] (got 8)'),
    ("[1_000]", "users[0]: a user name: expected a string, but YAML read the value as a "
     'number; quote it as written, e.g. users: ["1000"] (got 1000)'),
    ("[0x1F]", "users[0]: a user name: expected a string, but YAML read the value as a "
     'number; quote it as written, e.g. users: ["31"] (got 31)'),
    ("[alice, 'bob', no]", "users[2]: a user name: expected a string, but YAML read the value "
     'as the boolean false; quote it as written, e.g. users: ["no"] (got False)'),
    ("['1']\n    account: 010", "account: a Slurm name: expected a string, but YAML read the "
     'value as a number; quote it as written, e.g. account: "8" (got 8)'),
], ids=["octal", "underscore", "hex", "no", "account"])
def test_a_name_yaml_read_as_no_text_is_refused(files: tuple[str, str], tmp_path: Path,
                                                users: str, line: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """YAML reads an unquoted 010 as 8, 1_000 as 1000, 0x1F as 31 and no as false: a user
    named so would be matched under another name (or none), so the entry is refused with
    what YAML read and how to quote it."""
    trace, _ = files
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"virtual_clusters:\n  A:\n    users: {users}\n    guaranteed_gpus: 2\n")
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--tenants", str(bad)]) == 2
    assert capsys.readouterr() == ("", f"dlprio: {bad}: virtual_clusters.A.{line}\n")


def test_tenants_that_match_no_job_are_refused(files: tuple[str, str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """users: lists that name none of the trace's users, and a trace that names no user (the
    ITP format): no job would belong to a tenant, so the replay would show empty tenants."""
    trace, _ = files
    other = tmp_path / "other.yaml"
    other.write_text("virtual_clusters:\n  A: {users: ['nobody'], guaranteed_gpus: 2}\n")
    base = ["simulate", "--nodes", "1", "--gpus-per-node", "4", "--tenants", str(other)]
    assert main(base + ["--trace", trace]) == 2
    assert capsys.readouterr().err == (
        f"dlprio: --tenants: no job of the trace belongs to a virtual cluster of {other} "
        "(its users: lists name none of the trace's users)\n")
    itp = tmp_path / "itp.csv"
    itp.write_text("job_id,submission_time,duration,num_gpu\na,0,100,1\n")
    assert main(base + ["--trace", str(itp)]) == 2
    assert capsys.readouterr().err == (
        f"dlprio: --tenants: no job of the trace belongs to a virtual cluster of {other} "
        "(the trace names no user, account or partition: use a trace with a user column "
        "(Philly) or a history export)\n")


REPO = Path(__file__).resolve().parents[3]


def test_a_whole_dlprio_yaml_is_a_tenants_file(files: tuple[str, str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The packaged dlprio.yaml with the tenants above in its virtual_clusters: section: the
    replay of test_reclaim_in_a_replay (avg JCT 1100 s, 2 preemptions); its other sections
    (policy, mode, ledger_path, auto_tune, ...) are the daemon's and change nothing here."""
    trace, _ = files
    conf = (REPO / "conf" / "dlprio.yaml").read_text()
    assert "\nvirtual_clusters: ~\n" in conf
    whole = tmp_path / "dlprio.yaml"
    whole.write_text(conf.replace("\nvirtual_clusters: ~\n", "\n" + TENANTS))
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--zero-cost", "--tenants", str(whole), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)[0]
    assert (out["avg_jct_s"], out["preemptions"]) == (1100.0, 2)
    assert [t["name"] for t in out["tenants"]] == ["A", "B"]


@pytest.mark.parametrize("text, line", [
    (None, "no virtual clusters to replay; give a dlprio.yaml or a file with a "
     "'virtual_clusters:' section (and fair_share_half_life_s)"),
    ("fair_share_half_life_s: 100\n", "no virtual clusters to replay; give a dlprio.yaml or a "
     "file with a 'virtual_clusters:' section (and fair_share_half_life_s)"),
    ("- A\n", "no virtual clusters to replay; give a dlprio.yaml or a file with a "
     "'virtual_clusters:' section (and fair_share_half_life_s)"),
    ("virtual_clusters:\n  A: {users: ['1'], guaranteed_gpus: 2}\nbanana: 1\n",
     "banana: unknown key; valid keys: virtual_clusters, fair_share_half_life_s (or a whole "
     "dlprio.yaml)"),
    ("virtual_clusters:\n  A: {users: ['1'], guaranteed_gpus: 2}\nintervl_s: 30\n",
     "intervl_s: unknown key; did you mean 'interval_s'?"),
], ids=["packaged-dlprio.yaml", "half-life-only", "a-list", "no-dlprio-key", "dlprio-key-typo"])
def test_a_file_without_virtual_clusters_is_one_line(files: tuple[str, str], tmp_path: Path,
                                                     text: str | None, line: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The packaged dlprio.yaml (virtual_clusters: ~), a file with only the half-life, or no
    mapping at all has no tenants to replay; a key dlprio.yaml does not have is still named."""
    trace, _ = files
    bad = tmp_path / "bad.yaml"
    bad.write_text((REPO / "conf" / "dlprio.yaml").read_text() if text is None else text)
    assert main(["simulate", "--trace", trace, "--nodes", "1", "--gpus-per-node", "4",
                 "--tenants", str(bad)]) == 2
    assert capsys.readouterr().err == f"dlprio: {bad}: {line}\n"
