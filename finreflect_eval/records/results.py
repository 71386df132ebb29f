"""`results_<run>_<panel>.json` (in lm-eval's shape, with our own blocks) and the review
queue's `ReviewItem`s and `ReviewSpan`s."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    model_serializer,
)

from finreflect_eval.protocol.criteria import CriterionName, Label
from finreflect_eval.protocol.modes import ModeName
from finreflect_eval.records.base import (
    FileRecord,
    Percent,
    PlainName,
    Record,
    RunId,
    SamplesName,
)
from finreflect_eval.records.cost import Prices, TaskCost
from finreflect_eval.records.downstream import DownstreamScores
from finreflect_eval.records.graph import GraphScores
from finreflect_eval.records.manifest import (
    DatasetInfo,
    Environment,
    JudgeMember,
    ReplicaInfo,
)
from finreflect_eval.records.samples import (
    Vote,
)
from finreflect_eval.records.worth import CoderAgreement, JudgesWorth


class SampleCount(Record):
    original: int | None
    """Spans in the dataset split (None when unknown)."""
    effective: int
    """Spans run (after --limit and --shard)."""


class RunSettings(Record):
    """lm-eval's `config` block: the settings as given, and what they resolved to."""

    model: str
    """The backend (lm-eval's model type: hf, vllm, openai, ...)."""
    model_args: dict[str, Any]
    model_name: str
    model_num_parameters: int | None = None
    model_revision: str | None = None
    model_sha: str | None = None
    model_dtype: str | None = None
    """The dtype the weights ran in (`auto` resolved)."""
    batch_size: int | str | None = None
    """As given (`auto`, or a number)."""
    batch_sizes: list[int] = []
    """As the run found them (`auto`), or the one given."""
    data_parallel_size: int = 1
    """Replicas of the candidate that ran the requests (on Ray)."""
    replicas: list[ReplicaInfo] = []
    """Each replica's node, GPUs and request count (`data_parallel_size` > 1)."""
    device: str | None = None
    device_map: dict[str, str] | None = None
    """Where each part of the model ran (accelerate's map), where it was spread by one."""
    attn_implementation: str | None = None
    """transformers' attention kernel (hf backend)."""
    think: str | None = None
    """How the candidate was run to think: off, on, none (it does not think), native (a
    server's model at its own default); None: not recorded (`models._thinking`)."""
    think_budget: int | None = None
    think_default: bool | None = None
    """`think` was the model's default, not set."""
    reasoning_parser: str | None = None
    reasoning_effort: str | None = None
    use_cache: str | None = None
    """The response cache (as the manifest records it)."""
    limit: int | float | None = None
    """`--limit` as given (a count, or a fraction of the spans)."""
    limit_spans: int | None = None
    """The spans per task `--limit` kept."""
    sections: list[str] | None = None
    """`--sections` as given: only the spans of these 10-K sections ran."""
    samples: dict[str, list[int | str]] | None = None
    """`--samples` as given (lm-eval's): only these spans of the tasks it names ran."""
    gen_kwargs: dict[str, Any] = {}
    """`--gen-kwargs` as given; each task's requests used its `configs.<task>.generation_kwargs`."""
    random_seed: int | None = None
    numpy_seed: int | None = None
    torch_seed: int | None = None
    """The generation seed: `--seed`, else the tasks' own (None: they differ)."""
    fewshot_seed: int | None = None
    seed: int | None = None
    """`--seed` (None: the tasks' own generation seeds)."""
    shard: str | None = None
    """`i/N` when these are one shard's results."""
    bootstrap_iters: int
    bootstrap_seed: int
    bootstrap_unit: Literal["filing"] = "filing"
    """What the intervals resample: the filings (ticker and fiscal year), each with its spans."""
    group_stderr: str | None = None
    """How the groups' rows get their stderr (None: no group, or written before it was said)."""
    judges: str
    """The judge panel's name."""
    allow_failures: bool = False
    """Scored with `--allow-failures` despite failed calls (never a leaderboard entry)."""
    prices: Prices | None = None
    """The price table `cost` was priced with (`--prices`; None: no money counted)."""
    without_judge_rule: str | None = None
    """How a score without one judge decides an item its two other judges split on."""

    def thinking(self) -> str | None:
        """How the candidate thought, in words (`on, budget 512`, `on, effort high (the
        model's default)`); None for a model that does not think or a run that did not say."""
        if self.think in (None, "none"):
            return None
        parts = [self.think]
        if self.think_budget:
            parts.append(f"budget {self.think_budget}")
        if self.reasoning_effort:
            parts.append(f"effort {self.reasoning_effort}")
        return ", ".join(parts) + (" (the model's default)" if self.think_default else "")


