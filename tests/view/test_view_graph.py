"""The report's Graph tab: the results' graph block per task, and a drawing per filing that marks
its fragmented entities and contradictions, for a hand-made run whose candidate writes the filer
three ways ("Apple Inc.", "Apple", "AAPL": one entity in Apple's own filing, two in any other)
and says iPhone sales both increase and decrease net sales; in Chromium at 1,280 and 390 px
(the screenshot goes where FINREFLECT_GRAPH_SCREENSHOT says). A run without triples shows no
graph. Markup in the graph's texts: test_view_hostile_browser.py.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from markupsafe import escape
from support.browser import Browser, overflow, require_browser
from support.runs import panel_file, scripted_run

from finreflect_eval.graph.table import triple_table
from finreflect_eval.records import Results, read
from finreflect_eval.view import graph as view_graph
from finreflect_eval.view import open_run, write_report

TASK = "finreflect_single_pass"  # up to 40 triples a span (a smoke task takes 3)


def triple(subject, subject_type, relation, obj, object_type):
    return {
        "subject": subject,
        "subject_type": subject_type,
        "relation": relation,
        "object": obj,
        "object_type": object_type,
    }


ANSWER = {
    "triples": [
        triple("Apple Inc.", "ORG", "Produces", "iPhone", "PRODUCT"),
        triple("Apple", "ORG", "Operates_In", "China", "GPE"),
        triple("AAPL", "ORG", "Discloses", "net sales", "FIN_METRIC"),
        triple("iPhone sales", "PRODUCT", "Increases", "net sales", "FIN_METRIC"),
        triple("iPhone sales", "PRODUCT", "Decreases", "net sales", "FIN_METRIC"),
    ]
}


@pytest.fixture(scope="module")
def graph_runs(tmp_path_factory) -> dict[str, Path]:
    """The hand-made run on the sample's first 3 spans (AAPL, BA and CAT, a filing each), and
    one whose candidate extracts nothing."""
    root = tmp_path_factory.mktemp("view-graph")
    panel = panel_file(root, "accepts_all", "accepts_all", "rejects_all")
    made = {}
    for name, answer in (("graph", ANSWER), ("empty", {"triples": []})):
        made[name] = scripted_run(root / name, "acme/kg-graph", 3, panel, (TASK,), answer=answer)
    return made


def read_drawing(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    head = f"FRV.graph({json.dumps(TASK)},"
    assert text.startswith(head) and text.endswith(");\n"), path
    run, number, drawing = json.loads("[" + text[len(head) : -3] + "]")
    assert isinstance(run, int) and isinstance(number, int)
    return drawing


def drawings(folder: Path, run: int = 0) -> dict[str, dict]:
    """Every filing's drawing of the task in a report, by filing, in the picker's order."""
    paths = sorted(
        (folder / "data" / TASK).glob(f"graph-{run}-*.js"),
        key=lambda path: int(path.stem.rpartition("-")[2]),
    )
    found = [read_drawing(path) for path in paths]
    return {drawing["filing"]: drawing for drawing in found}


def test_the_graph_tab_shows_the_results_graph_block(graph_runs, tmp_path):
    results = read(Results, graph_runs["graph"])
    block = results.graph[TASK]
    assert block.overall.contradictions == 3 and block.overall.filings == 3  # one a filing
    folder = write_report(graph_runs["graph"], tmp_path / "report").parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert '<a href="#graph" data-view="graph">Graph</a>' in page
    section = page[page.index('<section id="graph"') : page.index('<section id="settings"')]
    shown = dict(re.findall(r'<tr data-key="(\w+)">.*?<td class="num">([^<]*)</td>', section))
    overall = block.overall
    assert shown == {
        "entities": str(overall.entities),
        "edges": str(overall.edges),
        "surface_forms_per_entity": f"{overall.surface_forms_per_entity:.2f}",
        "fragmented_share": f"{100 * overall.fragmented_share:.1f}%",
        "duplicate_triples": str(overall.duplicate_triples),
        "contradictions": "3",
        "invalid_type_pairs": str(overall.invalid_type_pairs),
        "largest_component_share": f"{100 * overall.largest_component_share:.1f}%",
        "cross_chunk_entities": str(overall.cross_chunk_entities),
    }
    grounding = dict(re.findall(r'<td data-key="(\w+)">(\d+)</td>', section))
    assert grounding == {
        key: str(getattr(block.grounding, key)) for key in ("checked", "grounded", "ungrounded")
    }
    # The reference overlap (the sample has reference triples), exact and normalised.
    assert block.reference is not None
    rows = re.findall(r'<tr><th scope="row">(exact|normalised)</th><td class="left">(\w+)', section)
    assert rows == [(m, level) for m in ("exact", "normalised") for level in ("entity", "edge")]
    f1 = block.reference["normalised"]["entity"]["f1"]
    assert f"<td>{100 * f1:.1f}</td>" in section
    # The rules, collapsed, and the opposite relations; every filing in the table and picker.
    assert '<details class="graph-rules"><summary>Normalisation rules</summary>' in section
    assert all(f"<li>{escape(rule)}</li>" in section for rule in block.normalisation)
    assert "Increases and Decreases" in section
    options = re.findall(r'<option value="(\d+)">([^<]*)</option>', section)
    assert [(n, text.split(" · ")[0]) for n, text in options] == [
        ("0", "AAPL_2024"),
        ("1", "BA_2024"),
        ("2", "CAT_2024"),
    ]
    assert options[0][1] == "AAPL_2024 · 5 entities · 1 fragmented · 1 contradiction"


def test_a_filing_s_drawing_marks_fragmented_entities_and_contradictions(graph_runs, tmp_path):
    folder = write_report(graph_runs["graph"], tmp_path / "report").parent
    found = drawings(folder)
    assert list(found) == ["AAPL_2024", "BA_2024", "CAT_2024"]

    # Apple's own filing: the filer written three ways is one entity, and the pair contradicts.
    apple = found["AAPL_2024"]
    nodes = {node[0]: node for node in apple["nodes"]}
    assert set(nodes) == {"AAPL", "iPhone", "China", "net sales", "iPhone sales"}
    _, x, y, degree, fragmented, forms, types = nodes["AAPL"]
    assert (degree, fragmented, forms, types) == (3, 1, ["AAPL", "Apple", "Apple Inc."], ["ORG"])
    assert 0 <= x <= 1 and 0 <= y <= 1
    assert [n[0] for n in apple["nodes"] if n[4]] == ["AAPL"]
    assert [node[0] for node in apple["nodes"]][:2] == ["AAPL", "net sales"]  # by degree
    links = {link[2]: link for link in apple["links"]}
    assert {relation: link[3] for relation, link in links.items()} == {
        "Produces": 0,
        "Operates_In": 0,
        "Discloses": 0,
        "Increases": 1,
        "Decreases": 1,
    }
    ends = {(apple["nodes"][link[0]][0], apple["nodes"][link[1]][0]) for link in apple["links"]}
    assert ("iPhone sales", "net sales") in ends and ("AAPL", "China") in ends
    assert apple["fragmented"] == [["AAPL", ["AAPL", "Apple", "Apple Inc."]]]
    assert apple["contradictions"] == [["iPhone sales", "Increases", "Decreases", "net sales"]]

    # In Boeing's filing "Apple Inc." and "Apple" are one entity, "AAPL" another.
    boeing = found["BA_2024"]
    assert boeing["fragmented"] == [["Apple", ["Apple", "Apple Inc."]]]
    assert {node[0] for node in boeing["nodes"]} >= {"Apple", "AAPL"}

    # Each filing's counts are the results' (graph.metrics counts them the same way).
    block = read(Results, graph_runs["graph"]).graph[TASK]
    for filing, drawing in found.items():
        quality = block.per_filing[filing]
        assert drawing["entities"] == quality.entities == len(drawing["nodes"])
        assert drawing["edges"] == quality.edges == len(drawing["links"])
        assert drawing["n_contradictions"] == quality.contradictions == 1
        assert drawing["n_fragmented"] == round(quality.fragmented_share * quality.entities)
        figures = dict(drawing["quality"])  # the filing's figures of the block, as shown
        assert figures["contradictions"] == "1" and figures["entities"] == str(quality.entities)
        assert figures["fragmented"] == f"{100 * quality.fragmented_share:.1f}%"
        assert len(figures) == len(view_graph.QUALITY)

    # Deterministic: the same run gives the same bytes.
    again = write_report(graph_runs["graph"], tmp_path / "again").parent
    for path in (folder / "data" / TASK).glob("graph-*.js"):
        assert path.read_bytes() == (again / "data" / TASK / path.name).read_bytes()


def test_a_big_filing_is_drawn_by_its_best_connected_entities(tmp_path):
    """A hub with 100 spokes and a chain among the spokes: the drawing keeps MAX_ENTITIES
    entities, highest degree first, and the edges among them, and says how many of each."""
    base = {"task": TASK, "filing": "BIG_2024", "ticker": "BIG", "company": "Big Corp"}
    rows = [{**base, **triple("Hub", "ORG", "Supplies", f"Spoke {n}", "COMP")} for n in range(100)]
    rows += [
        {**base, **triple(f"Spoke {n}", "COMP", "Partners_With", f"Spoke {n + 1}", "COMP")}
        for n in range(0, 60)
    ]
    rows = [{**row, "span_id": f"s{n % 7}", "triple_index": n} for n, row in enumerate(rows)]
    (folder := tmp_path / "data").mkdir()
    filings = view_graph.write_graphs(folder, TASK, 0, triple_table(rows), [])
    assert [f["name"] for f in filings] == ["BIG_2024"]
    drawing = read_drawing(folder / "graph-0-0.js")
    assert drawing["entities"] == 101 and drawing["edges"] == 160
    assert len(drawing["nodes"]) == view_graph.MAX_ENTITIES
    degrees = [node[3] for node in drawing["nodes"]]
    assert drawing["nodes"][0][0] == "Hub" and degrees == sorted(degrees, reverse=True)
    assert set(degrees[1:]) == {3}  # the spokes inside the chain, not those outside it
    assert len(drawing["links"]) == drawing["edges_among"] < drawing["edges"]
    shown = {node[0] for node in drawing["nodes"]}
    assert all(
        drawing["nodes"][a][0] in shown and drawing["nodes"][b][0] in shown
        for a, b, *_ in drawing["links"]
    )


def test_a_run_without_triples_shows_no_graph(graph_runs, tmp_path):
    assert read(Results, graph_runs["empty"]).details[TASK].n_triples == 0
    folder = write_report(graph_runs["empty"], tmp_path / "report").parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert 'data-view="graph"' not in page and 'id="graph"' not in page
    assert not list((folder / "data").rglob("graph-*.js"))


def test_results_scored_before_the_graph_block_still_draw_the_graph(graph_runs, tmp_path):
    run = open_run(graph_runs["graph"])
    run.results = run.results.model_copy(update={"graph": {}})
    folder = write_report(run, tmp_path / "report").parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert "These results have no graph block" in page and '<figure class="kg"' in page
    assert 'class="graph-quality"' not in page
    assert list(drawings(folder)) == ["AAPL_2024", "BA_2024", "CAT_2024"]


def test_two_runs_side_by_side_each_show_their_graph(graph_runs, tmp_path):
    folder = write_report(
        graph_runs["graph"], tmp_path / "report", compare=graph_runs["empty"]
    ).parent
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert 'id="graph"' in page and page.count('<figure class="kg"') == 1
    assert '<h3 class="graph-run run-a">Run A: ' in page
    assert list(drawings(folder, 0)) == ["AAPL_2024", "BA_2024", "CAT_2024"]
    assert not drawings(folder, 1)


def test_the_graph_in_chromium_at_1280_and_390_px(graph_runs, tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    url = write_report(graph_runs["graph"], tmp_path / "report").as_uri() + "#graph"
    screenshot = Path(os.environ.get("FINREFLECT_GRAPH_SCREENSHOT", tmp_path / "graph.png"))
    with sync_playwright() as playwright:
        chromium = Browser(playwright)
        page, _ = chromium.open(url)
        figure = page.locator("figure.kg")
        drawn = figure.locator(".kg-canvas svg")  # (the legend draws its own marks)
        page.wait_for_selector('figure.kg[data-drawn="AAPL_2024"]')
        assert page.locator("#graph").is_visible() and not page.locator("#scores").is_visible()
        assert drawn.locator("g.kg-entity").count() == 5
        fragmented = drawn.locator("g.kg-entity.fragmented")
        assert fragmented.count() == 1 and fragmented.locator("circle.kg-ring").count() == 1
        assert fragmented.locator("text.kg-label").text_content() == "AAPL"
        title = fragmented.locator("title").text_content()
        assert title.startswith("AAPL — 3 distinct triples; written as “AAPL” · “Apple”")
        contra = drawn.locator("line.kg-edge.contra")
        assert contra.count() == 2 and drawn.locator("text.kg-mark").count() == 2
        titles = [t.text_content() for t in contra.locator("title").all()]
        assert sorted(titles) == [
            f"iPhone sales — {r} → net sales (1 triple); contradicts the opposite relation"
            for r in ("Decreases", "Increases")
        ]
        assert drawn.locator("line.kg-edge:not(.contra)").count() == 3
        legend = figure.locator(".kg-legend li").all_text_contents()
        assert len(legend) == 4 and "fragmented entity" in legend[1] and "≠" in legend[3]
        assert figure.locator(".kg-fragmented").all_text_contents() == [
            "AAPL written as “AAPL” · “Apple” · “Apple Inc.”"
        ]
        assert figure.locator(".kg-contradiction").all_text_contents() == [
            "iPhone sales — Increases and Decreases → net sales"
        ]
        assert "AAPL_2024: 5 entities, 5 edges" in figure.locator(".kg-caption").text_content()
        filing = figure.locator(".kg-figures li").all_text_contents()
        assert len(filing) == 9 and "contradictions 1" in filing and "fragmented 20.0%" in filing
        assert overflow(page) <= 0
        page.screenshot(path=str(screenshot), full_page=True)

        # Another filing from the picker.
        page.select_option("figure.kg select", "1")
        page.wait_for_selector('figure.kg[data-drawn="BA_2024"]')
        assert figure.locator(".kg-fragmented").all_text_contents() == [
            "Apple written as “Apple” · “Apple Inc.”"
        ]

        # A phone: the drawing takes its width, its labels stay at least 10 px high.
        phone, _ = chromium.open(url, 390, 844, is_mobile=True)
        phone.wait_for_selector('figure.kg[data-drawn="AAPL_2024"]')
        assert overflow(phone) <= 0
        box = phone.locator("figure.kg .kg-canvas svg").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        heights = [label.bounding_box()["height"] for label in phone.locator("text.kg-label").all()]
        assert len(heights) == 5 and min(heights) >= 10, heights
        chromium.browser.close()
    assert not chromium.errors, chromium.errors
    assert screenshot.stat().st_size > 10_000
