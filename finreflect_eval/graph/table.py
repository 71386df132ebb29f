"""The triples a graph is built from: one Arrow table, a row per extracted (or reference)
triple, with where it came from.

Columns (`TRIPLE_COLUMNS`): `task` (the mode's task), `span_id`, `filing` (`<ticker>_<fiscal
year>`, the unit the graph is built per), `ticker` and `company` (the filer, from the span's
metadata; `company` may be null), `triple_index` (its place in the span's triples), and the
triple's five strings. Other columns may follow (an export carries the panel's verdicts as
`verdict:<criterion>`); readers ignore what they do not know.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

TRIPLE_FIELDS = ("subject", "subject_type", "relation", "object", "object_type")
TRIPLE_COLUMNS = {
    "task": pa.string(),
    "span_id": pa.string(),
    "filing": pa.string(),
    "ticker": pa.string(),
    "company": pa.string(),
    "triple_index": pa.int32(),
    **{name: pa.string() for name in TRIPLE_FIELDS},
}


def triple_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """A `TripleTable` from dict rows with (at least) `TRIPLE_COLUMNS`' keys."""
    columns: dict[str, list] = {name: [] for name in TRIPLE_COLUMNS}
    for row in rows:
        for name in TRIPLE_COLUMNS:
            columns[name].append(row.get(name))
    return pa.table(
        {name: pa.array(values, TRIPLE_COLUMNS[name]) for name, values in columns.items()}
    )