class Agreement(Record):
    alpha: float | None = Field(ge=-1, le=1)
    """Krippendorff's α (nominal) across the judges; None when undefined."""
    ci: list[float] | None = None
    """α's 95% bootstrap interval, resampling filings (as the scores' intervals)."""
    ordinal: float | None = Field(None, ge=-1, le=1)
    """The ordinal α, for ordered labels of more than two levels (comprehensiveness)."""
    ordinal_ci: list[float] | None = None
    reason: str | None
    n_items: int = Field(ge=0)
    below_gate: bool = False
    """The interval's upper end (α itself without one) is under `ALPHA_GATE`: the panel agrees
    too little on this criterion for its scores to be trusted (flagged on the leaderboard)."""


class HumanCheck(Record):
    """A task's criterion checked against people (`results["human"][task][criterion]`): scores on
    the 0–100 scale, intervals 95% and filing-clustered."""

    labels: int
    """Items with an adjudicated human label (audit and flagged)."""
    audit_labels: int
    """Of them, items of the random audit (what `ppi` uses)."""
    audit_size: int | None
    """Items the audit drew (a reviewer who skipped some leaves fewer labels than that)."""
    unresolved: int
    """Items whose annotators tied (no majority): left out, counted here."""
    annotators: int
    panel: Percent
    """The panel's score over every item it scored, as the results report it."""
    ppi: Percent
    """The prediction-powered (PPI++) estimate: the panel's mean plus the tuned rectifier,
    (people − panel) on the audit; None without audit labels."""
    ppi_ci: list[float] | None
    ppi_stderr: float | None
    ppi_lambda: float | None
    """PPI++'s power-tuning weight of the panel (0: the audit alone; 1: plain PPI)."""
    agreement_on: Literal["audit", "flagged", "all"]
    """Which labels the agreement figures use: the audit's where it has labels (unbiased), else
    all (the flagged items are the hard ones: agreement there is lower by construction)."""
    panel_agreement: CoderAgreement
    judges: dict[str, CoderAgreement]
    alpha_with_people: Agreement
    """Krippendorff's α over the labelled items, the people as one more coder."""


class ItemCounts(Record):
    n_items: int
    n_scored: int
    """Items with at least two valid votes."""
    unanimous: int
    split: int
    """Items the judges disagreed on (in the review queue)."""
    no_majority: int
    abstentions: int


class CriterionDetail(Record):
    aggregation: Literal["micro", "macro"]
    ci: list[float] | None
    """95% bootstrap interval, resampling filings (the metric's stderr is this bootstrap's)."""
    ci_span: list[float] | None = None
    """The same, resampling spans as if independent (narrower where a filing's spans agree)."""
    items: ItemCounts
    per_judge: dict[str, Percent]
    """Each judge's own score on the items it judged."""
    without_judge: dict[str, Percent] = {}
    """The score from the other judges' votes (the same rule; `RunSettings.without_judge_rule`),
    per judge left out."""
    judge_influence: dict[str, float | None] = {}
    """Per judge, in points: the mean of the scores without each other judge minus the score
    without this one. Near 0 for exchangeable judges; positive for a judge that lifts the score
    beyond the others (lenient), negative for a strict one."""
    judge_influence_ci: dict[str, list[float] | None] = {}
    """Each judge's influence's 95% interval (the studentized filing bootstrap): the judge moves
    the score beyond chance only where it leaves 0 out (empty: written before it was computed)."""
    n_filings: int | None = None
    """The filings the interval resamples (None: written before it was recorded)."""
    ci_method: str | None = None
    """How `ci` was made: the studentized filing bootstrap (bootstrap-t). Results written before
    it: the filing bootstrap's percentiles, or under 10 filings a clustered t interval."""
    ci_reliable: bool | None = None
    """False under 12 filings: fewer than the coverage simulation showed to cover (≥ 93%)."""
    levels: dict[str, float] | None = None
    """For comprehensiveness: the score of each level (default good 1, partial 0.5, poor 0;
    a task may set others in its metric_list)."""
    level_counts: dict[str, int] | None = None
    """For comprehensiveness: how many scored spans the panel put at each level."""


class Failures(Record):
    """What failed in a task: transport failures (the server, not the model) and invalid
    outputs after retries."""

    transport_spans: int = 0
    """Spans whose extraction failed in transport (unreachable, timed out, malformed reply)."""
    invalid_spans: int = 0
    """Spans whose extraction output stayed invalid after retries (the model's failure)."""
    judge_transport_calls: int = 0
    """Judge calls that failed in transport (their items lost a vote)."""
    judge_calls_each: int = 0
    """The calls each judge of the panel was asked (all are asked the same)."""
    judge_failed_calls: dict[str, int] = {}
    """Per judge with any: its calls that failed, in transport or with invalid output after
    retries (each an abstention on the call's items)."""
    first: str = ""
    """The first failure's message."""


