"""One panel's votes on one task as columns: what scoring reads.

In the samples, every vote sits inside its span's record, beside the judges' raw outputs: at the
benchmark's size (half a million triples) that is gigabytes of JSON, too slow to parse for every
`score`. The same votes as an Arrow table are read in a moment. One row per item (a triple on a
criterion, or a span on comprehensiveness), in the records' order, then the criteria's as judged,
then the triples'; per judge its vote: a label code (`metrics.vote_code`), the reasoning, the
warning, and whether a rule gave it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from finreflect_eval._util.tables import arrow_bytes, read_arrow
from finreflect_eval.protocol.criteria import CRITERION_NAMES
from finreflect_eval.records import SampleRecord, Vote
from finreflect_eval.stats import metrics

VOTE_FIELDS = ("code", "reasoning", "warning", "synthetic")  # the columns of each judge


@dataclass
class VoteTable:
    """The items of one task judged by one panel (see the module's docstring)."""

    table: pa.Table
    judges: list[str]

    @classmethod
    def from_records(
        cls, records: Sequence[SampleRecord], panel: str, judges: Sequence[str]
    ) -> VoteTable:
        columns: dict[str, list] = {"doc_id": [], "criterion": [], "index": [], "synthetic": []}
        for judge in judges:
            for key in VOTE_FIELDS:
                columns[f"{key}:{judge}"] = []
        for record in records:
            for criterion, by_judge in record.votes.get(panel, {}).items():
                n_items = max((len(by_judge.get(j, [])) for j in judges), default=0)
                for index in range(n_items):
                    cast = [_vote_at(by_judge.get(judge, []), index) for judge in judges]
                    columns["doc_id"].append(record.doc_id)
                    columns["criterion"].append(CRITERION_NAMES.index(criterion))
                    columns["index"].append(index)
                    columns["synthetic"].append(all(v is not None and v.synthetic for v in cast))
                    for judge, vote in zip(judges, cast, strict=True):
                        columns[f"code:{judge}"].append(metrics.vote_code(vote and vote.verdict))
                        columns[f"reasoning:{judge}"].append(vote.reasoning if vote else "")
                        columns[f"warning:{judge}"].append(vote.warning if vote else "")
                        columns[f"synthetic:{judge}"].append(bool(vote and vote.synthetic))
        # Every column typed, so that a task without items has the same columns as any other.
        kinds = {
            "doc_id": pa.int64(),
            "criterion": pa.int8(),
            "index": pa.int32(),
            "synthetic": pa.bool_(),
            "code": pa.int8(),
            "reasoning": pa.string(),
            "warning": pa.string(),
        }
        types = {name: kinds[name.split(":")[0]] for name in columns}
        arrays = {name: pa.array(values, types[name]) for name, values in columns.items()}
        return cls(pa.table(arrays), list(judges))

    @classmethod
    def read(cls, path: Path, judges: Sequence[str]) -> VoteTable:
        """The table of a file, which must hold the votes of `judges`."""
        expected = ["doc_id", "criterion", "index", "synthetic"]
        expected += [f"{key}:{judge}" for judge in judges for key in VOTE_FIELDS]
        table = read_arrow(path, "vote table", expected, f"judges {', '.join(judges)}")
        return cls(table, list(judges))

    def to_bytes(self) -> bytes:
        return arrow_bytes(self.table)

    # columns as numpy

    def column(self, name: str) -> np.ndarray:
        return self.table.column(name).to_numpy()

    def codes(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Label codes, items × judges."""
        columns = [self.column(f"code:{judge}") for judge in self.judges]
        codes = np.stack(columns, axis=1) if columns else np.empty((self.table.num_rows, 0))
        return codes.astype(np.int8) if rows is None else codes[rows].astype(np.int8)

    def criteria(self) -> np.ndarray:
        return self.column("criterion")


def _vote_at(votes: list[Vote], index: int) -> Vote | None:
    return votes[index] if index < len(votes) else None
