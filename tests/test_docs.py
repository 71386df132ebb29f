"""The README is a front door and the docs cannot rot: the README stays short, every relative link
of the README and of docs/ reaches a file, and every `finreflect-eval` command they show parses
with the real command line (the ones the tests run are run elsewhere: test_quickstart,
test_models_vllm)."""

import re
import shlex

import pytest
from conftest import REPO

from finreflect_eval.cli.parser import build_parser

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)")


def test_the_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    first_screens = "\n".join(lines[:120])
    for shown in ("## Quickstart", "## Benchmark a model on one GPU", "--check", "HF_TOKEN"):
        assert shown in first_screens
    assert "## Your own filings" in "\n".join(lines[:160])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_reaches_a_file(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{page.name}: {target}"


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


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_shown_parses(page):
    parser = build_parser()
    for command in commands(page):
        try:
            parser.parse_args(shlex.split(command))
        except SystemExit:
            pytest.fail(f"{page.name}: `finreflect-eval {command}` does not parse")