class Tokens(Record):
    prompt: int = 0
    completion: int = 0


class JudgeProtocol(Record):
    """How one judge's answers kept the judge protocol: a verdict first, then a justification
    of at most `REASONING_WORDS` words. Its votes count whatever these say."""

    votes: int = 0
    """Its votes (abstentions and votes given by rule left out)."""
    long_reasoning: int = 0
    """Votes whose reasoning, decoded, has more words than the protocol's 15 (split on
    whitespace)."""
    calls: int = 0
    """Its answered calls."""
    reasoning_first: int = 0
    """Answers (as accepted) in which a reasoning comes before its verdict."""


class TaskDetails(Record):
    """What a task's lm-eval metric row does not hold."""

    mode: ModeName
    metrics: list[str]
    """The metrics reported (the task's metric_list)."""
    criteria: dict[str, CriterionDetail]
    n_spans: int
    n_triples: int
    check_rules_detail: dict[str, Percent]
    failed_extractions: int
    judge_failures: int
    failures: Failures
    tokens: dict[str, Tokens]
    """`extract` and `judge`."""
    seconds: dict[str, float]
    judge_protocol: dict[str, JudgeProtocol] = {}
    """Per judge, how its answers kept the protocol (empty: written before it was checked)."""


class Overall(Record):
    """One number per run: the mean of every judged criterion of every task (mode)."""

    score: Percent
    ci: list[float] | None
    """95% bootstrap interval, resampling filings jointly for every task and criterion."""
    stderr: float | None = None
    """The same bootstrap's standard error."""
    ci_span: list[float] | None = None
    """The same, resampling spans."""
    tasks: dict[str, Percent]
    """Per task: the mean of its judged criteria."""
    without_judge: dict[str, Percent] = {}
    """The score from the other judges' votes, per judge left out."""
    judge_influence: dict[str, float | None] = {}
    """Per judge, as `CriterionDetail.judge_influence`, of Overall."""
    judge_influence_ci: dict[str, list[float] | None] = {}
    """Its interval, as `CriterionDetail.judge_influence_ci`."""
    n_filings: int | None = None
    ci_method: str | None = None
    ci_reliable: bool | None = None
    """As `CriterionDetail`'s, for Overall's interval."""
    unscored: list[str] = []
    """The judged criteria without a score (`comprehensiveness of <task>`: none of its items
    had two valid votes): then Overall is None, never a mean of the others."""


class FilingScores(Record):
    """Per filing (the bootstrap's unit): each task's judged criteria as the sums and counts
    their averages divide (items' scores and items, micro; spans' means and spans, macro).
    Runs on the same spans are compared by resampling the same filings (`leaderboard build`)."""

    ids: list[str]
    sums: dict[str, dict[str, list[float]]]
    """Per task, per criterion: one value per filing, in the order of `ids`."""
    counts: dict[str, dict[str, list[float]]]


class JudgesInfo(Record):
    panel: PlainName
    official: bool
    members: list[JudgeMember]
    seconds: dict[str, float]
    always_agree: bool = False
    """Every judge gave every scored item of every task the same label: a panel that never
    disagrees shows nothing by agreeing (α is 1 or undefined; the same model three times?)."""

    def note(self) -> str | None:
        """What a reader must know before reading the scores of a panel that is not official
        (None for an official one)."""
        if self.official:
            return None
        if self.panel == DEMO_PANEL:
            return (
                "the demo panel is a smoke test (a 270M model judging three times): its scores "
                "and agreement mean nothing about the model"
            )
        return (
            f"panel '{self.panel}' is not an official panel: its scores are not comparable "
            "with the leaderboard's official ranking"
        )


DEMO_PANEL = "demo"  # tasks/judges/demo.yaml: the offline smoke panel


