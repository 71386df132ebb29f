"""`finreflect-eval view`: the report folder of a scored run (pages, index, page, Space card),
its escaping, the two-run comparison, and one-line errors. The page in a browser:
test_view_browser.py.

The runs are scripted (fast): a dataset of the sample's first spans, one of whose texts holds a
hostile `<script>`, and a candidate whose second triple's object is hostile markup. The panel
(`accepts_all`, `rejects_all`, `gold_labels`) splits on every triple item (its majority is the
gold label) and has no majority on the comprehensiveness of the hostile span (good, partial,
poor: its text is not the gold one).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.runs import TRIPLES, panel_file, scripted_run

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.pipeline.summary import results_table
from finreflect_eval.protocol.criteria import CRITERIA
from finreflect_eval.records import Results, read
from finreflect_eval.runs.store import load_run
from finreflect_eval.stats import extraction, metrics
from finreflect_eval.view import open_run, report, write_report
from finreflect_eval.view.spans import NO_MAJORITY, SPLIT, TRIPLES_DIFFER, UNSCORED, VERDICTS_DIFFER

HOSTILE_TEXT = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> '
HOSTILE_OBJECT = "<img src=x onerror=window.pwned=3>"
TASKS = ("finreflect_smoke_single_pass", "finreflect_smoke_multi_pass")
N_SPANS = 4
ANSWER = {"triples": [TRIPLES["triples"][0], {**TRIPLES["triples"][1], "object": HOSTILE_OBJECT}]}


def hostile_dataset(folder: Path, n_spans: int = N_SPANS) -> Path:
    """The sample's first `n_spans` test spans (and its dev split, for the few-shot example),
    the first span's text prefixed with hostile markup."""
    from finreflect_eval.data import load_benchmark, text_sha256, write_dataset_folder

    test, dev = (load_benchmark("sample", split=split) for split in ("test", "dev"))
    spans = test.spans[:n_spans]
    text = HOSTILE_TEXT + spans[0].text
    spans = [spans[0].model_copy(update={"text": text, "sha256": text_sha256(text)}), *spans[1:]]
    kept = {span.span_id for span in spans}
    triples = [t for t in test.reference_triples if t.span_id in kept]
    tables = {
        "spans": {"test": spans, "dev": dev.spans},
        "reference_triples": {"test": triples, "dev": dev.reference_triples},
    }
    return write_dataset_folder(folder, tables)


def hostile_run(
    root: Path,
    model: str = "acme/kg-7b",
    judges: tuple[str, ...] = ("accepts_all", "rejects_all", "gold_labels"),
    limit: int = N_SPANS,
    answer: dict | None = None,
    name: str = "scripted-test",
) -> Path:
    """A scored scripted run on the hostile dataset; returns its run folder."""
    dataset = root / "dataset"
    if not dataset.exists():
        hostile_dataset(dataset)
    panel = panel_file(root / model.replace("/", "__"), *judges, name=name)
    results = scripted_run(
        root / f"{model.replace('/', '__')}-{name}-{limit}",
        model,
        limit,
        panel,
        TASKS,
        str(dataset),
        answer or ANSWER,
    )
    return results.parent


def read_script(path: Path, call: str) -> list:
    """The arguments of a data script (`FRV.index(task, {...});`) as JSON values."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith(f"FRV.{call}(") and text.rstrip().endswith(");"), path
    return json.loads("[" + text.strip()[len(call) + 5 : -2] + "]")


def report_spans(folder: Path, task: str) -> tuple[dict, list[dict]]:
    """A report's index of a task and its spans, in index order (from every page)."""
    _, index = read_script(folder / "data" / task / "index.js", "index")
    spans = []
    for number in range(max(index["page"]) + 1):
        name, page, rows = read_script(folder / "data" / task / f"{number}.js", "page")
        assert (name, page) == (task, number)
        spans += rows
    assert [span["i"] for span in spans] == list(range(len(index["ids"])))
    return index, spans


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view-runs")
    return {
        "a": hostile_run(root),
        # the same spans, another panel whose majority accepts everything, and other triples
        "b": hostile_run(
            root,
            "acme/kg-70b",
            ("accepts_all", "accepts_all", "gold_labels"),
            answer={"triples": TRIPLES["triples"]},
            name="other-panel",
        ),
        "fewer": hostile_run(root, "acme/kg-3b", limit=N_SPANS - 1),
    }


