"""`graph export`: a run's triples as a knowledge graph other tools read."""

from __future__ import annotations

import argparse
from pathlib import Path

from finreflect_eval.cli.subcommands import Commands


def add_graph(commands: Commands) -> None:
    """`graph export`."""
    graph = commands.add_parser("graph", help="the knowledge graph a run's triples make")
    actions = Commands(graph.add_subparsers(dest="graph_command", required=True, metavar="ACTION"))
    export = actions.add_parser(
        "export",
        help="nodes and edges (each edge with its span, filing, mode and the panel's verdicts) "
        "as GraphML, JSONL, Parquet or Neo4j CSV",
    )
    export.add_argument("run", type=Path, metavar="RUN", help="a run folder or manifest_*.json")
    export.add_argument(
        "--format",
        required=True,
        choices=("graphml", "jsonl", "parquet", "neo4j-csv"),
        help="neo4j-csv: files for `neo4j-admin database import` (--multiline-fields=true)",
    )
    export.add_argument("--output", "-o", type=Path, metavar="DIR", help="default: RUN/graph")
    export.add_argument(
        "--judges",
        help="the panel whose verdicts to add, by name or its file (default: the latest)",
    )
    export.set_defaults(func=export_command)


def export_command(args: argparse.Namespace) -> None:
    import pyarrow as pa

    from finreflect_eval.graph.export import write_graph
    from finreflect_eval.pipeline.judging import panel_choice
    from finreflect_eval.runs.store import load_run
    from finreflect_eval.scoring.compute import choose_panel, facts_from_records, score_tables
    from finreflect_eval.scoring.graph import triple_table, verdict_columns

    run = load_run(args.run, for_scoring=True)
    if run.manifest.judging:
        panel = choose_panel(run.manifest, panel_choice(args.judges))
        facts, votes = score_tables(
            run.manifest, run.records, panel, run.span_facts, run.votes.get(panel)
        )
        tables = [verdict_columns(triple_table(t, facts[t]), facts[t], votes[t]) for t in facts]
    else:  # extracted, not judged: the graph without verdicts
        facts = facts_from_records(run.records) | run.span_facts
        tables = [triple_table(task, task_facts) for task, task_facts in facts.items()]
    table = pa.concat_tables(tables, promote_options="default")
    home = args.run if args.run.is_dir() else args.run.parent
    for path in write_graph(table, args.output or home / "graph", args.format):
        print(f"wrote {path}")
