"""How an answer is scored: by the numbers of the gold answer it states exactly, or by the
median of the panel's valid votes; and a downstream file whose scores, methods or votes do not
follow from its questions is refused."""

import pytest
from support.multihop import qa_sample

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.chunking import token_counter
from finreflect_eval.data import load_benchmark
from finreflect_eval.downstream.graph import ModelGraph, measure
from finreflect_eval.downstream.qa import needs_judges, number_score, numbers_in, panel_score
from finreflect_eval.graph.table import triple_table
from finreflect_eval.records.downstream import Answer, DownstreamFile, QASettings, QAVote
from finreflect_eval.scoring.downstream import check_file

JUDGES = ["judge-0", "judge-1", "judge-2"]


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("fell from $131.3 million in 2023 to $17.9 million in 2024", ["131.3", "17.9"]),
        ("$(12.4) million, a 7.5% drop", ["12.4", "7.5"]),
        ("$2,015 million in fiscal 2015", ["2015"]),  # an amount, then a bare year
        ("7,661,431 shares", ["7661431"]),
        ("In 2022, SPG capitalized interest; in 2023, less detail", []),
    ],
)
def test_numbers_are_read_as_plain_decimals_and_bare_years_left_out(text, numbers):
    assert numbers_in(text) == numbers


@pytest.mark.parametrize(
    ("gold", "answer", "score"),
    [
        ("decreased by $296.6 million", "a decrease of 296.60 million dollars", 10.0),
        ("fell 7%", "fell 7.4%", 0.0),  # not the same figure at the finer precision
        ("from $39.4 million to $(12.4) million", "from 39.4 to -12.4", 10.0),
        ("$2,015 million, up 4.5%", "$1,000 million, up 4.5%", 5.0),
        ("from $131.3 million to $17.9 million", "it went down", 0.0),
    ],
)
def test_a_quantitative_answer_earns_a_share_of_ten_per_figure_stated_exactly(gold, answer, score):
    assert number_score(gold, answer)[2] == score


def test_the_panel_score_is_the_median_of_two_valid_votes_or_more():
    vote = lambda score: QAVote(judge="j", score=score)  # noqa: E731
    assert panel_score([vote(2), vote(3), vote(9)]) == 3.0
    assert panel_score([vote(3), vote(None), vote(9)]) == 6.0
    assert panel_score([vote(3), vote(None), vote(None)]) is None


@pytest.fixture(scope="module")
def answered():
    """The sample questions measured against an empty graph, every condition answered: the
    gold answer itself, scored as the question is scored."""
    sample = load_benchmark(str(qa_sample()))
    graph = ModelGraph(triple_table([]))
    settings = QASettings(
        name="q",
        model="m",
        backend="scripted",
        prompt_sha="0" * 64,
        budget_tokens=64,
        neighbourhood_hops=2,
    )
    records = [measure(q, "t", graph, 3, settings, token_counter()) for q in sample.questions]
    for record in records:
        question = record.question
        for condition in ("model_graph", "gold_path", "hop_chunks"):
            if needs_judges(question):
                votes = [QAVote(judge=j, score=10) for j in JUDGES]
                answer = Answer(
                    context_tokens=1,
                    answer=question.answer,
                    method="judges",
                    votes=votes,
                    score=10.0,
                )
            else:
                expected, found, score = number_score(question.answer, question.answer)
                answer = Answer(
                    context_tokens=1,
                    answer=question.answer,
                    method="numbers",
                    numbers_expected=expected,
                    numbers_found=found,
                    score=score,
                )
            record.answers[condition] = answer
    return graph, DownstreamFile(task="t", panel="p", qa=settings, max_hops=3, questions=records)


def test_a_file_that_follows_from_its_questions_passes(answered):
    graph, file = answered
    check_file(file, graph, JUDGES)


def _changed(file, change):
    copy = file.model_copy(deep=True)
    change(copy)
    return copy


@pytest.mark.parametrize(
    ("change", "says"),
    [
        # a qualitative question's answer scored by its numbers
        (
            lambda f: f.questions[4].answers["gold_path"].__setattr__("method", "numbers"),
            "scored by numbers, but a qualitative question is scored by judges",
        ),
        # a judge's low vote left out
        (
            lambda f: f.questions[4].answers["gold_path"].votes.pop(0),
            "not one of each of the panel's",
        ),
        # a condition left out
        (lambda f: f.questions[0].answers.pop("model_graph"), "not answered in every condition"),
        # a score that its votes do not give
        (
            lambda f: f.questions[4].answers["hop_chunks"].__setattr__("score", 9.0),
            "does not follow from its votes",
        ),
    ],
)
def test_a_file_that_does_not_follow_is_refused(answered, change, says):
    graph, file = answered
    with pytest.raises(FinReflectError, match=says):
        check_file(_changed(file, change), graph, JUDGES)