def test_the_report_folder_holds_the_page_its_pages_and_a_space_card(runs, tmp_path):
    index_html = write_report(runs["a"], tmp_path / "report")
    folder = index_html.parent
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    expected = {"index.html", *report.SCRIPTS, "report.css", "README.md", report.MARKER}
    expected |= {f"data/{task}/{name}" for task in TASKS for name in ("index.js", "0.js")}
    # A drawing of each filing's graph (the first spans are of four filings, one each).
    expected |= {f"data/{task}/graph-0-{n}.js" for task in TASKS for n in range(N_SPANS)}
    assert names == expected
    sizes = {name: (folder / name).stat().st_size for name in names}
    total = sum(sizes.values())
    print(f"report of a {N_SPANS}-span run, 2 tasks: {total:,} bytes ({sizes})")
    assert total < 400_000 and sizes["index.html"] < 200_000

    # No network: nothing refers to another host (no CDN, no fonts); data come as scripts.
    page = index_html.read_text(encoding="utf-8")
    for name in ("index.html", *report.SCRIPTS, "report.css"):
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]", (folder / name).read_text()), name
    assert 'href="report.css"' in page
    # The script's parts, each once, in their order; plain scripts (file:// blocks modules).
    assert re.findall(r'<script src="([^"]+)"></script>', page) == list(report.SCRIPTS)
    assert 'type="module"' not in page
    for name in report.SCRIPTS:
        script = (folder / name).read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|export)\b", script, re.M), name

    # A static Space: the leaderboard's front matter.
    card = (folder / "README.md").read_text(encoding="utf-8")
    front = card.split("---\n")[1]
    assert "sdk: static\n" in front and "app_file: index.html\n" in front

    # Every span of each task, in doc_id order, once, with its three judges' votes.
    run = load_run(runs["a"])
    for task in TASKS:
        index, spans = report_spans(folder, task)
        records = run.records[task]
        assert index["ids"] == [r.span_id for r in records] and len(records) == N_SPANS
        assert index["page"] == [0] * N_SPANS
        assert sorted(index["tickers"]) == sorted({r.ticker for r in records})
        for span, record in zip(spans, records, strict=True):
            assert span["text"] == record.text and span["section"] == record.section
            (part,) = span["runs"]
            assert part["t"] == [list(t.as_tuple()) for t in record.triples]
            assert [list(t.as_tuple()) for t in record.reference] == span["ref"]
            votes = record.votes["scripted-test"]
            for criterion, items in part["v"].items():
                for number, (_, _, cast) in enumerate(items):
                    for judge, (code, reasoning, warning, _) in zip(
                        ["judge-0", "judge-1", "judge-2"], cast, strict=True
                    ):
                        vote = votes[criterion][judge][number]
                        assert code == metrics.vote_code(vote.verdict)
                        assert part["s"][reasoning] == vote.reasoning
                        assert part["s"][warning] == vote.warning


