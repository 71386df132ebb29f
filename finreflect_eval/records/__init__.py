"""The files a run writes, as types: every producer writes through these models and every reader
(the next stage, the leaderboard) validates with them.

A run folder (`OUTPUT_PATH/<model>/`) holds a `Manifest` (`manifest_<run>.json`), one
`SampleRecord` per span and task (`samples_<task>_<run>.jsonl`), and per judge panel the
`Results` (`results_<run>_<panel>.json`) and the review queues (`ReviewItem` lines in
`review_<task>_<run>_<panel>.jsonl`, each flagged span's text once in `ReviewSpan` lines of
`review_spans_<task>_<run>_<panel>.jsonl`, and a CSV). `review import` writes people's labels
(`HumanLabel` lines of `human_labels_<task>_<run>.jsonl`); the downstream stage writes a
`DownstreamFile` per task and panel (`downstream_<task>_<run>_<panel>.json`); `audit-judges`
writes a `JudgeAudit`; a leaderboard entry is a `Submission`.

Every file (every line of a JSONL file) carries `format_version`; a file of another version is a
one-line error (`finreflect-eval upgrade` converts runs written before versions existed).

May import `stats` (the panel's majority rule, for lm-eval's per-sample fields), `protocol`
and `_util`.
"""

from finreflect_eval.records.base import (
    FORMAT_VERSION,
    FileRecord,
    Percent,
    PlainName,
    Record,
    RunId,
    SamplesName,
)
from finreflect_eval.records.cost import ModelPrice, Prices, TaskCost, Usage
from finreflect_eval.records.downstream import (
    DownstreamFile,
    DownstreamScores,
    Question,
    QuestionRecord,
)
from finreflect_eval.records.entry_audit import (
    AuditCalibration,
    AuditedEntry,
    AuditItem,
    EntryAudit,
)
from finreflect_eval.records.graph import GraphQuality, GraphScores, Grounding
from finreflect_eval.records.human import HumanLabel
from finreflect_eval.records.manifest import (
    DatasetInfo,
    Environment,
    JudgeMember,
    Judging,
    LoadedModel,
    Manifest,
    MetricSpec,
    ModelInfo,
    ReplicaInfo,
    RunArguments,
    ShardInfo,
    SliceSpec,
    SpanList,
    TaskManifest,
)
from finreflect_eval.records.reading import (
    MAX_DEPTH,
    check_version,
    parse,
    read,
    read_json,
    read_lines,
)
from finreflect_eval.records.results import (
    Agreement,
    CoderAgreement,
    CriterionDetail,
    Failures,
    FilingScores,
    HumanCheck,
    ItemCounts,
    JudgeProtocol,
    JudgesInfo,
    Overall,
    Results,
    ReviewItem,
    ReviewSpan,
    RunSettings,
    SampleCount,
    TaskDetails,
    Tokens,
)
from finreflect_eval.records.samples import (
    Feedback,
    ModelCall,
    SampleMetrics,
    SampleRecord,
    Vote,
    Votes,
)
from finreflect_eval.records.submissions import Case, JudgeAudit, ProbeSpan, Submission

__all__ = [
    "FORMAT_VERSION",
    "MAX_DEPTH",
    "Agreement",
    "AuditCalibration",
    "AuditItem",
    "AuditedEntry",
    "Case",
    "CoderAgreement",
    "CriterionDetail",
    "DatasetInfo",
    "DownstreamFile",
    "DownstreamScores",
    "EntryAudit",
    "Environment",
    "Failures",
    "Feedback",
    "FileRecord",
    "FilingScores",
    "GraphQuality",
    "GraphScores",
    "Grounding",
    "HumanCheck",
    "HumanLabel",
    "ItemCounts",
    "JudgeAudit",
    "JudgeMember",
    "JudgeProtocol",
    "JudgesInfo",
    "Judging",
    "LoadedModel",
    "Manifest",
    "MetricSpec",
    "ModelCall",
    "ModelInfo",
    "ModelPrice",
    "Overall",
    "Percent",
    "PlainName",
    "Prices",
    "ProbeSpan",
    "Question",
    "QuestionRecord",
    "Record",
    "ReplicaInfo",
    "Results",
    "ReviewItem",
    "ReviewSpan",
    "RunArguments",
    "RunId",
    "RunSettings",
    "SampleCount",
    "SampleMetrics",
    "SampleRecord",
    "SamplesName",
    "ShardInfo",
    "SliceSpec",
    "SpanList",
    "Submission",
    "TaskCost",
    "TaskDetails",
    "TaskManifest",
    "Tokens",
    "Usage",
    "Vote",
    "Votes",
    "check_version",
    "parse",
    "read",
    "read_json",
    "read_lines",
]
