"""Every statistic a run publishes, read from its results file, against a computation written
here from the run's samples (each item's votes, each span's filing): a wrong number in the
statistics fails one of these tests.

The scripted judges below answer from hashes of the items, so the run has everything that can
go wrong: scores that vary by filing (intervals by filing wider than by span), three tasks and
four criteria that differ, micro and macro averages that differ, split votes, abstentions,
three comprehensiveness levels, and a judge more lenient than the others.

The bootstraps are re-implemented from their specification (`finreflect_eval.stats.uncertainty`:
numpy's `default_rng(seed).integers` draws of the units with replacement, the 2.5 and 97.5
percentiles, the standard deviation with ddof=1), so they agree with the published numbers to
their rounding; α comes from the `krippendorff` package, t quantiles from scipy.
"""

import functools
import hashlib
import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass

import krippendorff
import numpy as np
import pytest
from scipy import stats

from finreflect_eval.data import load_benchmark
from finreflect_eval.leaderboard import submit
from finreflect_eval.models import ModelSpec
from finreflect_eval.pipeline.evaluator import evaluate
from finreflect_eval.pipeline.judging import Panel
from finreflect_eval.pipeline.run_config import RunConfig
from finreflect_eval.records import Results

GROUP = "finreflect_smoke"
TASK = "finreflect_smoke_single_pass"
MICRO = ("faithfulness", "precision", "relevance")  # over triples; comprehensiveness over spans
SCORE = {0: 0.0, 1: 1.0, "poor": 0.0, "partial": 0.5, "good": 1.0}
LEVELS = ["poor", "partial", "good"]  # comprehensiveness, in order
SEED = 7  # the run's seed, so the bootstrap's is not the default one
PUBLISHED = 1.01e-4  # numbers are published rounded to 4 decimals
NOISY = ("lenient", "middling", "strict")


# --- the scripted candidates and judges of the runs ---


