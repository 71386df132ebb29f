"""The static leaderboard: verified submissions in, one self-contained page out.

A submission is a run's results with the manifest and samples (every vote) they follow from,
and its people's labels (`review import`) where it has any, from which its `human` block (shown
on its row: the audit, the panel's agreement with people, the PPI estimate) is recomputed,
stored as `<leaderboard>/submissions/<org__model>/<run-id>.json`. Its results' `graph` block
(the graph its triples make: fragmentation, contradictions, grounding; columns beside the
scores, never in Overall) is recomputed too, and shown where results scored before there was
one lack it. Its `cost` block (what its model calls used, priced with the table the results
name; per 1,000 triples, columns beside the scores, never in Overall) is recomputed too, and
its `downstream` block (multi-hop QA over its graph, for a run that also ran a downstream task)
from the downstream files it carries.
`submit` accepts one only when it is a complete run (no --limit, no shard) of a task on a
dataset listed in `datasets.json` (an official one at any commit the run names),
every score recomputed from its samples equals the submitted score, and it is not a duplicate;
else it lists every reason at once. Its section:
`official` (an official dataset slice and an official panel whose judges ran as it pins them;
ranked on the pinned data version unless its audit failed), `community` (anything else) or
`smoke` (the bundled sample). `build` renders
`index.html` (data inline, no network), `leaderboard.json` and `leaderboard.csv`, and each
entry's report (`view` of the stored entry, under `reports/`, linked from its row); `check`
tells which of them are stale. Modules by job: `registry` (`datasets.json`, data versions and
the maintainer's pin), `verify` (with `sample_checks`: the samples' spans and votes, and the
people's labels a submission carries; `task_checks`: its tasks, and its downstream files),
`entries` (storage), `ranking` (paired comparisons, rank ranges, ties, ranking stability),
`rows`, `validity` (the main scores against the downstream measures: Spearman's ρ over one
comparable entry per model, `finreflect-eval validity` and the page's section), `render` (with
`templates/`). Who cast an entry's votes: `provenance` (an official entry's judges ran as the
bundled panel pins them; else it is a community entry, saying which field differed) and the
seeded re-judging audit (`rejudging`: the draw, the re-judging, the comparison; `audited`:
`leaderboard audit`'s files, verified whenever the board is built).

May import every room below `cli` (`view`, `pipeline`, `review`, `runs`, `scoring`,
`downstream`, `tasks`, `data`, `records`, `stats`, `protocol`, `_util`).
"""

from dataclasses import dataclass
from pathlib import Path

from finreflect_eval.leaderboard.entries import add_entry, load_entries
from finreflect_eval.leaderboard.render import build, check, standing_of
from finreflect_eval.leaderboard.verify import bundle_run, check_model_name, verify, verify_audit


@dataclass(frozen=True)
class Submitted:
    """Where a submission was (or would be) written, the pull request's URL (None: none was
    opened), and where it goes on the page (`render.standing_of`: its section, and its rank or
    why it has none)."""

    target: Path
    pull_request: str | None
    standing: str


def submit_entry(
    source: Path, leaderboard: Path, *, hub_repo: str | None = None, dry_run: bool = False
) -> Submitted:
    """Verify a run's results (a results file, a run folder or a bundle) or a judge audit, add
    it to the leaderboard and rebuild the page; or, with `hub_repo`, open a pull request with it
    instead; with `dry_run`, only verify it."""
    added = add_entry(source, leaderboard, hub_repo=hub_repo, dry_run=dry_run)
    if not dry_run and not hub_repo:
        build(leaderboard)  # first: the stored entry and the page never disagree
    standing = standing_of(leaderboard, added.entry, added.stored)
    return Submitted(added.target, added.pull_request, standing)


def submit(
    source: Path, leaderboard: Path, *, hub_repo: str | None = None, dry_run: bool = False
) -> tuple[Path, str | None]:
    """`submit_entry`: where it was (or would be) written, and the pull request's URL."""
    submitted = submit_entry(source, leaderboard, hub_repo=hub_repo, dry_run=dry_run)
    return submitted.target, submitted.pull_request


__all__ = [
    "build",
    "bundle_run",
    "check",
    "check_model_name",
    "load_entries",
    "submit",
    "submit_entry",
    "verify",
    "verify_audit",
]