def test_item_flags_are_the_review_queue_s_reasons_and_agree_with_the_results(runs, tmp_path):
    folder = write_report(runs["a"], tmp_path / "report").parent
    run = load_run(runs["a"])
    results = next(runs["a"].glob("results_*.json"))
    results = read(Results, results)
    seen = {"split": 0, "no majority": 0}
    for task in TASKS:
        index, spans = report_spans(folder, task)
        for span, record, mask in zip(spans, run.records[task], index["mask"], strict=True):
            (part,) = span["runs"]
            expected_mask = 0
            for criterion, items in part["v"].items():
                votes = record.votes["scripted-test"][criterion]
                for number, (label, flags, _) in enumerate(items):
                    outcome = metrics.aggregate(
                        {judge: votes[judge][number].verdict for judge in votes}
                    )
                    assert label == (
                        -1 if outcome.label is None else metrics.vote_code(outcome.label)
                    )
                    assert bool(flags & SPLIT) == outcome.split
                    assert bool(flags & NO_MAJORITY) == outcome.no_majority
                    assert bool(flags & UNSCORED) == (not outcome.scored)
                    seen["split"] += outcome.split
                    seen["no majority"] += outcome.no_majority
                    byte = (1 << 5) if label == -1 else 1 << label
                    byte |= (1 << 6) * outcome.split | (1 << 7) * outcome.no_majority
                    expected_mask |= byte << (8 * list(CRITERIA).index(criterion))
            assert mask == [expected_mask]
        # The counts the results file reports, item by item.
        for criterion, detail in results.details[task].criteria.items():
            items = [item for span in spans for item in span["runs"][0]["v"][criterion]]
            assert sum(bool(flags & SPLIT) for _, flags, _ in items) == detail.items.split
            assert sum(bool(f & NO_MAJORITY) for _, f, _ in items) == detail.items.no_majority
            assert sum(not (f & UNSCORED) for _, f, _ in items) == detail.items.n_scored
    assert seen["split"] > 0 and seen["no majority"] > 0


def test_a_leaderboard_submission_gives_the_same_report(runs, tmp_path):
    from finreflect_eval.leaderboard import bundle_run

    submission = bundle_run(next(runs["a"].glob("results_*.json")))
    folder = write_report(submission, tmp_path / "entry").parent
    same = write_report(runs["a"], tmp_path / "folder").parent
    for task in TASKS:
        assert report_spans(folder, task) == report_spans(same, task)


def test_pages_hold_a_bounded_count_and_size_of_spans(runs, tmp_path, monkeypatch):
    monkeypatch.setattr(report, "SPANS_PER_PAGE", 3)
    folder = write_report(runs["a"], tmp_path / "by-count").parent
    index, spans = report_spans(folder, TASKS[0])
    assert index["page"] == [0, 0, 0, 1] and len(spans) == N_SPANS
    monkeypatch.setattr(report, "PAGE_BYTES", 100)  # every span is larger: one a page
    folder = write_report(runs["a"], tmp_path / "by-size").parent
    index, spans = report_spans(folder, TASKS[0])
    assert index["page"] == [0, 1, 2, 3] and len(spans) == N_SPANS
    # Rewritten in place, a report keeps no page of the last one.
    monkeypatch.setattr(report, "PAGE_BYTES", 10**6)
    monkeypatch.setattr(report, "SPANS_PER_PAGE", 100)
    write_report(runs["a"], tmp_path / "by-size")
    pages = sorted(p.name for p in (folder / "data" / TASKS[0]).glob("[!g]*"))
    assert pages == ["0.js", "index.js"]


def test_run_text_is_data_never_markup(runs, tmp_path):
    run = open_run(runs["a"])
    hostile = "</script><script>window.pwned = 4</script><b>"
    config = run.results.config.model_copy(update={"model_name": hostile})
    run.results = run.results.model_copy(update={"config": config})
    folder = write_report(run, tmp_path / "report").parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert hostile not in page and "<b>" not in page
    assert "&lt;/script&gt;&lt;script&gt;window.pwned = 4" in page  # escaped by Jinja
    # The inline summary: valid JSON that nothing in it can close.
    summary = page.split('<script id="summary" type="application/json">', 1)[1].split("</script>")[
        0
    ]
    assert "<" not in summary and json.loads(summary)["runs"][0]["model"] == hostile
    # The span's text and the triple reach the page as JSON data (the scripts set them as text).
    _, spans = report_spans(folder, TASKS[0])
    assert spans[0]["text"].startswith(HOSTILE_TEXT)
    assert HOSTILE_OBJECT in [triple[3] for triple in spans[0]["runs"][0]["t"]]
    script = "".join((folder / name).read_text(encoding="utf-8") for name in report.SCRIPTS)
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script
    assert "document.write" not in script and "eval(" not in script


