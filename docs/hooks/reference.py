"""The generated parts of two pages, so that they cannot drift from the code: the CLI reference
(docs/cli.md) from the real parser, `finreflect_eval.cli.parser.build_parser()`, and the fields
of every file a run writes (docs/file-formats.md) from the pydantic models of
`finreflect_eval.records`, with their docstrings.

Each of the two pages is prose down to `MARKER` and generated below it. As an mkdocs hook
(mkdocs.yml, `hooks:`) this module regenerates that part whenever the site is built; the copy in
the repository reads on GitHub, and tests/test_docs.py checks that it equals what this module
makes now. After changing the parser or a record, rewrite the copies:

    python docs/hooks/reference.py

The hook also points links to files outside docs/ (`../tasks/judges/small.yaml`) at the
repository on GitHub: they work from the folder and on GitHub as they are, but are not pages of
the site.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import posixpath
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
MARKER = "<!-- Generated below by docs/hooks/reference.py: edit the text above this line only. -->"
USAGE_WIDTH = "100"  # argparse wraps usage at $COLUMNS: fixed, so the page is the same anywhere


# -- the CLI reference -------------------------------------------------------------------------


def cli_reference() -> str:
    """Every command of `finreflect-eval`, subcommands within commands, each with its usage and
    a table of its arguments, as the real parser defines them."""
    from finreflect_eval.cli.parser import build_parser

    parser = build_parser()
    with _plain_terminal():
        sections = list(_command_sections(parser, help_text=parser.description or "", depth=1))
    return "\n".join(sections)


def _command_sections(parser: argparse.ArgumentParser, help_text: str, depth: int) -> Iterator[str]:
    # argparse has no public listing of a parser's arguments: `_actions` (and the subcommands'
    # `_choices_actions`) are the attributes every argparse documenter reads.
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    heading = "#" * min(depth + 1, 4)
    yield f"{heading} `{parser.prog}`\n"
    if help_text:
        yield f"{_text(help_text)}\n"
    yield f"```text\n{parser.format_usage().strip()}\n```\n"
    subcommands = [a for a in actions if isinstance(a, argparse._SubParsersAction)]
    arguments = [a for a in actions if a not in subcommands and a.help != argparse.SUPPRESS]
    if subcommands:
        yield "| command | what it does |\n|---|---|"
        for action in subcommands:
            for choice in action._choices_actions:
                yield f"| `{choice.dest}` | {_text(choice.help or '')} |"
        yield ""
    if arguments:
        yield "| argument | value | default | what it does |\n|---|---|---|---|"
        yield from (_argument_row(action) for action in arguments)
        yield ""
    if parser.epilog:
        yield f"{_text(parser.epilog)}\n"
    for action in subcommands:
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, subparser in action.choices.items():
            yield from _command_sections(subparser, helps.get(name, ""), depth + 1)


def _argument_row(action: argparse.Action) -> str:
    names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.dest}`"
    if action.required and action.option_strings:
        names += " (required)"
    return f"| {names} | {_value(action)} | {_default(action)} | {_text(action.help or '')} |"


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:  # a switch
        return ""
    if action.choices is not None and not isinstance(action.choices, dict):
        shown = " \\| ".join(f"`{choice}`" for choice in action.choices)
    else:  # argparse's own: the metavar, else the dest (upper case for an option)
        metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
        shown = f"`{_cell(str(metavar))}`"
    return {
        "?": f"[{shown}]",
        "*": f"{shown} …",
        "+": f"{shown} …",
        argparse.REMAINDER: f"{shown} …",
    }.get(action.nargs, shown)


def _default(action: argparse.Action) -> str:
    default = action.default
    if default is None or default is argparse.SUPPRESS or default == [] or action.nargs == 0:
        return ""
    if isinstance(default, list):
        default = ",".join(map(str, default))
    return f"`{_cell(str(default))}`"


@contextmanager
def _plain_terminal() -> Iterator[None]:
    """argparse's usage wrapped at a fixed width, without colour (Python 3.14 colours help)."""
    fixed = {"COLUMNS": USAGE_WIDTH, "NO_COLOR": "1", "PYTHON_COLORS": "0"}
    saved = {name: os.environ.get(name) for name in fixed}
    os.environ.update(fixed)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# -- the file formats --------------------------------------------------------------------------

