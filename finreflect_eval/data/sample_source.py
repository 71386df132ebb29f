"""Build the bundled sample dataset from its hand-written sources.

The sample's spans, reference triples and gold labels are written by us in
`finreflect_eval/sample/source/<TICKER>.yaml` (one file per company). After editing them, run
`python -m finreflect_eval.data.sample_source` to regenerate the parquet files and the card.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval._util.resources import load_yaml, sample_dir
from finreflect_eval.chunking import token_counter
from finreflect_eval.data._build import section_slug, write_dataset_folder
from finreflect_eval.data._records import (
    Judgment,
    ReferenceTriple,
    Span,
)
from finreflect_eval.protocol.criteria import TRIPLE_CRITERIA
from finreflect_eval.protocol.schema import Triple, check_triple, load_schema

AUTHORS = "finreflect-eval authors"
TripleTuple = tuple[str, str, str, str, str]


class _Labels(BaseModel):
    model_config = ConfigDict(extra="forbid")

    faithfulness: Literal[0, 1]
    precision: Literal[0, 1]
    relevance: Literal[0, 1]


class _Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    triple: TripleTuple
    labels: _Labels
    flaw: str | None = None


class _SourceSpan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    split: Literal["test", "dev"]
    section: str
    content_type: Literal["text", "table"]
    page_id: str
    text: str = Field(min_length=1)
    reference_triples: list[TripleTuple] = Field(min_length=1)
    comprehensiveness: Literal["good", "partial", "poor"] | None = None
    candidates: list[_Candidate] = []


class _SourceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ticker: str
    company: str
    fiscal_year: int
    spans: list[_SourceSpan]


def read_sample_source(source_dir: str | Path) -> dict[str, dict[str, list]]:
    """Records per config and split, spans interleaved across companies so that the first N
    spans of a split (`--limit N`) cover several companies."""
    files = [_read(path) for path in sorted(Path(source_dir).glob("*.yaml"))]
    if not files:
        raise FinReflectError(f"no sample source files in {source_dir}")
    tables: dict[str, dict[str, list]] = {"spans": {}, "reference_triples": {}, "judgments": {}}
    for split in ("test", "dev"):
        per_company = [[(f, s) for s in f.spans if s.split == split] for f in files]
        for entry in itertools.chain.from_iterable(itertools.zip_longest(*per_company)):
            if entry is not None:
                _add(tables, split, *entry)
    return tables


def _read(path: Path) -> _SourceFile:
    try:  # load_yaml: a key given twice is an error, as in every YAML file we read
        source = _SourceFile.model_validate(load_yaml(path, "sample source"))
    except ValidationError as exc:
        raise FinReflectError(f"{path}: {exc}") from exc
    schema = load_schema()
    for span in source.spans:
        where = f"{path.name} span {span.key}"
        if span.split == "test" and span.comprehensiveness is None:
            raise FinReflectError(f"{where}: a test span needs a comprehensiveness label")
        for values in span.reference_triples:
            failed = [
                rule
                for rule, ok in check_triple(Triple.from_tuple(values), schema).items()
                if not ok
            ]
            if failed:
                raise FinReflectError(f"{where}: reference triple {list(values)} fails {failed}")
    return source


def _add(tables: dict, split: str, source: _SourceFile, span: _SourceSpan) -> None:
    count_tokens = token_counter()
    span_id = f"{source.ticker}_{source.fiscal_year}_{span.key}"
    if not span.key.startswith(section_slug(span.section) + "_"):
        raise FinReflectError(f"{source.ticker} span {span.key}: key must start with its section")
    text = span.text.strip()
    tables["spans"].setdefault(split, []).append(
        Span(
            span_id=span_id,
            ticker=source.ticker,
            company=source.company,
            fiscal_year=source.fiscal_year,
            source_file=f"source/{source.ticker}.yaml",
            section=span.section,
            page_id=span.page_id,
            chunk_index=int(span.key.rsplit("_", 1)[1]),
            content_type=span.content_type,
            text=text,
            n_tokens=count_tokens(text),
            sha256=text_sha256(text),
        )
    )
    reference_ids: dict[TripleTuple, str] = {}
    references = tables["reference_triples"].setdefault(split, [])
    for number, values in enumerate(span.reference_triples, start=1):
        triple_id = f"{span_id}_r{number:02d}"
        reference_ids.setdefault(values, triple_id)
        references.append(
            ReferenceTriple(
                span_id=span_id,
                triple_id=triple_id,
                source=AUTHORS,
                **Triple.from_tuple(values).model_dump(),
            )
        )
    judgments = tables["judgments"].setdefault(split, [])
    if span.comprehensiveness:
        judgments.append(
            Judgment(
                span_id=span_id,
                triple_id="",
                criterion="comprehensiveness",
                label=span.comprehensiveness,
                annotator=AUTHORS,
            )
        )
    for number, candidate in enumerate(span.candidates, start=1):
        triple_id = reference_ids.get(candidate.triple, f"{span_id}_c{number:02d}")
        for criterion in TRIPLE_CRITERIA:
            judgments.append(
                Judgment(
                    span_id=span_id,
                    triple_id=triple_id,
                    criterion=criterion,
                    label=str(getattr(candidate.labels, criterion)),
                    annotator=AUTHORS,
                    flaw=candidate.flaw or "",
                    **Triple.from_tuple(candidate.triple).model_dump(),
                )
            )


def sample_card() -> dict[str, str]:
    """What the sample's dataset card says of it (its text is ours: CC BY 4.0)."""
    return {
        "about": (sample_dir() / "source" / "ABOUT.md").read_text(encoding="utf-8"),
        "pretty_name": "finreflect-eval bundled sample",
        "license": "cc-by-4.0",
    }


def main() -> None:
    folder = sample_dir()
    tables = read_sample_source(folder / "source")
    write_dataset_folder(folder, tables, **sample_card())
    counts = {config: sum(map(len, splits.values())) for config, splits in tables.items()}
    print(f"wrote {folder}: {counts}")


if __name__ == "__main__":
    main()
