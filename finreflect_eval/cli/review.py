"""`review export`, `review import` and `review plan`: people check the judges (Label Studio)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.redaction import redact_url
from finreflect_eval.cli.options import positive_int
from finreflect_eval.cli.subcommands import Commands


def add_review(commands: Commands) -> None:
    """`review export`, `review import`, `review plan`."""
    review = commands.add_parser(
        "review", help="people check the judges: Label Studio export and import, how many labels"
    )
    actions = Commands(
        review.add_subparsers(dest="review_command", required=True, metavar="ACTION")
    )
    _add_export(actions)
    _add_import_and_plan(actions)


def _add_export(actions: Commands) -> None:
    export = actions.add_parser(
        "export",
        help="the run's items as Label Studio tasks (a random audit, the review queue) and its "
        "labeling config; with --url, a new project there",
    )
    _add_run(export)
    export.add_argument(
        "--to", choices=("label-studio",), default="label-studio", help="the tool (label-studio)"
    )
    export.add_argument(
        "--audit-sample",
        type=positive_int,
        metavar="N",
        help="also N triples per task drawn at random (stratified by filing), and the same share "
        "of its spans: the labels that may correct the scores (default: the review queue only)",
    )
    export.add_argument("--seed", type=int, default=1234, help="the audit's draw (default: 1234)")
    export.add_argument(
        "--select",
        choices=("uniform", "confidence"),  # stats.audit.SELECTS (numpy: not at start-up)
        default="uniform",
        help="how the audit chooses: uniform (every item the same chance), or confidence (half "
        "where the panel's judges disagreed, each item's chance known and weighed: fewer labels "
        "for the same interval; `review plan` says how many each needs)",
    )
    export.add_argument(
        "--no-queue",
        action="store_true",
        help="the audit only, without the review queue's items (a split-heavy run queues many)",
    )
    export.add_argument(
        "--show-judges",
        action="store_true",
        help="show the judges' verdicts and reasoning in each task (default: blind review)",
    )
    export.add_argument(
        "--output", "-o", type=Path, metavar="DIR", help="default: RUN/label-studio"
    )
    export.add_argument(
        "--url",
        help="a Label Studio server: create the project there (token: LABEL_STUDIO_API_KEY)",
    )
    export.add_argument("--title", help="the project's title (default: the run's model and id)")
    export.set_defaults(func=export_command)


def _add_import_and_plan(actions: Commands) -> None:
    imported = actions.add_parser(
        "import", help="people's labels from a Label Studio JSON export into the run folder"
    )
    _add_run(imported, panel=False)
    imported.add_argument(
        "file", type=Path, nargs="?", metavar="FILE", help="the project's JSON export"
    )
    imported.add_argument("--url", help="or pull it from this Label Studio server")
    imported.add_argument("--project", type=positive_int, help="the project's id (with --url)")
    imported.set_defaults(func=import_command)

    plan = actions.add_parser(
        "plan",
        help="how many items to label for a PPI interval of a given half-width, drawn uniformly "
        "or by confidence (`review export --select`)",
    )
    _add_run(plan)
    plan.add_argument(
        "--halfwidth",
        type=float,
        required=True,
        metavar="POINTS",
        help="the interval's half-width wanted, in points of the 0-100 scale",
    )
    plan.add_argument(
        "--disagreement",
        type=float,
        metavar="RATE",
        help="a stated prior: the share of items where people and panel differ (default: from "
        "the run's audit labels, else 0.15)",
    )
    plan.set_defaults(func=plan_command)


def _add_run(parser: argparse.ArgumentParser, panel: bool = True) -> None:
    parser.add_argument("run", type=Path, metavar="RUN", help="a run folder or manifest_*.json")
    if panel:
        parser.add_argument(
            "--judges",
            help="the panel whose votes to use, by name or its file (default: the latest)",
        )


def export_command(args: argparse.Namespace) -> None:
    from finreflect_eval.pipeline.judging import panel_choice
    from finreflect_eval.review.export import export_run, write_export
    from finreflect_eval.review.label_studio import create_project, label_config

    manifest, export = export_run(
        args.run,
        panel=panel_choice(args.judges),
        audit_size=args.audit_sample,
        seed=args.seed,
        show_judges=args.show_judges,
        queue=not args.no_queue,
        select=args.select,
    )
    if not export.items:
        raise FinReflectError("nothing to export: the review queue is empty (add --audit-sample N)")
    tasks = [{"data": item.data()} for item in export.items]
    config = label_config(export.criteria, args.show_judges)
    home = args.run if args.run.is_dir() else args.run.parent
    for path in write_export(args.output or home / "label-studio", tasks, config):
        print(f"wrote {path}")
    drawn = ", ".join(f"{t}: {n} triples, {s} spans" for t, (n, s) in export.audit.items())
    print(
        f"{len(tasks)} tasks: {export.flagged} from the review queue"
        + (f"; audit {drawn}" if drawn else "")
    )
    if args.url:
        title = args.title or f"{manifest.model.name} {manifest.run}"[:50]
        project = create_project(args.url, title, config, tasks)
        print(f"created project {project} at {redact_url(args.url)} with {len(tasks)} tasks")


def import_command(args: argparse.Namespace) -> None:
    from finreflect_eval.records import read_json
    from finreflect_eval.review.label_studio import export_project
    from finreflect_eval.review.labels import import_run

    if (args.file is None) == (args.url is None):
        raise FinReflectError("review import: give FILE (a JSON export) or --url with --project")
    if args.url:
        if args.project is None:
            raise FinReflectError("review import --url: which project? (--project ID)")
        data = export_project(args.url, args.project)
    else:
        data = read_json(args.file, max_bytes=MAX_EXPORT_BYTES)
    imported, written = import_run(args.run, data)
    for line in imported.refused:
        print(line, file=sys.stderr)
    if not imported.count and imported.refused:
        raise FinReflectError(
            f"nothing imported: {len(imported.refused)} refusal(s), listed above (first: "
            f"{imported.refused[0]})"
        )
    left = f"; {imported.cancelled} cancelled, {imported.duplicates} duplicate(s) left out"
    print(f"imported {imported.count} labels from {imported.tasks} tasks{left}")
    for task, count in written.items():
        print(f"{task}: {count} labels in the run folder")
    if imported.refused:  # a script must see that part of the export did not go in
        raise FinReflectError(
            f"{len(imported.refused)} refusal(s), listed above; the {imported.count} labels "
            "imported are in the run folder, and a corrected export imports the rest"
        )


MAX_EXPORT_BYTES = 2 << 30  # a Label Studio export of 100k long spans is well under this


def plan_command(args: argparse.Namespace) -> None:
    from finreflect_eval.pipeline.judging import panel_choice
    from finreflect_eval.review.plan import plan_run, plan_table

    rows = plan_run(args.run, panel_choice(args.judges), args.halfwidth, args.disagreement)
    print(plan_table(rows, args.halfwidth))
