"""The extraction modes, each defined once: the prompts a task of the mode needs, and its steps
in order with the model that runs each (read by tasks, the runner and the leaderboard).

single_pass: one prompt extracts and normalises. multi_pass: pass 1 extracts, pass 2 (the
normaliser model, by default the candidate itself) normalises pass 1's triples against the span.
reflection: extract, then rounds of critic feedback and correction by the candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["candidate", "normalizer"]
ModeName = Literal["single_pass", "multi_pass", "reflection"]


@dataclass(frozen=True)
class Step:
    """One step of a mode (a method of `extraction.TaskRun`) and which model runs it."""

    name: Literal["extract", "normalize", "reflect"]
    role: Role = "candidate"


@dataclass(frozen=True)
class Mode:
    name: str
    prompts: tuple[str, ...]  # the prompt templates a task of this mode must name
    steps: tuple[Step, ...]
    description: str


MODES: dict[str, Mode] = {
    mode.name: mode
    for mode in (
        Mode(
            "single_pass",
            ("extract",),
            (Step("extract"),),
            "one prompt extracts and normalises the triples",
        ),
        Mode(
            "multi_pass",
            ("extract", "normalize"),
            (Step("extract"), Step("normalize", "normalizer")),
            "extract, then a second pass normalises the triples against the span",
        ),
        Mode(
            "reflection",
            ("extract", "critic", "correct"),
            (Step("extract"), Step("reflect")),
            "extract, then critic feedback and correction until the critic is satisfied",
        ),
    )
}
MODE_NAMES = tuple(MODES)