def _draw(*key):
    """A number in [0, 1) fixed by `key` (the same in every process)."""
    digest = hashlib.sha256("|".join(map(str, key)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@functools.cache
def _reference_triples():
    """The bundled sample's spans: each one's text and reference triples."""
    sample = load_benchmark("sample", split="test")
    triples = sample.triples_by_span()
    return [(s.text, [t.triple.model_dump() for t in triples[s.span_id]]) for s in sample.spans]


def _some_reference_triples(request, salt):
    """The span's reference triples (as many as the schema allows), the first and about 60%
    of the others, chosen by the request (each mode's prompts keep different ones); a
    reflection critic finds nothing to fix."""
    properties = request.schema["properties"]
    if "feedback" in properties:
        return json.dumps({"feedback": []})
    user, key = request.messages[-1]["content"], json.dumps(request.messages)
    found = next(triples for text, triples in _reference_triples() if f"Text:\n{text}" in user)
    found = found[: properties["triples"].get("maxItems", 40)]
    kept = [t for i, t in enumerate(found) if i == 0 or _draw(salt, key, i) < 0.6]
    return json.dumps({"triples": kept})


def candidate(request):
    return _some_reference_triples(request, "candidate")


def rival(request):
    return _some_reference_triples(request, "rival")


def _judge(request, salt, lean, fails=0.0):
    """Verdicts from an item's quality (its filing's, and its own: shared by every judge), the
    judge's own view of it and its `lean`; invalid output (an abstention) on `fails` of calls."""
    user = request.messages[-1]["content"]
    if _draw(salt, "fails", user) < fails:
        return "not json"
    criterion = re.search(r"Criterion: ([A-Z]+)\.", user).group(1)
    ticker = re.search(r"Company ticker: (\S+)", user).group(1)

    def value(item):
        shared = 0.5 * (_draw("filing", ticker) - 0.5) + 0.6 * _draw(criterion, ticker, item)
        return shared + 0.4 * _draw(salt, criterion, ticker, item) + lean

    verdicts = request.schema["properties"].get("verdicts")
    if verdicts:
        listed = user.split("Triples:\n", 1)[1].splitlines()[: verdicts["minItems"]]
        items = [
            {"verdict": int(value(line) > 0.5), "reasoning": salt, "warning": ""} for line in listed
        ]
        return json.dumps({"verdicts": items})
    v = value(user)
    level = "good" if v > 0.6 else "partial" if v > 0.35 else "poor"
    return json.dumps({"verdict": level, "reasoning": salt, "warning": ""})


def lenient(request):
    return _judge(request, "lenient", 0.1)


def middling(request):
    return _judge(request, "middling", 0.0, fails=0.1)


def strict(request):
    return _judge(request, "strict", -0.1)


def _run(folder, model, tasks, responders, answer="candidate", samples=None, seed=None):
    """A scored run of scripted models on the bundled sample; its results file."""
    module = __name__  # the responders above, as the panel names them
    judges = [
        {
            "name": name if name in NOISY else f"judge-{number}",
            "model": "scripted",
            "backend": "scripted",
            "model_args": {"responses": f"{module}:{name}" if name in NOISY else name},
        }
        for number, name in enumerate(responders)
    ]
    config = RunConfig(
        model=ModelSpec(model, "scripted", {"responses": f"{module}:{answer}"}),
        tasks=list(tasks),
        dataset="sample",
        samples=samples,
        output_path=folder / "out",
        cache=None,
        seed=seed,
    )
    run, results = evaluate(config, Panel(panel="scripted-test", judges=judges))
    return run.store.results_path(results.run, results.judges.panel)


# --- the run as published, and its items as its samples hold them ---


@dataclass(frozen=True)
class Item:
    """A triple on one criterion, or a span on comprehensiveness, with every judge's vote."""

    span: str
    filing: str
    labels: tuple  # one per judge (None: no valid vote)
    synthetic: bool


def majority(labels):
    """The panel's rule (docs/judges.md), written out: the label more than half of the valid
    votes give; without one, the lowest; unscored (None) under two valid votes."""
    valid = [label for label in labels if label is not None]
    if len(valid) < 2:
        return None
    label, top = Counter(valid).most_common(1)[0]
    return SCORE[label] if 2 * top > len(valid) else min(SCORE[v] for v in valid)


class Published:
    """A run's results file, and per task and criterion the items of its samples."""

    def __init__(self, path):
        self.results = Results.model_validate_json(path.read_text())
        self.judges = [member.name for member in self.results.judges.members]
        self.items = {}
        spans = {}  # every span of the run, in order, with its filing
        for task in self.results.tasks:
            lines = (path.parent / self.results.samples[task]).read_text().splitlines()
            records = sorted(map(json.loads, lines), key=lambda record: record["doc_id"])
            by_criterion = self.items[task] = {}
            for record in records:
                filing = f"{record['doc']['ticker']}_{record['doc']['fiscal_year']}"
                spans.setdefault(record["span_id"], filing)
                cast = record["votes"][self.results.judges.panel]
                for criterion, votes in cast.items():
                    mine = [votes.get(judge, []) for judge in self.judges]
                    for index in range(max(map(len, mine))):
                        at = [v[index] if index < len(v) else None for v in mine]
                        by_criterion.setdefault(criterion, []).append(
                            Item(
                                record["span_id"],
                                filing,
                                tuple(vote and vote["verdict"] for vote in at),
                                all(vote and vote["synthetic"] for vote in at),
                            )
                        )
        self.spans = list(spans)
        self.filings = list(dict.fromkeys(spans.values()))
        self.columns = [
            (t, c) for t in self.results.tasks for c in self.results.details[t].criteria
        ]

    def per_span(self, task, criterion, decide=majority):
        """Each span's filing and its scored items' scores (the item's votes decided by
        `decide`)."""
        spans = {}
        for item in self.items[task][criterion]:
            score = decide(item.labels)
            if score is not None:
                spans.setdefault(item.span, (item.filing, []))[1].append(score)
        return spans

    def score(self, task, criterion, decide=majority):
        """×100: the mean over triples (micro), or over spans of each span's mean (macro)."""
        spans = self.per_span(task, criterion, decide).values()
        if criterion in MICRO:
            return 100 * np.mean([s for _, scores in spans for s in scores])
        return 100 * np.mean([np.mean(scores) for _, scores in spans])

    def table(self, by="filing"):
        """Per unit (filing or span, in the run's order) and column: what the average sums
        and what it divides by."""
        units = self.filings if by == "filing" else self.spans
        sums = np.zeros((len(units), len(self.columns)))
        counts = np.zeros_like(sums)
        for column, (task, criterion) in enumerate(self.columns):
            for span, (filing, scores) in self.per_span(task, criterion).items():
                row = units.index(filing if by == "filing" else span)
                micro = criterion in MICRO
                sums[row, column] += sum(scores) if micro else np.mean(scores)
                counts[row, column] += len(scores) if micro else 1
        return sums, counts

    def draws(self, units):
        """How often each bootstrap replicate draws each of `units` units (the package draws
        units × replicates at once when they fit in its block, 2**22, as here)."""
        config = self.results.config
        picks = np.random.default_rng(config.bootstrap_seed).integers(
            0, units, size=(config.bootstrap_iters, units)
        )
        return np.array([np.bincount(row, minlength=units) for row in picks], dtype=float)

    def replicates(self, by="filing"):
        """Each replicate's average of each column (NaN where it drew nothing to divide by)."""
        sums, counts = self.table(by)
        weights = self.draws(len(sums))
        drawn_sums, drawn_counts = weights @ sums, weights @ counts
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(drawn_counts > 0, drawn_sums / drawn_counts, np.nan)

    def indices(self, tasks=None, criterion=None):
        """The columns of some tasks, or of one criterion."""
        return [
            i
            for i, (t, c) in enumerate(self.columns)
            if (tasks is None or t in tasks) and (criterion is None or c == criterion)
        ]


def bootstrap_interval(replicates):
    """×100: the percentile interval and the standard deviation of the defined replicates."""
    defined = replicates[~np.isnan(replicates)]
    low, high = np.quantile(defined, [0.025, 0.975])
    return [100 * float(low), 100 * float(high)], 100 * float(np.std(defined, ddof=1))


def mean_over(replicates, columns):
    """Each replicate's mean of some columns (those defined in it)."""
    return np.nanmean(replicates[:, columns], axis=1)


def bootstrap_t(run, columns):
    """×100: the studentized filing interval of the mean of some columns (cut to 0-100) and
    its clustered standard error, written out replicate by replicate: each one's mean of
    ratios, its own clustered standard error, the pivot's 2.5 and 97.5 percentiles; at least
    Student's t interval (G-1 degrees of freedom)."""
    sums, counts = run.table()
    sums, counts = sums[:, columns], counts[:, columns]
    filings = len(sums)

    def mean_and_stderr(weights):
        drawn_sums, drawn_counts = weights @ sums, weights @ counts
        parts = [p for p in range(len(columns)) if drawn_counts[p] > 0]
        ratios = [drawn_sums[p] / drawn_counts[p] for p in parts]
        each = [
            (sums[:, p] - r * counts[:, p]) / drawn_counts[p]
            for p, r in zip(parts, ratios, strict=True)
        ]
        contribution = np.mean(each, axis=0)
        return np.mean(ratios), np.sqrt(filings / (filings - 1) * weights @ contribution**2)

    estimate, stderr = mean_and_stderr(np.ones(filings))
    pivots = []
    for weights in run.draws(filings):
        mean, spread = mean_and_stderr(weights)
        if spread > 1e-9 * stderr:  # (rounding's spread of one filing drawn again and again)
            pivots.append((mean - estimate) / spread)
    low, high = np.quantile(pivots, [0.025, 0.975])
    student = stats.t.ppf(0.975, filings - 1) * stderr  # never narrower than Student's t
    low, high = (
        min(estimate - high * stderr, estimate - student),
        max(estimate - low * stderr, estimate + student),
    )
    return [100 * max(low, 0), 100 * min(high, 1)], 100 * stderr


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The smoke group (three tasks) on the sample's 24 spans of 10 filings, judged by the
    three noisy judges."""
    folder = tmp_path_factory.mktemp("published")
    return Published(_run(folder, "candidate", [GROUP], NOISY, seed=SEED))


def test_the_per_filing_table_is_the_samples_sums_and_counts(run):
    """`results.filings` is what the leaderboard compares runs on: each filing's sums and
    counts must be the samples' (and the run's filings, in order of their first span)."""
    filings = run.results.filings
    assert filings.ids == run.filings and len(run.filings) == 10
    sums, counts = run.table()
    for column, (task, criterion) in enumerate(run.columns):
        assert filings.sums[task][criterion] == pytest.approx(sums[:, column].tolist(), abs=1e-6)
        assert filings.counts[task][criterion] == pytest.approx(
            counts[:, column].tolist(), abs=1e-6
        )


def test_scores_are_micro_over_triples_and_macro_over_spans(run):
    """Faithfulness, precision and relevance average every triple; comprehensiveness averages
    each span's mean (here the two differ on every triple criterion, so a swap shows)."""
    for task, criterion in run.columns:
        expected = run.score(task, criterion)
        assert run.results.results[task][f"{criterion},none"] == pytest.approx(
            expected, abs=PUBLISHED
        ), (task, criterion)
        assert run.results.details[task].criteria[criterion].aggregation == (
            "micro" if criterion in MICRO else "macro"
        )
        if criterion in MICRO:  # the span-weighted mean is another number
            spans = run.per_span(task, criterion).values()
            macro = 100 * np.mean([np.mean(scores) for _, scores in spans])
            assert abs(macro - expected) > 0.1


def test_each_criterions_interval_and_stderr_are_the_filing_bootstrap_t(run):
    """`ci` is the studentized bootstrap of filings (each with its spans), with the run's
    recorded seed and iterations; `<c>_stderr,none` the clustered standard error it uses.
    Ten filings: under the 12 from which the interval covered in simulation, so unreliable."""
    for column, (task, criterion) in enumerate(run.columns):
        detail = run.results.details[task].criteria[criterion]
        ci, stderr = bootstrap_t(run, [column])
        assert detail.ci == pytest.approx(ci, abs=PUBLISHED), (task, criterion)
        assert run.results.results[task][f"{criterion}_stderr,none"] == pytest.approx(
            stderr, abs=PUBLISHED
        ), (task, criterion)
        assert (detail.n_filings, detail.ci_method, detail.ci_reliable) == (
            10,
            "filing bootstrap-t (studentized)",
            False,
        )


def test_the_span_intervals_resample_spans(run):
    """`ci_span` (each criterion's and Overall's) resamples spans as if independent, with the
    same seed: narrower than the filing interval where a filing's spans agree, as here."""
    replicates = run.replicates("span")
    for column, (task, criterion) in enumerate(run.columns):
        ci, _ = bootstrap_interval(replicates[:, column])
        assert run.results.details[task].criteria[criterion].ci_span == pytest.approx(
            ci, abs=PUBLISHED
        ), (task, criterion)
    ci, _ = bootstrap_interval(mean_over(replicates, run.indices()))
    assert run.results.overall.ci_span == pytest.approx(ci, abs=PUBLISHED)
    (span_low, span_high), (low, high) = run.results.overall.ci_span, run.results.overall.ci
    assert span_high - span_low < high - low


def _value_counts(items, values):
    """Per item (judged, not given by rule), how many of its valid votes give each value."""
    judged = [item for item in items if not item.synthetic]
    counts = np.array([[item.labels.count(v) for v in values] for item in judged], dtype=float)
    return judged, counts


def _values(criterion):
    return LEVELS if criterion == "comprehensiveness" else [0, 1]


def test_alpha_is_the_krippendorff_packages(run):
    """Nominal α on every criterion, and the ordinal α of comprehensiveness's three ordered
    levels, are the `krippendorff` package's from the votes (an abstention is a missing
    value)."""
    for task, criterion in run.columns:
        values = _values(criterion)
        judged, _ = _value_counts(run.items[task][criterion], values)
        data = np.array(
            [[np.nan if v is None else values.index(v) for v in item.labels] for item in judged]
        ).T
        published = run.results.agreement[task][criterion]
        nominal = krippendorff.alpha(data, level_of_measurement="nominal")
        assert published.alpha == pytest.approx(nominal, abs=PUBLISHED), (task, criterion)
        if criterion == "comprehensiveness":
            ordinal = krippendorff.alpha(
                data, value_domain=range(len(values)), level_of_measurement="ordinal"
            )
            assert published.ordinal == pytest.approx(ordinal, abs=PUBLISHED), task
            assert abs(ordinal - nominal) > 0.01  # the levels' order counts here
        else:
            assert published.ordinal is None


def test_alpha_intervals_recompute_alpha_on_the_scores_filing_resamples(run):
    """α's interval (and the ordinal α's) are the percentiles of α recomputed on each
    replicate of the scores' filing bootstrap: a filing drawn k times brings its items k
    times (by the `krippendorff` package, from value counts)."""
    weights = run.draws(len(run.filings))
    for task, criterion in run.columns:
        judged, counts = _value_counts(run.items[task][criterion], _values(criterion))
        rows = np.array([run.filings.index(item.filing) for item in judged])
        published = run.results.agreement[task][criterion]
        intervals = {"nominal": published.ci}
        if criterion == "comprehensiveness":
            intervals["ordinal"] = published.ordinal_ci
        for level, interval in intervals.items():
            replicates = []
            for drawn in weights[:, rows].astype(int):
                with np.errstate(all="ignore"):
                    value = krippendorff.alpha(
                        value_counts=np.repeat(counts, drawn, axis=0), level_of_measurement=level
                    )
                replicates.append(value if np.isfinite(value) else np.nan)
            replicates = np.array(replicates)
            expected = np.quantile(replicates[~np.isnan(replicates)], [0.025, 0.975]).tolist()
            assert interval == pytest.approx(expected, abs=PUBLISHED), (task, criterion, level)
        # The gate flags a criterion whose interval lies wholly under Krippendorff's 0.667.
        assert published.below_gate == (published.ci[1] < 0.667), (task, criterion)


def test_group_rows_are_one_filing_bootstrap_of_all_their_tasks(run):
    """A group's `<c>,none` is the mean of its tasks'; its `<c>_stderr,none` and
    `overall_stderr,none` come from resampling the filings once for all its tasks together
    (their spans are the same filings), not lm-eval's pooled formula for independent tasks."""
    group = run.results.groups[GROUP]
    tasks = run.results.group_subtasks[GROUP]
    assert sorted(tasks) == sorted(run.results.tasks) and len(tasks) == 3
    for criterion in run.results.details[TASK].criteria:
        mean = np.mean([run.score(task, criterion) for task in tasks])
        assert group[f"{criterion},none"] == pytest.approx(mean, abs=2 * PUBLISHED), criterion
        _, stderr = bootstrap_t(run, run.indices(tasks, criterion))
        assert group[f"{criterion}_stderr,none"] == pytest.approx(stderr, abs=PUBLISHED)
        pooled = np.sqrt(
            sum(run.results.results[t][f"{criterion}_stderr,none"] ** 2 for t in tasks)
        )
        assert pooled / 3 < 0.9 * stderr  # what a pooled formula would have published
    overall = np.mean([run.score(t, c) for t, c in run.columns if t in tasks])
    _, stderr = bootstrap_t(run, run.indices(tasks))
    assert group["overall,none"] == pytest.approx(overall, abs=PUBLISHED)
    assert group["overall_stderr,none"] == pytest.approx(stderr, abs=PUBLISHED)


def test_overall_is_the_mean_of_every_criterion_with_one_joint_interval(run):
    """Overall is the mean of every task's criteria (and per task of its own), its interval
    and stderr from the same filing replicates as the criteria (studentized)."""
    overall = run.results.overall
    assert overall.score == pytest.approx(
        np.mean([run.score(t, c) for t, c in run.columns]), abs=PUBLISHED
    )
    for task in run.results.tasks:
        mean = np.mean([run.score(task, c) for t, c in run.columns if t == task])
        assert overall.tasks[task] == pytest.approx(mean, abs=PUBLISHED), task
    ci, stderr = bootstrap_t(run, run.indices())
    assert overall.ci == pytest.approx(ci, abs=PUBLISHED)
    assert overall.stderr == pytest.approx(stderr, abs=PUBLISHED)
    assert (overall.n_filings, overall.ci_method, overall.ci_reliable) == (
        10,
        "filing bootstrap-t (studentized)",
        False,
    )


def _without(judge):
    """The panel's rule with one judge's vote left out (two that split 1-1: the lower label)."""

    def decide(labels):
        return majority(labels[:judge] + labels[judge + 1 :])

    return decide


def _own(judge):
    """One judge's vote alone (`per_judge`)."""

    def decide(labels):
        label = labels[judge]
        return None if label is None else SCORE[label]

    return decide


def test_scores_without_each_judge_and_each_judges_influence(run):
    """`without_judge` rescores from the other two judges' votes (a 1-1 split takes the lower
    label); `judge_influence` is the mean of the other judges' `without_judge` minus the
    judge's own, per criterion and for Overall; `per_judge` scores each judge alone."""
    without = {j: {} for j in run.judges}
    for task, criterion in run.columns:
        detail = run.results.details[task].criteria[criterion]
        for number, judge in enumerate(run.judges):
            without[judge][task, criterion] = run.score(task, criterion, _without(number))
            own = run.score(task, criterion, _own(number))
            assert detail.without_judge[judge] == pytest.approx(
                without[judge][task, criterion], abs=PUBLISHED
            ), (task, criterion, judge)
            assert detail.per_judge[judge] == pytest.approx(own, abs=PUBLISHED)
        for judge in run.judges:
            others = np.mean([without[j][task, criterion] for j in run.judges if j != judge])
            influence = others - without[judge][task, criterion]
            assert detail.judge_influence[judge] == pytest.approx(influence, abs=3 * PUBLISHED)
    overall = {judge: np.mean(list(without[judge].values())) for judge in run.judges}
    for judge in run.judges:
        assert run.results.overall.without_judge[judge] == pytest.approx(
            overall[judge], abs=2 * PUBLISHED
        )
        others = np.mean([overall[j] for j in run.judges if j != judge])
        assert run.results.overall.judge_influence[judge] == pytest.approx(
            others - overall[judge], abs=4 * PUBLISHED
        )
    assert run.results.overall.judge_influence["lenient"] > 1  # it lifts the score


@pytest.fixture(scope="module")
def few(tmp_path_factory):
    """One task on the spans of five filings (two or three spans each)."""
    folder = tmp_path_factory.mktemp("few")
    tickers = ("AAPL", "BA", "CAT", "JNJ", "JPM")
    spans = [s.span_id for s in load_benchmark("sample").spans if s.ticker in tickers]
    return Published(_run(folder, "candidate", [TASK], NOISY, samples={TASK: spans}))


def contributions(sums, counts):
    """Each filing's linearised contribution to a mean of ratios of sums (filings × parts):
    its sums less the ratio times its counts, over the total counts, averaged over the parts."""
    ratio = sums.sum(axis=0) / counts.sum(axis=0)
    return ((sums - ratio * counts) / counts.sum(axis=0)).mean(axis=1)


def clustered_stderr(contribution):
    """The cluster-robust standard error: √(G/(G-1) × the sum of squared contributions)."""
    filings = len(contribution)
    return np.sqrt(filings / (filings - 1) * np.sum(contribution**2))


def test_with_five_filings_the_interval_is_the_bootstrap_t_marked_unreliable(few):
    """Five filings: the studentized bootstrap still makes the interval (a percentile one
    would only reshuffle five numbers), marked unreliable (under 12 filings)."""
    assert len(few.filings) == 5 and len(few.spans) > 5
    for column, (task, criterion) in enumerate(few.columns):
        detail = few.results.details[task].criteria[criterion]
        ci, stderr = bootstrap_t(few, [column])
        assert detail.ci == pytest.approx(ci, abs=PUBLISHED), criterion
        assert few.results.results[task][f"{criterion}_stderr,none"] == pytest.approx(
            stderr, abs=PUBLISHED
        )
        assert (detail.n_filings, detail.ci_reliable) == (5, False)
        assert detail.ci_method == "filing bootstrap-t (studentized)"
    ci, stderr = bootstrap_t(few, few.indices())
    overall = few.results.overall
    assert overall.ci == pytest.approx(ci, abs=PUBLISHED)
    assert overall.stderr == pytest.approx(stderr, abs=PUBLISHED)
    assert (overall.n_filings, overall.ci_reliable) == (5, False)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A leaderboard of three runs of one task on the whole sample: two close ones (the same
    judges, candidates keeping different triples) and one every judge accepts."""
    root = tmp_path_factory.mktemp("board")
    settings = {
        "acme/kg-a": (NOISY, "candidate"),
        "acme/kg-b": (NOISY, "rival"),
        "acme/kg-c": (("support.scripted_judges:accepts_all",) * 3, "candidate"),
    }
    runs = {}
    for number, (model, (judges, answer)) in enumerate(settings.items()):
        path = _run(root / str(number), model, [TASK], judges, answer=answer)
        submit(path, root / "board")
        runs[model] = Published(path)
    rows = json.loads((root / "board" / "leaderboard.json").read_text())
    return runs, rows


def test_leaderboard_differences_and_rank_ranges_are_simultaneous_paired_intervals(board):
    """Each published difference's interval is the paired difference ± t × its
    filing-clustered standard error (factor G/(G-1)), t with G-1 df at a Bonferroni level over
    the 3 pairs; two entries are tied when it holds 0, and the rank ranges follow."""
    runs, rows = board
    models = [row["model"] for row in rows]
    assert sorted(models) == sorted(runs) and {row["group_size"] for row in rows} == {3}
    assert all(run.filings == runs[models[0]].filings for run in runs.values())
    scores = {m: np.mean([run.score(t, c) for t, c in run.columns]) for m, run in runs.items()}
    overall = {model: 100 * contributions(*run.table()) for model, run in runs.items()}
    filings = len(runs[models[0]].filings)
    critical = stats.t.ppf(1 - 0.05 / (2 * 3), filings - 1)

    def difference(a, b):
        half = critical * clustered_stderr(overall[a] - overall[b])
        return scores[a] - scores[b], [scores[a] - scores[b] - half, scores[a] - scores[b] + half]

    for row, below in itertools.pairwise(rows):
        lead, ci = difference(row["model"], below["model"])
        assert row["next_difference"] == pytest.approx(lead, abs=0.01), row["model"]
        assert row["next_difference_ci"] == pytest.approx(ci, abs=0.01), row["model"]
    assert rows[-1]["next_difference"] is None
    ties = set()
    for row in rows:
        a = row["model"]
        tied = [
            b for b in models if b != a and difference(a, b)[1][0] <= 0 <= difference(a, b)[1][1]
        ]
        apart = [b for b in models if b != a and b not in tied]
        best = 1 + len([b for b in apart if scores[b] > scores[a]])
        worst = len(models) - len([b for b in apart if scores[b] < scores[a]])
        assert (row["rank_range"], row["tied_with"]) == ([best, worst], tied), a
        ties.update(frozenset((a, b)) for b in tied)
    assert 0 < len(ties) < 3  # some pairs tied and some apart: both calls are checked


def _studentized(run, sums, counts, coefficients):
    """×100: a combination of ratios' studentized filing interval, replicate by replicate."""
    filings = len(sums)

    def value_and_stderr(weights):
        drawn_sums, drawn_counts = weights @ sums, weights @ counts
        ratios = drawn_sums / drawn_counts
        each = (sums - ratios * counts) / drawn_counts * coefficients
        contribution = each.sum(axis=1)
        spread = np.sqrt(filings / (filings - 1) * weights @ contribution**2)
        return coefficients @ ratios, spread

    estimate, stderr = value_and_stderr(np.ones(filings))
    pivots = [
        (v - estimate) / s
        for v, s in map(value_and_stderr, run.draws(filings))
        if s > 1e-9 * stderr
    ]
    low, high = np.quantile(pivots, [0.025, 0.975])
    student = stats.t.ppf(0.975, filings - 1) * stderr
    low, high = (
        min(estimate - high * stderr, estimate - student),
        max(estimate - low * stderr, estimate + student),
    )
    return [100 * low, 100 * high]


def _without_table(run, task, criterion, judge):
    """Per filing, the sums and counts of the score without one judge."""
    sums, counts = np.zeros(len(run.filings)), np.zeros(len(run.filings))
    for filing, scores in run.per_span(task, criterion, _without(judge)).values():
        row = run.filings.index(filing)
        micro = criterion in MICRO
        sums[row] += sum(scores) if micro else np.mean(scores)
        counts[row] += len(scores) if micro else 1
    return sums, counts


def test_each_judges_influence_has_its_filing_interval(run):
    """`judge_influence_ci`: the influence (mean of the others' scores without them, minus the
    score without this judge) as a combination of the left-out scores' ratios, its studentized
    filing interval written out here; for Overall, over every criterion. The lenient judge
    moves Overall beyond chance; the summary says which judges do."""
    k = len(run.judges)
    tables = {
        column: [_without_table(run, *column, judge) for judge in range(k)]
        for column in run.columns
    }

    def interval(columns, judge):
        sums = np.column_stack([tables[c][j][0] for c in columns for j in range(k)])
        counts = np.column_stack([tables[c][j][1] for c in columns for j in range(k)])
        weights = np.full(k, 1 / (k - 1))
        weights[judge] = -1
        return _studentized(run, sums, counts, np.tile(weights, len(columns)) / len(columns))

    for task, criterion in run.columns:
        detail = run.results.details[task].criteria[criterion]
        for number, judge in enumerate(run.judges):
            expected = interval([(task, criterion)], number)
            assert detail.judge_influence_ci[judge] == pytest.approx(expected, abs=PUBLISHED)
    for number, judge in enumerate(run.judges):
        expected = interval(run.columns, number)
        assert run.results.overall.judge_influence_ci[judge] == pytest.approx(
            expected, abs=PUBLISHED
        )
    assert run.results.overall.judge_influence_ci["lenient"][0] > 0
