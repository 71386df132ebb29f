"""Label Studio, the open annotation tool: a run's items as its tasks (`review export`), and its
API (`--url`), through its SDK (`label-studio-sdk`, the `[review]` extra).

One Label Studio task is one item people label: a triple (faithfulness, precision, relevance,
each `yes` or `no`) or a span (comprehensiveness: good, partial or poor). Its `data` says which
item of which run it is (`run_id`, `task`, `span_id`, `doc_id`, `triple_index`), how it was
chosen (`sample`: `audit`, drawn at random, or `flagged`, from the review queue), the span's
text (as `text`, and as `html` with the triple's subject and object marked, every character of
it escaped) and its sha256 (`review import` refuses a label whose text changed). In blind
review (the default) the task holds no verdict of the judges; `--show-judges` adds them.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.redaction import redact_text, redact_url
from finreflect_eval.protocol.criteria import CRITERIA, TRIPLE_CRITERIA

TOKEN_VARIABLE = "LABEL_STUDIO_API_KEY"  # the SDK's own name for it
ANSWERS = {"yes": 1, "no": 0, "good": "good", "partial": "partial", "poor": "poor"}
"""A choice in the labeling config, as the label it is."""
QUESTIONS = {
    "faithfulness": "Faithfulness: does the span state this triple?",
    "precision": "Precision: are subject, relation and object exact (not vague or too broad)?",
    "relevance": "Relevance: does the triple matter for understanding the filing?",
    "comprehensiveness": "Comprehensiveness: do the span's triples cover its important facts?",
}


@dataclass(frozen=True)
class Item:
    """One Label Studio task's item: a triple, or a span (`triple` None)."""

    run: str
    task: str
    span_id: str
    doc_id: int
    filing: str
    text: str
    span_sha256: str
    triple: Sequence[str] | None
    triple_index: int | None
    sample: str
    audit_sample: int | None
    """The audit's size as asked (`--audit-sample N`; None outside the audit)."""
    audit_seed: int | None
    flagged_for: tuple[str, ...]
    judges: str | None
    """The judges' verdicts and reasoning as text, shown beside the span (None: blind)."""
    span_triples: tuple[str, ...] = ()
    """A span's item: its triples, shown to judge its comprehensiveness."""
    audit_select: str = "uniform"
    """How the audit chose (`uniform`, `confidence`); with `audit_panel`, the panel whose votes
    a confidence-driven one was drawn on."""
    audit_panel: str | None = None

    def data(self) -> dict[str, Any]:
        triple = " | ".join(self.triple) if self.triple is not None else ""
        if self.triple is None:
            triple = "; ".join(self.span_triples) or "(none)"
        data = {
            "run_id": self.run,
            "task": self.task,
            "span_id": self.span_id,
            "doc_id": self.doc_id,
            "filing": self.filing,
            "triple_index": self.triple_index,
            "triple": triple,
            "kind": "span" if self.triple is None else "triple",
            "sample": self.sample,
            "audit_sample": self.audit_sample,
            "audit_seed": self.audit_seed,
            "audit_select": self.audit_select if self.sample == "audit" else None,
            "audit_panel": self.audit_panel if self.sample == "audit" else None,
            "flagged_for": list(self.flagged_for),
            "span_sha256": self.span_sha256,
            "text": self.text,
            "html": marked(self.text, self.triple),
            "heading": _heading(self),
        }
        if self.judges is not None:
            data["judges"] = self.judges
        return data


def _heading(item: Item) -> str:
    where = f"{item.task} · {item.filing} · span {item.span_id}"
    if item.triple is None:
        return f"{where}: answer comprehensiveness only, of the span's triples (below)"
    return f"{where}: answer faithfulness, precision and relevance of the triple"


def marked(text: str, triple: Sequence[str] | None) -> str:
    """The span's text as HTML, every character escaped, the first place of the triple's
    subject and of its object (where the text has them, case aside) in `<mark>`."""
    places: list[tuple[int, int]] = []
    for part in (triple[0], triple[3]) if triple else ():
        start = text.lower().find(part.lower()) if part.strip() else -1
        end = start + len(part)
        if start >= 0 and all(end <= s or start >= e for s, e in places):
            places.append((start, end))
    out, at = [], 0
    for start, end in sorted(places):
        out += [html.escape(text[at:start]), "<mark>", html.escape(text[start:end]), "</mark>"]
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out).replace("\n", "<br/>")


def label_config(criteria: Iterable[str], show_judges: bool) -> str:
    """The project's labeling config (`label_config.xml`): the span, the triple, and one
    `Choices` control per criterion, named as the criterion (`yes`/`no`; good/partial/poor)."""
    lines = [
        "<View>",
        '  <Header value="$heading" size="5"/>',
        '  <HyperText name="span" value="$html"/>',
        '  <Header value="Triple (subject | type | relation | object | type): $triple" size="5"/>',
    ]
    if show_judges:
        lines.append('  <Text name="judges" value="$judges"/>')
    for name in (name for name in CRITERIA if name in set(criteria)):
        choices = ("yes", "no") if name in TRIPLE_CRITERIA else ("good", "partial", "poor")
        lines.append(f'  <Header value="{QUESTIONS[name]}" size="6"/>')
        lines.append(
            f'  <Choices name="{name}" toName="span" choice="single" showInline="true">'
            + "".join(f'<Choice value="{choice}"/>' for choice in choices)
            + "</Choices>"
        )
    lines.append("</View>")
    return "\n".join(lines) + "\n"


# --- its API ---


def client(url: str) -> Any:
    """The SDK's client of the Label Studio at `url`, with the token from the environment
    (`LABEL_STUDIO_API_KEY`; never stored or printed)."""
    token = os.environ.get(TOKEN_VARIABLE)
    if not token:
        raise FinReflectError(
            f"--url {redact_url(url)}: set {TOKEN_VARIABLE} to your Label Studio access token "
            "(Account & Settings → Access Token)"
        )
    try:
        from label_studio_sdk import LabelStudio
    except ImportError:
        raise FinReflectError(
            "--url needs the Label Studio SDK: pip install 'finreflect-eval[review]'"
        ) from None
    return LabelStudio(base_url=url, api_key=token)


def create_project(url: str, title: str, config: str, tasks: list[dict]) -> int:
    """A new project at `url` with the labeling config and the tasks; its id."""
    ls = client(url)
    with _answering(url):
        project = ls.projects.create(title=title, label_config=config)
        ls.projects.import_tasks(id=project.id, request=tasks)
    return int(project.id)


def export_project(url: str, project: int) -> Any:
    """Every task of a project with its annotations, as Label Studio's JSON export."""
    ls = client(url)
    with _answering(url):
        return ls.projects.exports.as_json(project)


class _answering:
    """Errors of the API as one line naming the server (never the token, never a body that
    might echo it)."""

    def __init__(self, url: str) -> None:
        self.url = redact_url(url)

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, exc: BaseException | None, _: Any) -> bool:
        if exc is None or isinstance(exc, FinReflectError):
            return False
        status = getattr(exc, "status_code", None)
        token = os.environ.get(TOKEN_VARIABLE, "")
        detail = redact_text(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        if token:
            detail = detail.replace(token, "***")
        cause = f"HTTP {status}" if status else f"{type(exc).__name__}: {detail[:200]}"
        hint = " (is the token right?)" if status in (401, 403) else ""
        raise FinReflectError(f"Label Studio at {self.url}: {cause}{hint}") from None