def test_two_runs_side_by_side_mark_the_spans_whose_verdicts_differ(runs, tmp_path):
    folder = write_report(runs["a"], tmp_path / "ab", compare=runs["b"]).parent
    a, b = load_run(runs["a"]), load_run(runs["b"])
    differing = 0
    for task in TASKS:
        index, spans = report_spans(folder, task)
        rows = zip(spans, a.records[task], b.records[task], index["diff"], strict=True)
        for span, ra, rb, diff in rows:
            assert ra.span_id == rb.span_id == span["id"] and len(span["runs"]) == 2
            expected: dict[str, list[list[int]]] = {}
            for criterion in CRITERIA:
                sides = [(ra, "scripted-test"), (rb, "other-panel")]
                labels = [
                    {
                        key: metrics.aggregate({j: v[i].verdict for j, v in votes.items()}).label
                        for i, key in enumerate(item_keys(record, criterion))
                        for votes in [record.votes[panel][criterion]]
                    }
                    for record, panel in sides
                ]
                changed = {
                    k
                    for k in labels[0].keys() & labels[1].keys()
                    if len(set(labels_of(labels, k))) > 1
                }
                if changed:
                    expected[criterion] = [
                        [i for i, key in enumerate(item_keys(record, criterion)) if key in changed]
                        for record, _ in sides
                    ]
            assert span.get("d", {}) == expected, span["id"]
            assert bool(diff & VERDICTS_DIFFER) == bool(expected)
            assert diff & TRIPLES_DIFFER  # B extracted other triples on every span
            differing += bool(expected)
    # Some spans differ (B's majority accepts what gold rejects), and not every item does.
    assert differing > 0
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert "B − A" in page and "acme/kg-70b" in page and "acme/kg-7b" in page


def item_keys(record, criterion: str) -> list:
    """What an item is, to pair it across runs: its triple's key (the span, for a span's item)."""
    if CRITERIA[criterion].per == "span":
        return ["span"]
    return [extraction.triple_key(triple) for triple in record.triples]


def labels_of(labels: list[dict], key) -> list:
    return [side[key] for side in labels]


def test_comparing_runs_on_other_spans_is_a_one_line_error(runs, tmp_path, cli):
    with pytest.raises(FinReflectError, match="not runs on the same spans"):
        write_report(runs["a"], tmp_path / "ab", compare=runs["fewer"])
    assert not (tmp_path / "ab").exists()
    result = cli("view", str(runs["a"]), str(runs["fewer"]), "--output", str(tmp_path / "ab"))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "not runs on the same spans" in result.stderr
    assert "1 span(s) only in A and 0 only in B" in result.stderr


def test_view_writes_next_to_the_run_and_refuses_what_is_not_a_run(runs, tmp_path, cli):
    result = cli("view", str(runs["a"]))
    assert result.returncode == 0, result.stderr
    assert (runs["a"] / "report" / "index.html").exists()
    assert str(runs["a"] / "report" / "index.html") in result.stdout
    # a results file works too, and the rerun replaces the report
    results = next(runs["a"].glob("results_*.json"))
    assert cli("view", str(results)).returncode == 0
    for args, message in [
        ((str(tmp_path / "missing"),), "no such run folder"),
        ((str(tmp_path),), "is not a run folder"),
        ((str(runs["a"] / "report" / "index.html"),), "is not a run"),
        ((str(runs["a"]), "--judges", "nobody"), "panel 'nobody' has not judged"),
        ((str(runs["a"]), str(runs["b"]), str(runs["a"])), "one run, or two"),
    ]:
        result = cli("view", *args)
        assert result.returncode == 1, args
        assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    # An output folder holding anything else is written into, never replaced.
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    result = cli("view", str(runs["a"]), "--output", str(other))
    assert result.returncode == 0 and (other / "index.html").exists(), result.stderr
    assert (other / "notes.txt").read_text() == "keep"


