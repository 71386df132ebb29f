"""What the downstream track's deterministic part costs at scale: a synthetic task graph (filings
of 40 spans x 40 triples, every filer a hub of its filing's triples) and questions over it, each
measured as the stage and `score` measure it (`downstream.graph.measure`: evidence, path, the
retrieved subgraph). Prints one Markdown table; the full MultiHop set is 15,600 questions.

    python benchmarks/downstream.py [--filings 60] [--questions 1000]

Run it on an older checkout (`PYTHONPATH=<worktree>`) for the before figure: `farm-bench --vs`.
"""

from __future__ import annotations

import argparse
import random
import time

from finreflect_eval._util.tables import markdown_table
from finreflect_eval.chunking import token_counter
from finreflect_eval.downstream.graph import ModelGraph, measure
from finreflect_eval.graph.table import triple_table
from finreflect_eval.records.downstream import GoldHop, QASettings, Question

SPANS, TRIPLES = 40, 40


def synthetic(filings: int, seed: int = 7) -> tuple[ModelGraph, list[tuple]]:
    """The graph, and its triples as (span_id, ticker, subject, relation, object)."""
    rng = random.Random(seed)
    rows, triples = [], []
    for f in range(filings):
        ticker = f"T{f:03d}"
        for s in range(SPANS):
            span = f"{ticker}_2024_page_{s}_chunk_1"
            for t in range(TRIPLES):
                subject = ticker if t % 3 == 0 else f"metric {rng.randrange(400)} of {ticker}"
                obj = f"item {rng.randrange(4000)}"
                row = (span, ticker, subject, "Discloses", obj)
                triples.append(row)
                rows.append(
                    {
                        "task": "t",
                        "span_id": span,
                        "filing": f"{ticker}_2024",
                        "ticker": ticker,
                        "company": None,
                        "triple_index": t,
                        "subject": subject,
                        "subject_type": "ORG",
                        "relation": "Discloses",
                        "object": obj,
                        "object_type": "FIN_METRIC",
                    }
                )
    return ModelGraph(triple_table(rows)), triples


def questions(triples: list[tuple], n: int, seed: int = 11) -> list[Question]:
    """2-hop questions over two filings' triples that meet (or not) at an object."""
    rng = random.Random(seed)
    made = []
    for number in range(n):
        first, second = rng.choice(triples), rng.choice(triples)
        hops = [
            GoldHop(
                span_id=span,
                filing=f"{ticker}_2024",
                ticker=ticker,
                head=head,
                relation=relation,
                tail=tail,
            )
            for span, ticker, head, relation, tail in (first, second)
        ]
        made.append(
            Question(
                question_id=f"q{number}",
                question=f"How do {first[1]} and {second[1]} report {first[4]}?",
                answer="-",
                kind="qualitative",
                start=first[1],
                end=second[1],
                hops=hops,
            )
        )
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filings", type=int, default=60)
    parser.add_argument("--questions", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    graph, triples = synthetic(args.filings)
    built = time.perf_counter() - started
    settings = QASettings(
        name="b",
        model="b",
        backend="scripted",
        prompt_sha="0" * 64,
        budget_tokens=1024,
        neighbourhood_hops=2,
    )
    asked = questions(triples, args.questions)
    count = token_counter()
    started = time.perf_counter()
    records = [measure(q, "t", graph, 3, settings, count) for q in asked]
    seconds = time.perf_counter() - started
    shown = sum(len(r.subgraph) for r in records) / len(records)
    rows = [
        [
            len(triples),
            args.questions,
            f"{built:.2f}",
            f"{seconds:.2f}",
            f"{1000 * seconds / len(records):.1f}",
            f"{15600 * seconds / len(records) / 60:.1f}",
            f"{shown:.1f}",
        ]
    ]
    header = [
        "triples",
        "questions",
        "graph s",
        "measure s",
        "ms/question",
        "15,600 questions (min)",
        "triples shown",
    ]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
