"""`finreflect-eval view`, the report's rough edges: writing into the current folder (or any
folder of the user's) keeps their files; an extract-only run beside a scored one says where the
scored one is; a run whose every extraction failed says so; each task's dataset is shown; and
docs/viewer.md names the tabs the page has.
"""

from __future__ import annotations

import html as html_text
import re
from pathlib import Path

import pytest
from conftest import REPO
from support.runs import candidate_file, panel_file, scripted_run
from test_view import TASKS, add_files, folder_files, hostile_run

from finreflect_eval._util.tables import markdown_text
from finreflect_eval.models import ModelSpec
from finreflect_eval.pipeline.evaluator import extract
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.scoring.failures import FailurePolicy
from finreflect_eval.view import ViewRun, open_run, report, write_report

USERS = {"notes.md": b"# mine\n", "data/mine.txt": b"beside the data\n", "deep/a/b.txt": b"b\n"}


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> Path:
    return hostile_run(tmp_path_factory.mktemp("view-notes"))


def test_view_writes_into_the_current_folder_and_keeps_the_users_files(
    scored, tmp_path, monkeypatch
):
    """`--output .`: the folder itself cannot be renamed (the shell stands in it); the report
    is written into it, beside the user's files, and written again the same way."""
    here = tmp_path / "here"
    add_files(here, USERS)
    monkeypatch.chdir(here)
    for _ in range(2):  # a first report, then a rerun over it
        index = write_report(scored, ".")
        assert index.resolve() == (here / "index.html").resolve()
        found = folder_files(here)
        for name, data in USERS.items():
            assert found.pop(name) == data, name
        assert found == folder_files(write_report(scored, tmp_path / "fresh").parent)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "here"]  # nothing left over
    # A write killed while it filled its staging folder (SIGKILL: no clean-up ran) leaves it;
    # the next write removes it, and it never counts as the user's.
    left = here / f"{report.MARKER}.dead1234.staging"
    add_files(left, {"index.html": b"half"})
    write_report(scored, ".")
    assert not left.exists()
    assert set(folder_files(here)) == set(folder_files(tmp_path / "fresh")) | set(USERS)


def test_view_writes_into_a_folder_of_the_users_and_refuses_only_its_files_in_the_way(
    scored, tmp_path, cli
):
    mine = tmp_path / "mine"
    add_files(mine, USERS)
    result = cli("view", str(scored), "--output", str(mine))
    assert result.returncode == 0, result.stderr
    assert (mine / "index.html").exists() and (mine / report.MARKER).exists()
    assert all((mine / name).read_bytes() == data for name, data in USERS.items())
    # A file of the user's where the report writes is refused by name, and nothing changes.
    theirs = tmp_path / "theirs"
    add_files(theirs, {**USERS, "index.html": b"<p>my page</p>"})
    result = cli("view", str(scored), "--output", str(theirs))
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert f"{theirs} holds index.html, which" in result.stderr
    assert folder_files(theirs) == {**USERS, "index.html": b"<p>my page</p>"}


def test_an_extract_only_run_beside_a_scored_one_says_where_the_scored_one_is(tmp_path, cli):
    scored = hostile_run(tmp_path / "runs")
    (manifest,) = scored.glob("manifest_*.json")
    config = RunConfig(
        model=ModelSpec("acme/kg-7b", "scripted", {"responses": str(candidate_file(tmp_path))}),
        tasks=list(TASKS),
        dataset=str(scored.parents[2] / "dataset"),
        limit=2,
        output_path=scored.parent,
        cache=tmp_path / "cache.sqlite",
    )
    assert extract(config).folder == scored  # the newest run of the folder: not judged
    result = cli("view", str(scored))
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "has no votes yet" in result.stderr
    assert f"a scored run of acme/kg-7b is at {manifest}" in result.stderr


def test_a_run_whose_every_extraction_failed_says_so(scored, tmp_path):
    """A banner (text, escaped) says none of the spans' extractions succeeded, with the first
    error; a run that extracted shows none."""
    panel = panel_file(tmp_path, "accepts_all", "rejects_all", "gold_labels")
    policy = FailurePolicy(allow_failures=True)
    answer = "<b>not JSON</b>"
    failed = scripted_run(
        tmp_path / "failed", "acme/kg-broken", 3, panel, answer=answer, policy=policy
    )
    page = write_report(failed.parent, tmp_path / "report").read_text(encoding="utf-8")
    banner = re.search(r'<p class="failed-note" role="alert">(.*?)</p>', page, re.S)
    assert banner, page[:3000]
    assert "None of the 3 extractions succeeded" in banner.group(1)
    assert "first error:" in banner.group(1)
    assert "<b>" not in page
    page = write_report(scored, tmp_path / "scored").read_text(encoding="utf-8")
    assert "failed-note" not in page


