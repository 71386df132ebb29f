"""FinReflectKG judge-panel scores as a Hugging Face `evaluate` metric.

    import evaluate
    from finreflect_eval.stats.metrics import EVALUATE_MODULE
    metric = evaluate.load(str(EVALUATE_MODULE))
    metric.compute(span_id=[...], criterion=[...], votes=[["1", "1", "0"], ...])

One input row per judged item: the span it belongs to, the criterion, and one vote per judge in
a fixed judge order ("0"/"1" for faithfulness, precision and relevance; "good"/"partial"/"poor"
for comprehensiveness; "" for an abstention). The numbers are those of `finreflect-eval score`:
this module only adapts its inputs to `finreflect_eval.stats.metrics`.
"""

import datasets
import evaluate

from finreflect_eval.protocol.criteria import CRITERIA
from finreflect_eval.stats.metrics import Item, score_items
from finreflect_eval.stats.uncertainty import BOOTSTRAP_ITERS

_DESCRIPTION = __doc__
_KWARGS = """
Args:
    span_id: the span of each item.
    criterion: faithfulness, precision, relevance or comprehensiveness.
    votes: one label per judge, "" for an abstention.
    judges: judge names, in the order of the votes (default judge-0, judge-1, ...).
    seed: bootstrap seed (default 1234).
Returns:
    <criterion>: the panel score ×100 (micro over triples; macro over spans for
    comprehensiveness), <criterion>_ci: its 95% bootstrap CI over spans, <criterion>_alpha:
    Krippendorff's nominal alpha across judges (None when undefined), for comprehensiveness
    (ordered levels: poor < partial < good) <criterion>_alpha_ordinal too, and
    <criterion>_per_judge.
"""


class FinReflectJudges(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS,
            features=datasets.Features(
                {
                    "span_id": datasets.Value("string"),
                    "criterion": datasets.Value("string"),
                    "votes": datasets.Sequence(datasets.Value("string")),
                }
            ),
        )

    def _compute(self, span_id, criterion, votes, judges=None, seed=1234):
        width = max((len(v) for v in votes), default=0)
        judges = list(judges or [f"judge-{i}" for i in range(width)])
        rows = enumerate(zip(span_id, criterion, votes, strict=True))
        items = [
            Item(span, name, index, dict(zip(judges, map(_label, labels), strict=True)))
            for index, (span, name, labels) in rows
        ]
        scores = score_items(items, judges, seed=seed)
        result = {"bootstrap_iters": BOOTSTRAP_ITERS}
        for name, entry in scores.items():
            result[name] = entry["score"]
            result[f"{name}_ci"] = entry["ci"]
            result[f"{name}_alpha"] = entry["agreement"]["alpha"]
            if CRITERIA[name].ordered:
                result[f"{name}_alpha_ordinal"] = entry["agreement"]["ordinal"]
            result[f"{name}_per_judge"] = entry["per_judge"]
        return result


def _label(text):
    if text == "":
        return None
    return int(text) if text in ("0", "1") else text