def test_view_push_uploads_the_report_as_a_static_space(runs, tmp_path, cli):
    """`view --push ORG/NAME` (against the loopback fake Hub): a static Space is created and
    the report's files arrive as written (the page, its data pages, the card's front matter),
    never the marker; a second push of a smaller report deletes the pages it no longer has.
    Offline, or a refused token, is one line, and the report is kept."""
    from support.hub_server import hub_server

    output = tmp_path / "report"
    with hub_server() as hub:
        environment = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_test", "HF_HUB_OFFLINE": "0"}
        args = ("view", str(runs["a"]), "--output", str(output), "--push", "acme/kg-report")
        result = cli(*args, env=environment)
        assert result.returncode == 0, result.stderr
        assert "pushed" in result.stdout and "acme/kg-report" in result.stdout
        assert "hf_test" not in result.stdout + result.stderr
        space = hub.repos["acme/kg-report"]
        assert space["type"] == "space"
        create = next(r for r in hub.requests if r.path == "/api/repos/create")
        assert json.loads(create.body)["sdk"] == "static"
        writes = [r for r in hub.requests if r.method == "POST"]
        assert all(r.headers.get("authorization") == "Bearer hf_test" for r in writes)
        local = {
            p.relative_to(output).as_posix(): p.read_bytes()
            for p in output.rglob("*")
            if p.is_file() and p.name != report.MARKER
        }
        assert space["files"] == local
        assert {"index.html", *report.SCRIPTS, "report.css", "README.md"} <= set(local)
        assert {f"data/{task}/0.js" for task in TASKS} <= set(local)
        front = space["files"]["README.md"].decode().split("---\n")[1]
        assert "sdk: static\n" in front and "app_file: index.html\n" in front

        # Pushed again with a page fewer, over an earlier version's one script: both go (the
        # folder is the Space).
        stale = [f"data/{TASKS[0]}/7.js", "report.js"]
        space["files"].update({stale[0]: b"FRV.page();", stale[1]: b"(function () {})();"})
        result = cli(*args, env=environment)
        assert result.returncode == 0, result.stderr
        assert not set(stale) & set(space["files"]) and space["files"] == local

    offline = cli("view", str(runs["a"]), "--output", str(output), "--push", "acme/kg-report")
    assert offline.returncode == 1 and offline.stderr.count("\n") == 1, offline.stderr
    assert "cannot push the report to the Space 'acme/kg-report' (" in offline.stderr
    assert f"it is kept in {output}" in offline.stderr and (output / "index.html").exists()
    with hub_server(fail_with=401) as hub:
        environment = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_bad_secret", "HF_HUB_OFFLINE": "0"}
        refused = cli(*args, env=environment)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "401" in refused.stderr and "hf_bad_secret" not in refused.stderr + refused.stdout


# --- a report folder is the user's too: a rerun replaces only what `view` wrote there ---

USERS = {  # what a user adds to a report folder: notes, a page for the Space, a file by the data
    "notes.md": b"# my notes\n",
    "extra/page.html": b"<p>about this run</p>\n",
    "data/mine.txt": b"beside the data pages\n",
}


def add_files(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


def folder_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_a_rerun_keeps_the_users_files_and_replaces_only_its_own(runs, tmp_path, cli):
    """A report of a page per span (4 pages a task), then the user's files; `view` again (a page
    a task) leaves the user's files as they were, its stale pages gone, and records what it
    wrote."""
    output = tmp_path / "report"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "SPANS_PER_PAGE", 1)
        write_report(runs["a"], output)
    assert (output / "data" / TASKS[0] / "3.js").exists()
    add_files(output, USERS)
    result = cli("view", str(runs["a"]), "--output", str(output))
    assert result.returncode == 0, result.stderr
    found = folder_files(output)
    for name, data in USERS.items():
        assert found.pop(name) == data, name
    assert found == folder_files(write_report(runs["a"], tmp_path / "fresh").parent)
    record = json.loads((output / report.MARKER).read_text(encoding="utf-8"))
    assert record["files"] == sorted(set(found) - {report.MARKER})


