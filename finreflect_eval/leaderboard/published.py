"""Published reference figures: what a paper reports for its own extraction and judges
(`<leaderboard>/published.json`), shown on the page beside the entries so that a new model can be
placed against the published baseline. They are quoted, not verified here (no samples stand
behind them), so they are never ranked or compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finreflect_eval._util.errors import FinReflectError, first_invalid_field
from finreflect_eval.protocol.criteria import CRITERIA
from finreflect_eval.protocol.modes import MODE_NAMES
from finreflect_eval.records import read_json

Score = float
Criterion = str


class Published(BaseModel):
    """One row of published figures, with where they come from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """What was evaluated, named as the source names it."""
    source: str
    """The citation: authors, title, arXiv id and version, table."""
    url: str = Field(pattern=r"^https://")
    judges: str
    data: str
    scores: dict[str, dict[Criterion, Score]] | None
    """Per mode (single_pass, multi_pass, reflection), per criterion, in percent."""
    alpha: dict[Criterion, float] | None
    """Krippendorff's α per criterion, where the source reports it."""
    note: str = ""

    def row(self) -> dict[str, Any]:
        """The row the page shows: per mode its criteria and their mean, like an entry's."""
        row: dict[str, Any] = self.model_dump()
        for mode in MODE_NAMES:
            scores = (self.scores or {}).get(mode)
            row[mode] = round(sum(scores.values()) / len(scores), 2) if scores else None
        return row


def load_published(leaderboard: Path) -> list[Published]:
    """The leaderboard's published figures (none when it has no `published.json`); a malformed
    file, an unknown mode or criterion, or a value out of range is one line naming it."""
    path = leaderboard / "published.json"
    if not path.exists():
        return []
    try:
        rows = [Published.model_validate(entry) for entry in read_json(path)]
    except (ValidationError, TypeError) as exc:
        detail = first_invalid_field(exc) if isinstance(exc, ValidationError) else str(exc)
        raise FinReflectError(f"{path}: {detail}") from exc
    for row in rows:
        for mode, scores in (row.scores or {}).items():
            if mode not in MODE_NAMES or not set(scores) <= set(CRITERIA):
                raise FinReflectError(f"{path}: {row.name!r}: unknown mode or criterion in {mode}")
            if not all(0 <= value <= 100 for value in scores.values()):
                raise FinReflectError(f"{path}: {row.name!r}: a score of {mode} is not 0-100")
        if row.alpha and (
            not set(row.alpha) <= set(CRITERIA) or not all(-1 <= a <= 1 for a in row.alpha.values())
        ):
            raise FinReflectError(f"{path}: {row.name!r}: α must be -1..1 per known criterion")
    return rows