class Results(FileRecord):
    """`results_<run>_<panel>.json`, shaped like lm-eval's results file (its `make_table` reads
    it), plus our own blocks: `details`, `agreement`, `judges`, `dataset`."""

    model_config = ConfigDict(populate_by_name=True)

    results: dict[str, dict[str, Any]]
    """Per task: `name`, `alias`, `sample_len`, and `<metric>,none` / `<metric>_stderr,none`
    (percent; the stderr is the bootstrap's standard deviation)."""
    groups: dict[str, dict[str, Any]] = {}
    """Per group: the unweighted mean of each metric over its tasks."""
    group_subtasks: dict[str, list[str]] = {}
    configs: dict[str, dict[str, Any]]
    versions: dict[str, Any]
    n_shot: dict[str, int] = Field(alias="n-shot")
    higher_is_better: dict[str, dict[str, bool | None]]
    n_samples: dict[str, SampleCount] = Field(alias="n-samples")
    config: RunSettings
    model_name: str
    model_name_sanitized: str
    model_source: str
    git_hash: str | None
    date: float
    """Unix time the run started (lm-eval's `date`)."""
    pretty_env_info: str | None = None
    """The environment (`Manifest.environment`), as lm-eval's lines."""
    transformers_version: str | None = None
    system_instruction: str | None = None
    system_instruction_sha: str | None = None
    fewshot_as_multiturn: bool = False
    chat_template: str | None = None
    chat_template_sha: str | None = None
    tokenizer_pad_token: list[str] | None = None
    tokenizer_eos_token: list[str] | None = None
    tokenizer_bos_token: list[str] | None = None
    eot_token_id: int | None = None
    max_length: int | None = None
    environment: Environment | None = None
    run: RunId
    """The run's id (its start time), as in the file names."""
    task_hashes: dict[str, str]
    total_evaluation_time_seconds: str
    details: dict[str, TaskDetails]
    overall: Overall
    agreement: dict[str, dict[str, Agreement]]
    """Per task and criterion."""
    filings: FilingScores | None = None
    graph: dict[str, GraphScores] = {}
    """Per task, the graph its triples make (absent where there is none)."""
    human: dict[str, dict[str, HumanCheck]] = {}
    """Per task and criterion, the panel checked against people's labels (`review import`);
    absent where the run has none."""
    judges_worth: dict[str, dict[str, JudgesWorth]] = {}
    """Per task and judged criterion, what the panel's votes are worth: its judges' error
    correlation, the effective number of judges, each judge alone against the others and,
    with people's labels, against them (absent in results written before it was computed)."""
    downstream: dict[str, DownstreamScores] = {}
    """Per downstream task (multi-hop QA over the graph its triples make), its measures;
    absent where the run has none."""
    cost: dict[str, TaskCost] = {}
    """Per task, what its model calls used and, with a price table, cost (absent in results
    written before it was counted)."""
    judges: JudgesInfo
    dataset: DatasetInfo
    finreflect_eval_version: str
    samples: dict[str, SamplesName]
    """Per task: the samples file."""

    @property
    def tasks(self) -> list[str]:
        """The tasks' names (`results` also holds the groups' rows)."""
        return list(self.details)

    @model_serializer(mode="wrap")
    def _without_empty_blocks(self, serialize: Any) -> dict[str, Any]:
        # As lm-eval writes it: no `groups` key at all in a run without a group (an empty one
        # makes lm-eval's tools print an empty Groups table); no `human` without people's labels.
        data = serialize(self)
        if not data.get("groups"):
            data.pop("groups", None)
        for block in ("graph", "human", "cost", "judges_worth", "downstream"):
            if not data.get(block):
                data.pop(block, None)
        return data

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


class ReviewItem(FileRecord):
    """One line of `review_<task>_<run>_<panel>.jsonl`: an item the panel split on, could not
    score, or had no majority for, with every judge's vote. The queue refers to its spans
    rather than repeating them: an item names its span (`span_id`, `doc_id`), whose text is
    written once, in `review_spans_<task>_<run>_<panel>.jsonl` (a `ReviewSpan` per span with
    a queued item) and in the samples (`samples_<task>_<run>.jsonl`, the line of that
    `doc_id`). Items come grouped by span, in `doc_id` order.

    `review_<task>_<run>_<panel>.csv` holds the same items, one row each, for a spreadsheet:
    `task, span_id, doc_id, criterion, triple_index, triple` (its five strings joined by
    " | "), `label, reason`, then `<judge>_verdict, <judge>_reasoning, <judge>_warning` per
    judge, and `span_text`, written on the first row of the span's items only (empty on the
    rest). A cell a spreadsheet would run as a formula (starting with `=`, `+`, `-`, `@`, a
    tab or a carriage return) starts with a `'`."""

    task: str
    span_id: str
    doc_id: int
    """The span's `doc_id`: its line of the samples, and of the review's spans file."""
    criterion: CriterionName
    triple_index: int | None
    """The triple's position in the span's triples (None: the span's item)."""
    triple: list[str] | None
    label: Label | None
    """The label taken (None: unscored)."""
    reason: str
    """Why it is queued: `split`, `unscored`, `no majority`, comma-separated."""
    votes: dict[str, Vote]


class ReviewSpan(FileRecord):
    """One line of `review_spans_<task>_<run>_<panel>.jsonl`: a span with items in the review
    queue (`ReviewItem`), once, in `doc_id` order."""

    task: str
    span_id: str
    doc_id: int
    text: str
