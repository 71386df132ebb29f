"""The knowledge-graph schema (entity types, relations), the `Triple` record and CheckRules.

The schema is data (`tasks/schema.yaml`); a task may point at another file. Entity types and
relations become `str` enumerations so constrained decoding can put them in a JSON schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import Enum
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from finreflect_eval._util.errors import FinReflectError, first_invalid_field
from finreflect_eval._util.resources import load_yaml, tasks_dir

MAX_ENTITY_WORDS = 5
# Long enough for any ≤ 5-word entity; bounded so constrained output can't run away.
MAX_ENTITY_CHARS = 60

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class Triple(BaseModel):
    """One knowledge-graph fact: (subject, subject_type, relation, object, object_type)."""

    model_config = ConfigDict(frozen=True)

    subject: str
    subject_type: str
    relation: str
    object: str
    object_type: str

    @classmethod
    def from_tuple(cls, values: Iterable[str]) -> Triple:
        subject, subject_type, relation, obj, object_type = values
        return cls(
            subject=subject,
            subject_type=subject_type,
            relation=relation,
            object=obj,
            object_type=object_type,
        )

    def as_tuple(self) -> tuple[str, str, str, str, str]:
        return (self.subject, self.subject_type, self.relation, self.object, self.object_type)


class _SchemaFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    version: int | str
    entity_types: dict[str, str] = Field(min_length=1)
    relations: dict[str, str] = Field(min_length=1)
    opposite_relations: list[tuple[str, str]] = []

    @field_validator("entity_types", "relations")
    @classmethod
    def _names_are_identifiers(cls, items: dict[str, str]) -> dict[str, str]:
        for name, description in items.items():
            if not _NAME.match(name):
                raise ValueError(f"{name!r} is not a valid name (letters, digits, underscores)")
            if not isinstance(description, str) or not description.strip():
                raise ValueError(f"{name!r} needs a one-line description")
        return items

    @model_validator(mode="after")
    def _opposites_are_relations(self) -> _SchemaFile:
        seen: set[frozenset[str]] = set()
        for pair in self.opposite_relations:
            unknown = [name for name in pair if name not in self.relations]
            if unknown:
                raise ValueError(f"opposite_relations: {unknown[0]!r} is not a relation")
            if pair[0] == pair[1] or frozenset(pair) in seen:
                raise ValueError(f"opposite_relations: {list(pair)} is not a new pair of two")
            seen.add(frozenset(pair))
        return self


class KGSchema:
    """A loaded schema: names with their descriptions, plus enum and pydantic views of them."""

    def __init__(self, path: Path, spec: _SchemaFile) -> None:
        self.path = path
        self.name = spec.name
        self.version = spec.version
        self.entity_types: dict[str, str] = dict(spec.entity_types)
        self.relations: dict[str, str] = dict(spec.relations)
        self._relations_by_lower = {name.lower(): name for name in self.relations}
        # Pairs of relations that contradict each other for the same subject and object.
        self.opposite_relations: tuple[tuple[str, str], ...] = tuple(
            (first, second) for first, second in spec.opposite_relations
        )

    @cached_property
    def EntityType(self) -> type[Enum]:  # a class, hence the name
        return Enum("EntityType", {name: name for name in self.entity_types}, type=str)

    @cached_property
    def Relation(self) -> type[Enum]:  # a class, hence the name
        return Enum("Relation", {name: name for name in self.relations}, type=str)

    @cached_property
    def triple_model(self) -> type[BaseModel]:
        """A pydantic model whose JSON schema allows only this schema's types and relations."""
        return self.bounded_triple_model(MAX_ENTITY_CHARS)

    def bounded_triple_model(self, max_entity_chars: int) -> type[BaseModel]:
        """`triple_model` with entities of at most `max_entity_chars` characters."""
        entity = Annotated[str, Field(min_length=1, max_length=max_entity_chars)]
        return create_model(
            "SchemaTriple",
            subject=(entity, ...),
            subject_type=(self.EntityType, ...),
            relation=(self.Relation, ...),
            object=(entity, ...),
            object_type=(self.EntityType, ...),
        )

    def triple_list_model(
        self, max_triples: int, *, min_triples: int = 0, max_entity_chars: int = MAX_ENTITY_CHARS
    ) -> type[BaseModel]:
        """`{"triples": [...]}`: what extraction, normalisation and correction return."""
        triple = self.bounded_triple_model(max_entity_chars)
        bounds = Field(min_length=min_triples, max_length=max_triples)
        return create_model(
            "Extraction",
            __config__=ConfigDict(extra="forbid"),
            triples=(Annotated[list[triple], bounds], ...),
        )

    def canonical_relation(self, name: str) -> str | None:
        """The schema's spelling of a relation, matched case-insensitively (`subject_to`)."""
        return self._relations_by_lower.get(name.strip().lower().replace(" ", "_"))


