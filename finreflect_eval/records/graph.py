"""The results' `graph` block (`results["graph"][task]`): the graph a task's triples make, per
filing and overall (`graph.metrics`), its overlap with the reference triples, the numbers and
dates grounded in their spans (`graph.grounding`), and what the grounding cascade saved."""

from __future__ import annotations

from pydantic import Field

from finreflect_eval.records.base import Record


class GraphQuality(Record):
    """One graph's quality (a filing's, or summed over the filings): the keys other tools read."""

    entities: int
    """Distinct normalised entities (the graph's nodes)."""
    edges: int
    """Distinct normalised triples."""
    surface_forms_per_entity: float | None
    """Mean distinct surface strings per entity."""
    fragmented_share: float | None = Field(ge=0, le=1)
    """Entities seen under more than one surface string, as a share (0–1)."""
    duplicate_triples: int
    """Copies of a normalised triple in other spans of the filing than its first."""
    contradictions: int
    """Pairs of triples with the same subject and object and opposite relations (the schema's
    `opposite_relations`)."""
    invalid_type_pairs: int
    """Types an entity is given beyond its first (one name, one kind of thing)."""
    largest_component_share: float | None = Field(ge=0, le=1)
    """Entities in the largest weakly connected component, as a share."""
    cross_chunk_entities: int
    """Entities that occur in more than one span of their filing."""


class GraphOverall(GraphQuality):
    """The filings' graphs together: counts summed, shares recomputed from the sums."""

    filings: int


class Grounding(Record):
    """Triples holding a number, percentage, amount or date (`checked`), and whether the span's
    text holds every one of them (`grounded`) or not (`ungrounded`)."""

    checked: int
    grounded: int
    ungrounded: int


class GraphScores(Record):
    """A task's graph."""

    overall: GraphOverall
    per_filing: dict[str, GraphQuality]
    reference: dict[str, dict[str, dict[str, float | int | None]]] | None
    """Against the dataset's reference triples of the same spans: `exact` and `normalised`
    matching, each with `entity` and `edge` precision, recall, F1 and the counts; None where the
    dataset has none."""
    grounding: Grounding
    cascade: dict[str, int] | None = None
    """With `--skip-judging-ungrounded`: `triples_skipped` (scored 0 by rule, never sent to the
    judges) and `judge_calls_saved`; None without it (the paper's protocol)."""
    normalisation: list[str]
    """The entity normalisation's rules, in plain words."""
    opposite_relations: list[list[str]]
    """The relation pairs counted as contradictions."""
