"""`dataset info`: counts per config, split, company and section, as Markdown tables."""

from __future__ import annotations

from collections import Counter

from finreflect_eval.data._records import Benchmark
from finreflect_eval.data._slice import span_list


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def describe(benchmarks: list[Benchmark]) -> str:
    """A Markdown report of one dataset's splits."""
    first = benchmarks[0]
    parts = [
        f"## Dataset `{first.dataset}`"
        + (f" (revision {first.revision})" if first.revision else ""),
        markdown_table(
            ["split", "spans", "table spans", "reference_triples", "judgments", "fingerprint"],
            [
                [
                    b.split,
                    len(b.spans),
                    sum(span.content_type == "table" for span in b.spans),
                    len(b.reference_triples),
                    len(b.judgments),
                    b.fingerprint,
                ]
                for b in benchmarks
            ],
        ),
    ]
    for b in benchmarks:
        triples = Counter(t.span_id for t in b.reference_triples)
        companies: dict[str, list[int]] = {}
        sections: dict[str, list[int]] = {}
        for span in b.spans:
            for table, key in ((companies, span.ticker), (sections, span.section or "(none)")):
                counts = table.setdefault(key, [0, 0, 0])
                counts[0] += 1
                counts[1] += span.content_type == "table"
                counts[2] += triples[span.span_id]
        parts.append(f"### Split `{b.split}`: per company")
        parts.append(
            markdown_table(
                ["ticker", "spans", "table spans", "reference triples"],
                [[key, *counts] for key, counts in sorted(companies.items())],
            )
        )
        parts.append(f"### Split `{b.split}`: per section")
        parts.append(
            markdown_table(
                ["section", "spans", "table spans", "reference triples"],
                [[key, *counts] for key, counts in sorted(sections.items(), key=_section_order)],
            )
        )
        if b.judgments:
            labels = Counter((j.criterion, j.label) for j in b.judgments)
            flaws = Counter(
                flaw
                for _, _, flaw in {(j.span_id, j.triple_id, j.flaw) for j in b.judgments if j.flaw}
            )
            parts.append(f"### Split `{b.split}`: judgments")
            parts.append(
                markdown_table(
                    ["criterion", "label", "count"],
                    [[c, label, n] for (c, label), n in sorted(labels.items())],
                )
            )
            if flaws:
                parts.append(
                    "Flawed candidate triples: "
                    + ", ".join(f"{flaw} {n}" for flaw, n in sorted(flaws.items()))
                )
    return "\n\n".join(parts) + "\n"


def describe_slice(whole: Benchmark, sliced: Benchmark) -> str:
    """The slice's counts: spans kept of the split's, companies, strata and its fingerprint
    (what `leaderboard/datasets.json` records for an official dataset)."""
    spec = sliced.slice
    strata = {(span.ticker, span.section) for span in whole.spans}
    rows = [
        ["spans", len(sliced.spans), len(whole.spans)],
        ["companies", len({s.ticker for s in sliced.spans}), len({s.ticker for s in whole.spans})],
        [
            "strata (company, section)",
            len({(s.ticker, s.section) for s in sliced.spans}),
            len(strata),
        ],
    ]
    return (
        f"## Slice `{spec.name}` of split `{sliced.split}` ({spec.per_stratum} per stratum, "
        f"salt `{spec.salt}`)\n\n"
        + markdown_table(["", "in the slice", "in the split"], rows)
        + f"\n\nfingerprint {sliced.fingerprint}, span list sha256 "
        + f"{span_list([s.span_id for s in sliced.spans])['sha256']}\n"
    )


def _section_order(item: tuple[str, list[int]]) -> tuple[int, str]:
    """Item 1, 1A, 2, …, 9A, 10: numeric order of the Item number, then the letter."""
    name = item[0]
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else -1, name)
