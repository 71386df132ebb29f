"""Tables: Markdown, as the commands print them (like lm-eval's summary table), and Arrow IPC
files, as the score index keeps its columns."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from finreflect_eval._util.errors import FinReflectError, first_line

# CommonMark's backslash escapes that every renderer (python-markdown included) reads as such.
_MARKDOWN_SIGNS = re.compile(r"([\\`*_{}\[\]()#+\-.!])")
# As entities: HTML's signs, and those of GFM's autolinks, strikethrough, tables and the Hub's
# maths, which python-markdown would show with their backslash.
_ENTITIES = str.maketrans({sign: f"&#{ord(sign)};" for sign in "&<>:@~|$"})


def markdown_text(value: object) -> str:
    """A value as literal Markdown text on one line: each sign a renderer would read as markup
    escaped or written as its entity, line breaks as spaces (a run's names are untrusted)."""
    text = _MARKDOWN_SIGNS.sub(r"\\\1", " ".join(str(value).split()))
    return text.translate(_ENTITIES)  # after: an entity's own signs stay as they are


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def read_arrow(path: Path, kind: str, columns: list[str], of_what: str) -> pa.Table:
    """The `columns` of a score-index file, which must have them all (a table written for more
    panels than its run's manifest names, by a save killed before the manifest, still serves);
    else a one-line error naming the file as not the `kind` of `of_what`."""
    try:
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowException) as exc:
        raise FinReflectError(f"{path}: not a {kind} ({first_line(exc)})") from exc
    if not set(columns) <= set(table.column_names):
        raise FinReflectError(
            f"{path}: not the {kind} of {of_what} (delete {path.parent} to score from the samples)"
        )
    return table.select(columns)


def arrow_bytes(table: pa.Table) -> bytes:
    """The table as an Arrow IPC file."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as out:
        out.write_table(table)
    return sink.getvalue().to_pybytes()