# The files a run (and `audit-judges`, and the leaderboard) writes, in the order a run writes them.
FILES = (
    ("Manifest", "manifest_<run>.json"),
    ("SampleRecord", "samples_<task>_<run>.jsonl, one line per span"),
    ("Results", "results_<run>_<panel>.json"),
    ("ReviewItem", "review_<task>_<run>_<panel>.jsonl, one line per item"),
    ("ReviewSpan", "review_spans_<task>_<run>_<panel>.jsonl, one line per span"),
    ("DownstreamFile", "downstream_<task>_<run>_<panel>.json"),
    ("JudgeAudit", "judge_audit_<date>.json"),
    ("Submission", "leaderboard/submissions/<org__model>/<run>.json"),
)
NAMES = ("RunId", "PlainName", "SamplesName")  # records.base: patterns of names read from files


def records_reference() -> str:
    """Each file's model and the models it is made of, a table of fields each: name (as written
    in the file), type, default and the field's docstring."""
    from pydantic import BaseModel

    from finreflect_eval import records
    from finreflect_eval.records import base

    shown: set[type] = set()
    out = [
        "## Fields\n",
        "Every model refuses unknown fields. A type in the tables links to its model; `null` is "
        "JSON's null (Python's None). The models are `finreflect_eval.records.<Name>`.\n",
    ]
    for name, written_as in FILES:
        model = getattr(records, name)
        parts = [m for m in _parts(model, BaseModel) if m not in shown and m is not model]
        shown.update([model, *parts])
        out.append(f"### {name}\n")
        out.append(f"Written as `{written_as}`.\n")
        out.extend(_model_section(model, BaseModel))
        for part in parts:
            out.append(f"#### {part.__name__}\n")
            out.extend(_model_section(part, BaseModel))
    out.append("### Names\n")
    out.append(
        "Names read from run files that become parts of file names are checked against a "
        "pattern where they are read (a run folder is input: someone else may hand it "
        "over).\n"
    )
    out.append("| name | pattern | what |\n|---|---|---|")
    docs = _alias_docstrings(base)
    for name in NAMES:
        pattern = _pattern(getattr(base, name))
        out.append(f"| `{name}` | `{_cell(pattern)}` | {_text(docs.get(name, ''))} |")
    out.append("")
    return "\n".join(out)


def _model_section(model: type, base_model: type) -> list[str]:
    lines = []
    if model.__doc__:
        lines.append(f"{_prose(inspect.cleandoc(model.__doc__))}\n")
    lines.append("| field | type | default | what it holds |\n|---|---|---|---|")
    for name, field in model.model_fields.items():
        if field.exclude:  # never written
            continue
        key = field.alias or name
        kind = _type(field.annotation, base_model, field.metadata)
        default = "required" if field.is_required() else _field_default(field, base_model)
        lines.append(f"| `{key}` | {kind} | {default} | {_text(field.description or '')} |")
    lines.append("")
    return lines


def _parts(model: type, base_model: type) -> list[type]:
    """The models `model` is made of, depth first, each once, in field order."""
    found: list[type] = []

    def visit(annotation: object) -> None:
        if isinstance(annotation, type) and issubclass(annotation, base_model):
            if annotation not in found and annotation is not model:
                found.append(annotation)
                for field in annotation.model_fields.values():
                    visit(field.annotation)
            return
        for argument in typing.get_args(annotation):
            visit(argument)

    for field in model.model_fields.values():
        visit(field.annotation)
    return found