def default_schema_path() -> Path:
    return tasks_dir() / "schema.yaml"


@lru_cache(maxsize=8)
def load_schema(path: str | Path | None = None) -> KGSchema:
    """Load and validate a schema file (default: the bundled FinReflectKG schema)."""
    path = Path(path) if path is not None else default_schema_path()
    raw = load_yaml(path, "schema file")
    try:
        spec = _SchemaFile.model_validate(raw)
    except ValidationError as exc:
        raise FinReflectError(f"schema file {path}: {first_invalid_field(exc)}") from exc
    return KGSchema(path, spec)


# --- CheckRules (FinReflectKG): four rule-based checks per triple, no LLM involved ---

_PRONOUNS = {"we", "us", "our", "ours", "it", "its", "they", "them", "their", "this", "these"}
_GENERIC_NOUNS = {
    "company",
    "registrant",
    "corporation",
    "group",
    "firm",
    "entity",
    "business",
    "issuer",
    "organization",
    "management",
    "subsidiary",
    "subsidiaries",
}
_DETERMINERS = {"the", "a", "an", "our", "its", "this", "such"}
CHECK_RULES = ("subject_reference", "entity_length", "entity_schema", "relation_schema")


def is_generic_subject(subject: str) -> bool:
    """True for pronouns and generic references to the filer ("we", "the Company", "our firm")."""
    original = re.sub(r"[^\w\s]", " ", subject).split()
    words = [word.lower() for word in original]
    if not words:
        return True
    # "US", "IT Services": an all-capitals first word is a name or acronym, not a pronoun.
    if words[0] in _PRONOUNS and not (len(original[0]) > 1 and original[0].isupper()):
        return True
    while len(words) > 1 and words[0] in _DETERMINERS:
        words = words[1:]
    return len(words) == 1 and words[0] in _GENERIC_NOUNS


def check_triple(triple: Triple, schema: KGSchema) -> dict[str, bool]:
    """Pass/fail of each CheckRule for one triple."""
    return {
        "subject_reference": not is_generic_subject(triple.subject),
        "entity_length": all(
            0 < len(entity.split()) <= MAX_ENTITY_WORDS
            for entity in (triple.subject, triple.object)
        ),
        "entity_schema": triple.subject_type in schema.entity_types
        and triple.object_type in schema.entity_types,
        "relation_schema": triple.relation in schema.relations,
    }


@dataclass(frozen=True)
class CheckRulesReport:
    """Share of triples passing each rule, and all four; `None` when there are no triples."""

    n_triples: int
    subject_reference: float | None
    entity_length: float | None
    entity_schema: float | None
    relation_schema: float | None
    all_rules: float | None

    @classmethod
    def of_counts(cls, n_triples: int, passed: dict[str, int]) -> CheckRulesReport:
        """From the number of triples passing each rule (and `all_rules`)."""
        rates = {rule: passed[rule] / n_triples if n_triples else None for rule in passed}
        return cls(n_triples=n_triples, **rates)

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def check_rules(triples: Iterable[Triple], schema: KGSchema) -> CheckRulesReport:
    """Per-rule pass rates and the share of triples passing all four rules."""
    return summarize_rule_checks([check_triple(triple, schema) for triple in triples])


def summarize_rule_checks(results: list[dict[str, bool]]) -> CheckRulesReport:
    """The report of per-triple `check_triple` results (as kept in the samples)."""
    return CheckRulesReport.of_counts(len(results), count_rule_passes(results))


def count_rule_passes(results: list[dict[str, bool]]) -> dict[str, int]:
    """How many of the `check_triple` results pass each rule, and `all_rules`."""
    passed = {rule: sum(result[rule] for result in results) for rule in CHECK_RULES}
    passed["all_rules"] = sum(all(result.values()) for result in results)
    return passed
