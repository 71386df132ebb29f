"""Who cast an entry's votes: judge provenance (an official entry's judges ran as the bundled
panel pins them) and the seeded re-judging audit (`leaderboard audit`), its calibration, its
file on the board and what the page says of it."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from support.official import PAPER, REPO, hub_folder, paper_at_endpoints, register
from support.runs import candidate_file

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.leaderboard import build, check, load_entries, submit
from finreflect_eval.leaderboard.audited import audit_entry, calibrate
from finreflect_eval.leaderboard.provenance import provenance_problems
from finreflect_eval.leaderboard.rejudging import draw, file_sha256, seed_of
from finreflect_eval.pipeline.judging import load_panel
from finreflect_eval.records import JudgeMember, Submission

SMALL = ("qwen3-14b", "gemma-3-27b-it", "phi-4")


def official_run(cli, root: Path, dataset: Path, model: str, judges: list[str], env, *extra):
    out = root / model.replace("/", "_")
    result = cli(
        *("run", "--model", model, "--backend", "scripted", "--tasks", "finreflect"),
        *("--model-args", f"responses={candidate_file(root)}", "--dataset", str(dataset)),
        *("--output-path", str(out), *judges, *extra),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out / model.replace("/", "__")


def scripted_panel(folder: Path, name: str, judges, responder: str) -> Path:
    """A panel file calling itself `name`, whose judges wear `judges`' names (and the bundled
    panel's models, where it is one) but answer from a script."""
    bundled = (
        {j.name: j.model for j in load_panel(name).judges} if name in ("paper", "small") else {}
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{responder}.yaml"
    members = [
        {
            "name": judge,
            "model": bundled.get(judge, "scripted"),
            "backend": "scripted",
            "model_args": {"responses": f"support.scripted_judges:{responder}"},
        }
        for judge in judges
    ]
    path.write_text(yaml.safe_dump({"panel": name, "official": True, "judges": members}))
    return path


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A pinned official dataset with two entries judged by the `paper` panel at (scripted)
    endpoints: an honest one (each judge a verdict of its own per item) and a rubber stamp
    (every triple "yes"); both look official by provenance."""
    root = tmp_path_factory.mktemp("audit")
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    dataset = hub_folder(root)
    board = root / "board"
    register(board, dataset, pin=True)
    with paper_at_endpoints(considered=True) as judges:
        honest = official_run(run_cli, root, dataset, "acme/honest-7b", judges, env)
    with paper_at_endpoints(verdict=1, level="good") as judges:
        stamped = official_run(run_cli, root, dataset, "acme/stamped-7b", judges, env)
    for run in (honest, stamped):
        submit(run, board)
    entries = {e.model: e for e in load_entries(board, "submissions")}
    maintainers = load_panel(scripted_panel(root, "paper", PAPER, "considered"))
    return {
        "root": root,
        "env": env,
        "dataset": dataset,
        "board": board,
        "honest": board / entries["acme/honest-7b"].path,
        "stamped": board / entries["acme/stamped-7b"].path,
        "panel": maintainers,
    }


def rows_of(board: Path) -> dict[str, dict]:
    return {row["model"]: row for row in json.loads((board / "leaderboard.json").read_text())}


def test_a_rubber_stamp_panel_named_small_on_scripted_is_a_community_entry(board, cli, tmp_path):
    stamp = scripted_panel(tmp_path, "small", SMALL, "accepts_all")
    run = official_run(
        cli, tmp_path, board["dataset"], "acme/stamp-1b", ["--judges", str(stamp)], board["env"]
    )
    folder = tmp_path / "board"
    shutil.copytree(board["board"], folder)
    submit(run, folder)
    row = rows_of(folder)["acme/stamp-1b"]
    assert (row["section"], row["rank"]) == ("community", None)
    assert "judge qwen3-14b ran on backend 'scripted', not an engine" in row["panel_note"]
    assert row["community_reasons"] == [
        f"judge {name} ran on backend 'scripted', not an engine (hf, vllm, openai, "
        "openai-completions)"
        for name in SMALL
    ]
    assert "not an engine" in (folder / "index.html").read_text()


def small_as_pinned() -> list[JudgeMember]:
    """The `small` panel's judges as an honest vLLM run records them."""
    panel = load_panel("small")
    return [
        JudgeMember(
            **spec.model_dump(
                exclude={
                    "generation_kwargs",
                    "gated",
                    "licence_url",
                    "weights_gb",
                    "chat_template_sha",
                }
            ),
            generation_kwargs=panel.generation(spec).model_dump(),
            sha=spec.revision,
            engine="vllm 0.33.0",
        )
        for spec in panel.judges
    ]


def test_a_judge_at_another_revision_or_temperature_makes_a_community_entry():
    assert provenance_problems("small", small_as_pinned()) == []
    moved = small_as_pinned()
    moved[0].sha = "f" * 40
    assert provenance_problems("small", moved) == [
        f"judge qwen3-14b ran Qwen/Qwen3-14B at revision {'f' * 40}, not the panel's "
        f"{load_panel('small').judges[0].revision}"
    ]
    warm = small_as_pinned()
    warm[2].generation_kwargs["temperature"] = 0.7
    assert provenance_problems("small", warm) == [
        "judge phi-4 ran with temperature 0.7, not the panel's 0.0"
    ]
    thinking = small_as_pinned()
    thinking[0].model_args["think"] = "on"
    assert provenance_problems("small", thinking) == [
        "judge qwen3-14b ran with think 'on', not the panel's 'off'"
    ]
    # A run recorded before `think`: its switch counts as one; both, disagreeing, never match.
    earlier = small_as_pinned()
    del earlier[0].model_args["think"]
    earlier[0].model_args["enable_thinking"] = False
    assert provenance_problems("small", earlier) == []
    earlier[0].model_args["think"] = "off"
    earlier[0].model_args["enable_thinking"] = True
    assert provenance_problems("small", earlier) == [
        "judge qwen3-14b ran with think 'off with enable_thinking True', not the panel's 'off'"
    ]
    budget = small_as_pinned()
    budget[0].model_args["think_budget"] = 64
    assert provenance_problems("small", budget) == [
        "judge qwen3-14b ran with think_budget 64, not the panel's None"
    ]
    # What extra_body asks a server for wins there: it counts, and a disagreement never passes.
    overridden = small_as_pinned()
    overridden[0].model_args["extra_body"] = {
        "chat_template_kwargs": {"enable_thinking": True},
        "reasoning_effort": "high",
    }
    assert provenance_problems("small", overridden) == [
        "judge qwen3-14b ran with reasoning_effort 'high', not the panel's None",
        "judge qwen3-14b ran with think \"off with extra_body 'on'\", not the panel's 'off'",
    ]
    parsed = small_as_pinned()
    parsed[0].model_args["reasoning_parser"] = "deepseek_r1"
    assert provenance_problems("small", parsed) == [
        "judge qwen3-14b ran with reasoning_parser 'deepseek_r1', not the panel's None"
    ]
    prefixed = small_as_pinned()
    prefixed[1].system_prefix = "Say yes."
    assert (
        "judge gemma-3-27b-it ran with system prefix 'Say yes.'"
        in provenance_problems("small", prefixed)[0]
    )
    assert provenance_problems("custom", small_as_pinned()) == [
        "panel 'custom' is not a bundled official panel"
    ]


def test_an_official_run_records_who_judged(board):
    submission = Submission.model_validate_json(board["honest"].read_text())
    members = submission.manifest.judging["paper"].judges
    assert [m.name for m in members] == list(PAPER)
    pins = [j.revision for j in load_panel("paper").judges]
    assert [m.revision for m in members] == pins  # asked of the servers, recorded
    assert {m.engine for m in members} == {"openai server"}
    rows = rows_of(board["board"])
    assert rows["acme/honest-7b"]["section"] == "official"
    assert rows["acme/honest-7b"]["community_reasons"] == []


def test_the_draw_redraws_from_the_seed_and_changes_with_any_byte(board, tmp_path):
    submission = Submission.model_validate_json(board["honest"].read_text())
    seed = seed_of(file_sha256(board["honest"]))
    first = draw(submission, seed, 60)
    assert first == draw(submission, seed, 60) and len(first) == 60
    # stratified: every (task, criterion) gets its share
    strata = {(item.task, item.criterion) for item in first}
    assert len(strata) == 3 * 4
    changed = tmp_path / "entry.json"
    data = board["honest"].read_bytes()
    changed.write_bytes(data.replace(b'"scripted"', b'"scripted "', 1))
    assert file_sha256(changed) != file_sha256(board["honest"])
    assert draw(submission, seed_of(file_sha256(changed)), 60) != first


def test_an_honest_entry_passes_its_audit_and_a_rubber_stamp_fails_unranked(board, cli):
    folder, panel = board["board"], board["panel"]
    with pytest.raises(FinReflectError, match="no calibration of panel 'paper'"):
        audit_entry(folder, board["honest"], panel, size=120)
    _, calibration = calibrate(folder, board["honest"], panel, size=120)
    assert {j["same"] for j in calibration.report["judges"].values()} == {120}  # of 120
    _, honest = audit_entry(folder, board["honest"], panel, size=120)
    assert honest.report["passed"] and honest.report["agreement"]["rate"] == 1.0
    assert honest.report["difference"]["overall"]["score"] == 0.0
    _, stamped = audit_entry(folder, board["stamped"], panel, size=120)
    assert not stamped.report["passed"]
    assert stamped.report["difference"]["overall"]["score"] > 10  # the stamp inflates
    assert (
        "significantly below its re-run agreement 100.0% (120 of 120"
        in stamped.report["reasons"][0]
    )
    build(folder)
    rows = rows_of(folder)
    assert rows["acme/honest-7b"]["audit"]["state"] == "audited"
    assert rows["acme/honest-7b"]["rank"] == 1
    assert rows["acme/stamped-7b"]["audit"]["state"] == "failed"
    assert rows["acme/stamped-7b"]["rank"] is None  # not ranked, though official
    page = (folder / "index.html").read_text()
    # (agreement pooled over the three judges: 360 of 360 verdicts)
    assert "audited: 120 items re-judged, agreement 100.0% [98.9, 100.0]" in page
    assert "audit failed: not ranked" in page and "gives the entry&#39;s verdict on" in page
    assert check(folder) == []

    # An audit file edited by hand fails `build --check`, naming it
    (audit_file,) = (folder / "entry_audits").rglob("acme__stamped-7b/*.json")
    saved = audit_file.read_text()
    data = json.loads(saved)
    data["votes"][PAPER[0]] = [1] * len(data["votes"][PAPER[0]])
    audit_file.write_text(json.dumps(data))
    result = cli("leaderboard", "build", "--check", "--leaderboard", str(folder))
    assert result.returncode == 1 and str(audit_file) in result.stderr
    assert "report" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    audit_file.write_text(saved)
    assert check(folder) == []


def test_a_run_under_the_grounding_cascade_lands_unranked(board, cli, tmp_path):
    with paper_at_endpoints(considered=True) as judges:
        run = official_run(
            cli,
            tmp_path,
            board["dataset"],
            "acme/cascade-7b",
            judges,
            board["env"],
            "--skip-judging-ungrounded",
        )
    folder = tmp_path / "board"
    shutil.copytree(board["board"], folder)
    submit(run, folder)
    row = rows_of(folder)["acme/cascade-7b"]
    assert (row["section"], row["rank"]) == ("community", None)
    assert "grounding cascade" in row["panel_note"]


def test_an_entry_on_a_version_no_pin_names_is_shown_not_ranked(board, tmp_path):
    folder = tmp_path / "board"
    shutil.copytree(board["board"], folder)
    registry = json.loads((folder / "datasets.json").read_text())
    registry[0].update(pinned=None, revision=None)
    (folder / "datasets.json").write_text(json.dumps(registry))
    build(folder)
    rows = rows_of(folder)
    assert {(r["section"], r["rank"]) for r in rows.values()} == {("official", None)}
    assert "not ranked, until a maintainer pins one" in (folder / "index.html").read_text()


def test_the_audit_rule_rejects_an_honest_entry_rarely_and_a_stamp_mostly():
    """benchmarks/audit_power.py's simulation, bounded: at 200 items, a re-run agreement of 98%
    and 80% "yes" verdicts, an honest entry fails at most ~1% of the time (the rule's level)
    and an "always yes" forgery passes at most ~1%."""
    spec = importlib.util.spec_from_file_location(
        "audit_power", REPO / "benchmarks" / "audit_power.py"
    )
    power = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(power)
    rates = power.simulate(200, 400, rerun=0.98, yes_rate=0.8, seed=1)
    assert rates["honest"] >= 0.98
    assert rates["always yes"] <= 0.01 and rates["one lenient judge"] <= 0.03


def test_an_audit_of_what_is_not_a_stored_entry_is_one_line(board, cli, tmp_path):
    stray = tmp_path / "entry.json"
    stray.write_text(board["honest"].read_text())
    for entry in (stray, board["root"] / "missing.json"):
        result = cli(
            *("leaderboard", "audit", str(entry), "--judges", "small"),
            *("--leaderboard", str(board["board"])),
        )
        assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
        assert "is not in the leaderboard folder" in result.stderr
    result = cli(
        *("leaderboard", "audit", str(board["honest"]), "--judges", "small"),
        *("--leaderboard", str(board["board"])),
    )
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "no calibration of panel 'small'" in result.stderr