def test_each_tasks_dataset_is_shown(scored, tmp_path):
    run = open_run(scored)
    first = run.manifest.tasks[TASKS[0]].dataset
    other = first.model_copy(update={"id": "acme/<i>other</i>-10k", "revision": "v2"})
    tasks = {**run.manifest.tasks}
    tasks[TASKS[1]] = tasks[TASKS[1]].model_copy(update={"dataset": other})
    manifest = run.manifest.model_copy(update={"tasks": tasks})
    mixed = ViewRun(manifest, run.results, run.records, run.where, run.human_labels)
    page = write_report(mixed, tmp_path / "report").read_text(encoding="utf-8")
    (line,) = re.findall(r'<li class="run-a">(.*?)</li>', page, re.S)
    assert f"dataset {first.id}" in line and "dataset acme/&lt;i&gt;other&lt;/i&gt;-10k" in line
    assert "revision v2" in line and TASKS[0] in line and TASKS[1] in line
    card = (tmp_path / "report" / "README.md").read_text(encoding="utf-8")
    assert markdown_text("acme/<i>other</i>-10k") in card and markdown_text(first.id) in card
    # One dataset for every task: said once, without the tasks' names.
    page = write_report(run, tmp_path / "one").read_text(encoding="utf-8")
    (line,) = re.findall(r'<li class="run-a">(.*?)</li>', page, re.S)
    assert line.count(" · dataset ") == 1 and TASKS[0] not in line


def test_the_docs_name_the_tabs_the_page_has():
    template = (REPO / "finreflect_eval" / "view" / "templates" / "report.html.jinja").read_text()
    nav = re.search(r'<nav class="tabs".*?</nav>', template, re.S).group(0)
    tabs = re.findall(r'data-view="[a-z]+">([^<]+)</a>', nav)
    doc = (REPO / "docs" / "viewer.md").read_text(encoding="utf-8")
    count = {5: "five", 6: "six", 7: "seven"}[len(tabs)]
    assert f"in {count} tabs" in doc
    listed = re.findall(r"^- \*\*([^*]+)\*\*", doc.split(f"in {count} tabs", 1)[1], re.M)
    assert listed == tabs


@pytest.mark.skipif(not Path("/proc/1").is_dir(), reason="no /proc here")
def test_a_folder_that_takes_no_report_is_one_line_naming_it(scored, cli):
    result = cli("view", str(scored), "--output", "/proc/1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "finreflect-eval: error: cannot write the report into /proc/1: No such file or "
        "directory; choose another --output"
    ]


def test_the_hint_to_a_scored_run_beside_is_left_out_where_the_folder_cannot_be_read(
    tmp_path, monkeypatch
):
    """The hint is a courtesy: an unreadable parent folder (as root, only a fault shows it)
    leaves it out, never a traceback."""
    from pathlib import Path

    from finreflect_eval.view import source

    def unreadable(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", unreadable)
    assert source._scored_beside(tmp_path / "run", "acme/kg-7b") is None


def test_the_space_card_writes_the_run_s_names_as_text(scored, monkeypatch):
    """A model name or dataset id is untrusted: on the Space's card it is text, never a link,
    a heading or HTML (rendered by python-markdown, as mkdocs renders the docs)."""
    from types import SimpleNamespace

    import markdown

    hostile = (
        "x](https://evil.example) <script>alert(1)</script>\n# Heading *bold* mail@evil.example"
    )
    run = open_run(scored)
    run.results.config.model_name = hostile
    info = SimpleNamespace(id=hostile, split="test<img src=x onerror=alert(1)>")
    monkeypatch.setattr(report, "task_datasets", lambda run, tasks: [{"info": info}])
    text = report.space_card([run]).split("---\n", 2)[2]
    for extensions in ([], ["extra", "tables"]):
        html = markdown.markdown(text, extensions=extensions)
        assert not re.search(r"<(a|script|img|h2|em|table)\b", html), html
        shown = html_text.unescape(re.sub(r"<[^>]+>", "", html))
        assert "<script>alert(1)</script>" in shown and "# Heading *bold*" in shown
    # No bare link for a renderer that links them (GFM's autolinks, as the Hub's).
    assert "https://" not in text and "@evil" not in text
