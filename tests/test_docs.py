"""The README is a front door and the docs cannot rot: the README stays short and lists the docs'
pages in a table, every page is in the site's nav, every relative link of the README and of
docs/ reaches a file, every `finreflect-eval` command they show parses with the real command
line, every Python example that imports the package compiles, and the generated parts of the CLI
reference and the file formats are what the code gives now (the ones the tests run are run
elsewhere: test_quickstart, test_models_vllm)."""

import importlib.util
import re
import shlex

import pytest
import yaml
from conftest import REPO

from finreflect_eval.cli.parser import build_parser

DOCS = REPO / "docs"
README = REPO / "README.md"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)")


def page_id(page) -> str:
    return page.relative_to(REPO).as_posix()


def test_the_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    first_screens = "\n".join(lines[:120])
    for shown in ("## Quickstart", "## Benchmark a model on one GPU", "--check", "HF_TOKEN"):
        assert shown in first_screens
    assert "## Your own filings" in "\n".join(lines[:160])


def test_ci_runs_the_readmes_test_command_as_written():
    """The README's second command (the tests) is the line .ci/run runs, character for
    character: a stranger who copies it runs what CI runs."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    tests = next(block.strip() for block in blocks if "pytest" in block)
    assert tests in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, relative to docs/, in order."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    found = []

    def walk(item):
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, list):
            for part in item:
                walk(part)
        elif isinstance(item, dict):
            for part in item.values():
                walk(part)

    walk(config["nav"])
    return found


def test_the_nav_lists_every_page_once():
    on_disk = sorted(page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md"))
    listed = nav_pages()
    assert len(listed) == len(set(listed)), f"a page is twice in the nav: {listed}"
    assert sorted(listed) == on_disk, (
        f"not in mkdocs.yml's nav: {sorted(set(on_disk) - set(listed))}; "
        f"in the nav but not in docs/: {sorted(set(listed) - set(on_disk))}"
    )


def test_the_readme_has_a_table_of_the_docs_pages():
    rows = [line for line in README.read_text(encoding="utf-8").splitlines() if line[:1] == "|"]
    in_table = {target for row in rows for target in LINK.findall(row)}
    missing = [page for page in nav_pages() if f"docs/{page}" not in in_table]
    assert not missing, f"README.md's table of the docs does not link to {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_reaches_a_file(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{page_id(page)}: {target}"


def commands(page) -> list[str]:
    """The `finreflect-eval ...` command lines of a page's code blocks (continuations joined)."""
    text = page.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].split("&&")[-1].strip().removesuffix("&").strip()
            synopsis = "[--" in line  # a usage line with placeholders, not a command
            if "finreflect-eval " in line and not line.startswith("#") and not synopsis:
                found.append(line.split("finreflect-eval ", 1)[1])
    return found


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_command_shown_parses(page):
    parser = build_parser()
    for command in commands(page):
        try:
            parser.parse_args(shlex.split(command))
        except SystemExit:
            pytest.fail(f"{page_id(page)}: `finreflect-eval {command}` does not parse")


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_python_example_compiles(page):
    """A Python block that uses the package is at least valid Python (the quickstart's is run by
    test_quickstart)."""
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    for number, block in enumerate(blocks, 1):
        if re.search(r"^\s*(from|import) finreflect_eval\b", block, re.M):
            compile(block, f"{page_id(page)}, python block {number}", "exec")


def reference():
    """docs/hooks/reference.py, the mkdocs hook that generates parts of two pages."""
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["cli.md", "file-formats.md"])
def test_the_generated_parts_are_what_the_code_gives(name):
    hook = reference()
    page = (DOCS / name).read_text(encoding="utf-8")
    assert hook.with_generated(page, hook.GENERATED[name]()) == page, (
        f"docs/{name} is stale: run `python docs/hooks/reference.py` and commit the page"
    )


def test_the_cli_reference_has_every_command():
    """Every subcommand, however deep, has its section (with its usage) in the CLI reference."""
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    progs, parsers = [], [build_parser()]
    while parsers:
        parser = parsers.pop()
        progs.append(parser.prog)
        for action in parser._actions:  # a subcommands' action: its choices are parsers
            if isinstance(action.choices, dict):
                parsers.extend(action.choices.values())
    assert len(progs) > 10
    for prog in progs:
        assert re.search(rf"^#+ `{re.escape(prog)}`$", page, re.M), f"no section for {prog}"
        assert f"usage: {prog} " in page, f"no usage line for {prog}"


def test_links_outside_the_docs_point_at_the_repository():
    hook = reference()
    page = "[a](../tasks/judges/small.yaml) [b](data.md#x) [c](../README.md#top) [d](https://e)"
    assert hook._outside_links(page, "index.md", "https://github.com/o/r") == (
        "[a](https://github.com/o/r/blob/main/tasks/judges/small.yaml) [b](data.md#x) "
        "[c](https://github.com/o/r/blob/main/README.md#top) [d](https://e)"
    )


def test_the_label_studio_people_are_told_to_start_is_the_one_the_tests_run():
    """docs/people.md's install and start lines: the version the tests install, and every
    option the tests start it with (the values are the reader's own)."""
    from support import label_studio

    text = (DOCS / "people.md").read_text(encoding="utf-8")
    assert f"pip install label-studio=={label_studio.VERSION}" in text
    start = text.split("label-studio start", 1)[1].split("```", 1)[0]
    shown = {word for word in start.split() if word.startswith("--")}
    tested = {str(w) for w in label_studio.start_command(REPO, 8080) if str(w).startswith("--")}
    assert shown == tested
    for setting in ("LABEL_STUDIO_LATEST_VERSION_CHECK=false", "LABEL_STUDIO_COLLECT_ANALYTICS"):
        assert setting in text  # no calls home, as the tests start it


def test_the_readme_s_picture_shows_every_tab_of_the_report():
    """docs/pictures.py writes the report's tabs into the picture: it must be of a report with
    every tab the quickstart's run can have (a run with triples and a cost table; not the
    Downstream tab, which needs a downstream task's questions, not bundled)."""
    import sys

    sys.path.insert(0, str(DOCS))
    import pictures

    template = (REPO / "finreflect_eval" / "view" / "templates" / "report.html.jinja").read_text()
    nav = template.split('<nav class="tabs"', 1)[1].split("</nav>", 1)[0]
    every = re.findall(r'data-view="\w+">([^<]+)</a>', nav)
    assert len(every) == 7, every
    shown = [tab for tab in every if tab != "Downstream"]
    assert pictures.text_of(pictures.PICTURE.read_bytes(), pictures.TABS_KEY) == ", ".join(shown)
    assert f"({len(shown)} tabs" in README.read_text(encoding="utf-8")  # the caption says so


def test_the_quickstart_s_time_is_one_figure_that_its_benchmark_reads():
    """`benchmarks/quickstart.py` times the README's command and fails when the README's figure
    drifts by more than 25%: it must find the command and the figure, and the getting-started
    page must state the same figure."""
    spec = importlib.util.spec_from_file_location("quickstart", REPO / "benchmarks/quickstart.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    readme = (REPO / "README.md").read_text()
    command = benchmark.readme_command(readme)
    assert command.startswith("python3 -m venv .venv") and "--judges demo" in command
    assert command in (REPO / "docs/getting-started.md").read_text()
    stated = benchmark.stated_seconds(readme)
    started = benchmark.STATED.search((REPO / "docs/getting-started.md").read_text())
    assert started is not None and int(started.group(2)) == stated
