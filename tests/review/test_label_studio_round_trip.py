"""The whole human loop against the real Label Studio: `review export --url` creates the project,
a reviewer annotates it through Label Studio's API as the web UI would, `review import --url`
pulls the export, and `score` measures the panel against the people.

The panel says yes to every triple and good of every span; the reviewer agrees on faithfulness,
says no to every precision, and partial of every span. So the numbers are known: faithfulness
accuracy 1 and PPI 100; precision accuracy 0 and PPI 0 (the people's own mean: a panel that never
varies cannot inform it, λ = 0); comprehensiveness PPI 50."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.runs import panel_file, scripted_run

pytestmark = pytest.mark.slow

ANSWERS = {
    "faithfulness": "yes",
    "precision": "no",
    "relevance": "yes",
    "comprehensiveness": "partial",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("round-trip")
    panel = panel_file(folder, "accepts_all", "accepts_all", "accepts_all")
    return scripted_run(folder, "cand", 6, panel).parent


def annotate(ls, project: int) -> tuple[int, int]:
    """Every task annotated by the reviewer (the first one skipped); (triples, spans) done."""
    done = [0, 0]
    for number, task in enumerate(ls.tasks.list(project=project)):
        if number == 0:
            ls.annotations.create(id=task.id, result=[], was_cancelled=True)
            continue
        triple = task.data["kind"] == "triple"
        names = ("faithfulness", "precision", "relevance") if triple else ("comprehensiveness",)
        result = [
            {"from_name": name, "to_name": "span", "type": "choices"}
            | {"value": {"choices": [ANSWERS[name]]}}
            for name in names
        ]
        ls.annotations.create(id=task.id, result=result)
        done[0 if triple else 1] += 1
    return done[0], done[1]


def test_export_annotate_import_score(cli, run, label_studio, tmp_path):
    env = {"LABEL_STUDIO_API_KEY": label_studio.token}
    exported = cli(
        "review", "export", str(run), "--audit-sample", "5", "--url", label_studio.url, env=env
    )
    assert exported.returncode == 0, exported.stderr
    assert label_studio.token not in exported.stdout + exported.stderr
    project = int(exported.stdout.split("created project ")[1].split()[0])
    ls = label_studio.client()
    tasks = list(ls.tasks.list(project=project))
    written = json.loads((run / "label-studio" / "tasks.json").read_text())
    assert len(tasks) == len(written) > 0
    assert all(task.data["sample"] == "audit" for task in tasks)  # a panel that agrees flags none
    triples, spans = annotate(ls, project)

    imported = cli(
        "review", "import", str(run), "--url", label_studio.url, "--project", str(project), env=env
    )
    assert imported.returncode == 0, imported.stderr
    assert "1 cancelled" in imported.stdout
    assert label_studio.token not in imported.stdout + imported.stderr
    for path in run.rglob("*"):
        if path.is_file():
            assert label_studio.token.encode() not in path.read_bytes(), path
            assert b"reviewer@example.com" not in path.read_bytes(), path

    scored = cli("score", "--samples", str(run))
    assert scored.returncode == 0, scored.stderr
    results = json.loads(next(run.glob("results_*.json")).read_text())
    human = results["human"]["finreflect_smoke_single_pass"]
    task_results = results["results"]["finreflect_smoke_single_pass"]
    faithfulness, precision = human["faithfulness"], human["precision"]
    assert faithfulness["labels"] == faithfulness["audit_labels"] == triples
    assert faithfulness["panel"] == task_results["faithfulness,none"] == 100
    assert faithfulness["panel_agreement"]["accuracy"] == 1.0
    assert faithfulness["ppi"] == 100.0
    assert precision["panel_agreement"]["accuracy"] == 0.0
    assert precision["panel_agreement"]["confusion"]["no"]["yes"] == triples
    assert precision["ppi"] == 0.0 and precision["ppi_lambda"] == 0.0
    comprehensiveness = human["comprehensiveness"]
    assert comprehensiveness["labels"] == spans
    assert comprehensiveness["ppi"] == 50.0
    assert set(faithfulness["judges"]) == {"judge-0", "judge-1", "judge-2"}
    assert faithfulness["annotators"] == 1 and faithfulness["unresolved"] == 0


def test_a_wrong_token_is_one_line_and_never_printed(cli, run, label_studio):
    env = {"LABEL_STUDIO_API_KEY": "not-the-token-" + "x" * 20}
    result = cli(
        "review", "export", str(run), "--audit-sample", "2", "--url", label_studio.url, env=env
    )
    assert result.returncode == 1
    assert "HTTP 401" in result.stderr and "is the token right?" in result.stderr
    assert "not-the-token" not in result.stdout + result.stderr
