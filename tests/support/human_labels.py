"""People's labels for tests: a Label Studio export of a run's tasks (as `review export` wrote
them), annotated as reviewers would, and a scripted run with such labels imported."""

from __future__ import annotations

import json
import random
from pathlib import Path

from finreflect_eval.cli import main


def annotated(
    tasks: list[dict], answer: str | None = None, seed: int | None = None, user: int = 7
) -> list[dict]:
    """The tasks as Label Studio exports them, each annotated once by `user`: every criterion
    the item asks answered with `answer` (default yes / good), or at random with `seed`."""
    rng = random.Random(seed)
    out = []
    for number, task in enumerate(tasks, 1):
        data = task["data"]
        triple = data["kind"] == "triple"
        criteria = ["faithfulness", "precision", "relevance"] if triple else ["comprehensiveness"]
        options = ["yes", "no"] if triple else ["good", "partial", "poor"]
        result = [
            {
                "from_name": name,
                "to_name": "span",
                "type": "choices",
                "value": {
                    "choices": [rng.choice(options) if seed is not None else answer or options[0]]
                },
            }
            for name in criteria
        ]
        annotation = {"id": 100 + number, "completed_by": user, "result": result}
        annotation |= {"was_cancelled": False, "updated_at": "2026-12-06T10:00:00Z"}
        out.append({"id": number, "data": data, "annotations": [annotation]})
    return out


def label_run(run: Path, audit_sample: int = 4, seed: int = 1) -> Path:
    """Export the run's items (an audit of `audit_sample` triples per task and the review
    queue), label them at random (`seed`) and import the labels; the run's results rescored."""
    assert main(["review", "export", str(run), "--audit-sample", str(audit_sample)]) == 0
    tasks = json.loads((run / "label-studio" / "tasks.json").read_text())
    export = run.parent / f"{run.name}-label-studio-export.json"
    export.write_text(json.dumps(annotated(tasks, seed=seed)))
    assert main(["review", "import", str(run), str(export)]) == 0
    assert main(["score", "--samples", str(run)]) == 0
    return run