def _type(annotation: object, base_model: type, metadata: list | None = None) -> str:
    from finreflect_eval.records import base

    if metadata:  # a top-level field: pydantic keeps `Annotated`'s metadata apart
        for name in NAMES:
            if typing.Annotated[(annotation, *metadata)] == getattr(base, name):
                return f"[`{name}`](#names)"
    for name in NAMES:
        if annotation == getattr(base, name):
            return f"[`{name}`](#names)"
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if annotation is typing.Any:
        return "any"
    if origin is typing.Annotated:
        return _type(arguments[0], base_model)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type(argument, base_model) for argument in arguments)
    if origin is typing.Literal:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in arguments)
    if origin is not None:
        inner = ", ".join(_type(argument, base_model) for argument in arguments)
        return f"{getattr(origin, '__name__', str(origin))}\\[{inner}\\]"
    if isinstance(annotation, type) and issubclass(annotation, base_model):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    if isinstance(annotation, type):
        return annotation.__name__
    return _cell(str(annotation))


def _field_default(field, base_model: type) -> str:
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, base_model):
        return "its defaults"
    return f"`{_cell(json.dumps(value, ensure_ascii=False))}`"


def _alias_docstrings(module: types.ModuleType) -> dict[str, str]:
    """The string under each `Name = ...` of a module (how its type aliases are documented)."""
    tree = ast.parse(inspect.getsource(module))
    found = {}
    for node, after in zip(tree.body, tree.body[1:], strict=False):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[node.targets[0].id] = inspect.cleandoc(after.value.value)
    return found


def _pattern(alias: object) -> str:
    for item in typing.get_args(alias)[1:]:
        if getattr(item, "pattern", None):
            return item.pattern
    return ""


# -- Markdown ----------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text for a table cell: one line, no column break."""
    return " ".join(text.split()).replace("|", "\\|")


def _text(text: str) -> str:
    """Prose for a table cell or paragraph: code spans kept, `<` and `*` outside them escaped (a
    help text says `RUN/report-vs-<B's run id>` and `results_*.json`)."""
    parts = _cell(text).split("`")
    for index in range(0, len(parts), 2):  # outside code spans
        parts[index] = parts[index].replace("<", "&lt;").replace("*", "\\*")
    return "`".join(parts)


def _prose(text: str) -> str:
    """A docstring as Markdown paragraphs (its line breaks are only wrapping)."""
    return "\n\n".join(_text(paragraph) for paragraph in text.split("\n\n"))


# -- the pages, and the mkdocs hook ------------------------------------------------------------

GENERATED: dict[str, Callable[[], str]] = {
    "cli.md": cli_reference,
    "file-formats.md": records_reference,
}


def with_generated(page: str, generated: str) -> str:
    """The page's prose, down to its marker line, then `generated`."""
    prose, marker, _ = page.partition(MARKER)
    if not marker:
        raise ValueError(f"the page has no line {MARKER!r}")
    return f"{prose}{MARKER}\n\n{generated.rstrip()}\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    make = GENERATED.get(page.file.src_uri)
    if make is not None:
        markdown = with_generated(markdown, make())
    return _outside_links(markdown, page.file.src_uri, config.get("repo_url"))


LINK = re.compile(r"(\]\()(?!https?://|#|mailto:)([^)\s#]+)(#[^)\s]*)?(\))")


def _outside_links(markdown: str, src_uri: str, repo_url: str | None) -> str:
    """Links from a page to a file of the repository outside docs/, as links to it on GitHub."""
    if not repo_url:
        return markdown

    def rewrite(match: re.Match) -> str:
        opening, target, anchor, closing = match.groups()
        path = posixpath.normpath(posixpath.join("docs", posixpath.dirname(src_uri), target))
        if path == "docs" or path.startswith("docs/") or path.startswith(".."):
            return match.group(0)
        kind = "tree" if (DOCS.parent / path).is_dir() else "blob"
        return f"{opening}{repo_url.rstrip('/')}/{kind}/main/{path}{anchor or ''}{closing}"

    return LINK.sub(rewrite, markdown)


def main() -> int:
    """Rewrite the generated part of each page in docs/."""
    for name, make in GENERATED.items():
        path = DOCS / name
        page = path.read_text(encoding="utf-8")
        new = with_generated(page, make())
        if new != page:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
