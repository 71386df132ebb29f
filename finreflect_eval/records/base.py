"""What every record shares: the base classes, the format version, and the patterns of the
names read from run files."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    StringConstraints,
)

FORMAT_VERSION = 2
Percent = float | None  # scores are percentages (0..100); None where undefined

# Names read from run files that become parts of file names: a run folder is input (someone else
# may hand it over), so each is checked against its pattern where it is read, never joined as is.
RunId = Annotated[
    str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(-[0-9a-f]{4})?$")
]
"""A run's start time, UTC, and a random part (`2026-12-03T07-16-18-9f2c`; format 1: no part)."""
PlainName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
"""A task, group or panel name: letters, digits, `.`, `_`, `-` (one file-name part)."""
SamplesName = Annotated[str, StringConstraints(pattern=r"^samples_[A-Za-z0-9._-]{1,250}\.jsonl$")]
"""A samples file of the run's own folder."""


class Record(BaseModel):
    """A part of a file: unknown fields are refused, fields are documented in place."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class FileRecord(Record):
    """A whole file (or one line of a JSONL file)."""

    format_version: Literal[2] = FORMAT_VERSION
    """The version of these file schemas that wrote the file."""