def test_a_users_file_where_the_report_writes_is_refused_and_nothing_changes(runs, tmp_path, cli):
    """The record is the truth: a file it does not list where `view` writes (the Space's card,
    here the user's own) is refused by name, one line, and nothing changes."""
    output = write_report(runs["a"], tmp_path / "report").parent
    ours = [name for name in folder_files(output) if name not in ("README.md", report.MARKER)]
    record = {"written_by": "finreflect-eval view", "files": ours}
    (output / report.MARKER).write_text(json.dumps(record), encoding="utf-8")
    (output / "README.md").write_text("---\nsdk: static\n---\n# my own card\n")
    add_files(output, USERS)
    before = folder_files(output)
    result = cli("view", str(runs["a"]), "--output", str(output))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and f"{output} holds README.md, which" in result.stderr
    assert folder_files(output) == before
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no staging folder left


def test_a_report_of_an_older_version_keeps_what_it_did_not_write(runs, tmp_path):
    """An older version's marker lists nothing: its page, styles, card, scripts (`report*.js`)
    and data pages (`data/<task>/*.js`) are taken as its own; the rest is the user's."""
    output = write_report(runs["a"], tmp_path / "report").parent
    (output / report.MARKER).write_text("finreflect-eval 0.0.1 view\n")
    older = {"report.js": b"(function () {})();", f"data/{TASKS[0]}/7.js": b"FRV.page();"}
    add_files(output, {**older, **USERS})
    write_report(runs["a"], output)
    found = folder_files(output)
    for name, data in USERS.items():
        assert found.pop(name) == data, name
    assert found == folder_files(write_report(runs["a"], tmp_path / "fresh").parent)


def test_a_push_keeps_the_users_files_on_the_space(runs, tmp_path, cli):
    """Only the report goes up: the user's files in the folder stay on their disk (it may be
    their current folder, secrets and all); files of theirs on the Space alone stay, even beside
    the data pages: a push deletes there only its own kinds of file (stale data pages and
    scripts)."""
    from support.hub_server import hub_server

    output = write_report(runs["a"], tmp_path / "report").parent
    add_files(output, USERS)
    args = ("view", str(runs["a"]), "--output", str(output), "--push", "acme/kg-report")
    with hub_server() as hub:
        environment = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_test", "HF_HUB_OFFLINE": "0"}
        assert cli(*args, env=environment).returncode == 0
        space = hub.repos["acme/kg-report"]  # its "files": the newest commit's
        only_there = {"data/space-notes.md": b"on the Space only", "extra/space.html": b"<p/>"}
        space["files"].update({**only_there, f"data/{TASKS[0]}/7.js": b"FRV.page();"})
        result = cli(*args, env=environment)
        assert result.returncode == 0, result.stderr
    for name, data in only_there.items():
        assert space["files"].get(name) == data, name
    assert not set(USERS) & set(space["files"])  # never uploaded
    assert "index.html" in space["files"]
    assert f"data/{TASKS[0]}/7.js" not in space["files"]  # a stale page of ours


def test_a_panel_that_is_not_official_is_said_to_be_so_and_the_demo_panel_means_nothing(
    runs, tmp_path
):
    page = write_report(runs["a"], tmp_path / "scripted").read_text(encoding="utf-8")
    assert "Panel &#39;scripted-test&#39; is not an official panel" in page
    demo = hostile_run(tmp_path / "demo", name="demo")
    page = write_report(demo, tmp_path / "demo-report").read_text(encoding="utf-8")
    assert "The demo panel is a smoke test" in page and "mean nothing about the model" in page
    (results,) = demo.glob("results_*.json")
    table = results_table(Results.model_validate_json(results.read_text(encoding="utf-8")))
    assert "judges: demo (the demo panel is a smoke test" in table


def test_intervals_on_few_filings_are_marked_unreliable(tmp_path):
    """Two spans of the sample are one or two filings: the report says its intervals are
    unreliable, beside the overall score and each criterion's interval."""
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "rejects_all")
    folder = scripted_run(tmp_path / "run", "candidate", 2, panel).parent
    page = write_report(open_run(folder), tmp_path / "report").read_text()
    assert "filing(s) only" in page and page.count(">unreliable</small>") >= 4
