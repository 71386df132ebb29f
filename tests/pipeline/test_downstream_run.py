"""The downstream track end to end on the command line: a downstream task extracts from the
sample questions' chunks, the stage measures and answers them (a scripted QA model, scripted
judges), `score` puts the block in the results and the summary, a rerun makes no model call,
a tampered file is refused, and the embedded model runs it on a CPU."""

import json

import pytest
import yaml
from support.multihop import qa_file, questions, task_folder

from finreflect_eval.records import Results
from finreflect_eval.records.downstream import DownstreamFile

JUDGE = "support.multihop:judge"


def panel(folder, responder=JUDGE):
    judges = [
        {
            "name": f"judge-{i}",
            "model": f"scripted-{i}",
            "backend": "scripted",
            "model_args": {"responses": responder},
        }
        for i in range(3)
    ]
    path = folder / "panel.yaml"
    path.write_text(yaml.safe_dump({"panel": "scripted-test", "judges": judges}))
    return path


def run(cli, env, folder, share="60", *extra, qa="answers_from_gold"):
    tasks = task_folder(folder / "tasks", qa=qa_file(folder / "qa", qa))
    return cli(
        *("run", "--model", "candidate", "--backend", "scripted"),
        *("--model-args", f"responses=support.multihop:extracts_share_{share}"),
        *("--tasks", "mh_test", "--include-path", str(tasks)),
        *("--judges", str(panel(folder)), "--output-path", str(folder / "out"), *extra),
        env=env,
    )


def files(folder, pattern):
    return sorted((folder / "out" / "candidate").glob(pattern))


def test_a_downstream_run_measures_answers_and_scores(cli, env, tmp_path):
    result = run(cli, env, tmp_path)
    assert result.returncode == 0, result.stderr
    [path] = files(tmp_path, "downstream_mh_test_*_scripted-test.json")
    file = DownstreamFile.model_validate_json(path.read_text())
    assert len(file.questions) == len(questions()) == 7
    [results_path] = files(tmp_path, "results_*.json")
    block = Results.model_validate_json(results_path.read_text()).downstream["mh_test"]
    by_hand = [sum(h.edge for h in r.evidence) / len(r.evidence) for r in file.questions]
    assert block.evidence_recall.value == pytest.approx(100 * sum(by_hand) / 7, abs=1e-3)
    # The QA model answers from the gold path and the hop chunks: every answer right.
    assert block.qa["gold_path"].value == block.qa["hop_chunks"].value == 100.0
    connected = [r.path.connected for r in file.questions]
    right = [r.answers["model_graph"].score == 10 for r in file.questions]
    assert block.qa["model_graph"].value == pytest.approx(100 * sum(right) / 7, abs=1e-3)
    assert all(c for c, r in zip(connected, right, strict=True) if r)  # no answer without a path
    kinds = [(r.question.kind, r.answers["gold_path"].method) for r in file.questions]
    # Four quantitative questions; the one on SPG's policy states no figure: judged.
    assert kinds.count(("quantitative", "numbers")) == 3
    assert kinds.count(("quantitative", "judges")) == 1
    assert ("qualitative", "numbers") not in kinds
    assert "downstream" in result.stdout and "evidence recall" in result.stdout


def test_a_rerun_makes_no_model_call_and_gives_the_same_file(cli, env, tmp_path):
    assert run(cli, env, tmp_path).returncode == 0
    [path] = files(tmp_path, "downstream_*.json")
    first = path.read_text()
    again = cli(
        *("downstream", "--samples", str(tmp_path / "out" / "candidate")),
        *("--judges", str(tmp_path / "panel.yaml"), "--qa", str(tmp_path / "qa" / "qa.yaml")),
        *("--include-path", str(tmp_path / "tasks")),
        env=env,
    )
    assert again.returncode == 0, again.stderr
    assert path.read_text() == first
    file = DownstreamFile.model_validate_json(first)
    answers = [a for r in file.questions for a in r.answers.values()]
    assert sum(a.usage.calls for a in answers) == 21  # the first run's; the rerun's were hits


def test_an_answer_that_failed_is_asked_again_and_the_others_kept(cli, env, tmp_path):
    log = tmp_path / "qa_calls.log"
    failing = env | {"MULTIHOP_QA_LOG": str(log), "MULTIHOP_QA_FAIL": "1"}
    assert (
        run(cli, failing, tmp_path, "60", "--no-cache", qa="answers_or_fails_first").returncode == 0
    )
    [path] = files(tmp_path, "downstream_*.json")
    first = DownstreamFile.model_validate_json(path.read_text())
    failed = [r for r in first.questions if r.answers["gold_path"].answer is None]
    assert len(failed) == 1 and failed[0].answers["gold_path"].error
    log.unlink()
    again = cli(
        *("downstream", "--samples", str(tmp_path / "out" / "candidate"), "--no-cache"),
        *("--judges", str(tmp_path / "panel.yaml"), "--qa", str(tmp_path / "qa" / "qa.yaml")),
        *("--include-path", str(tmp_path / "tasks")),
        env=env | {"MULTIHOP_QA_LOG": str(log)},
    )
    assert again.returncode == 0, again.stderr
    assert len(log.read_text().splitlines()) == 3  # the failed question's three conditions
    file = DownstreamFile.model_validate_json(path.read_text())
    assert all(a.answer is not None for r in file.questions for a in r.answers.values())
    kept = [r for r in file.questions if r.question != failed[0].question]
    assert kept == [r for r in first.questions if r.question != failed[0].question]


def test_a_tampered_downstream_file_is_refused_at_scoring(cli, env, tmp_path):
    assert run(cli, env, tmp_path).returncode == 0
    [path] = files(tmp_path, "downstream_*.json")
    data = json.loads(path.read_text())
    data["questions"][0]["path"] = {"connected": True, "length": 1, "nodes": ["a", "b"]}
    path.write_text(json.dumps(data))
    scored = cli("score", "--samples", str(tmp_path / "out" / "candidate"), env=env)
    assert scored.returncode != 0
    line = scored.stderr.strip().splitlines()[-1]
    assert "downstream file of task mh_test" in line and "does not follow" in line


@pytest.mark.slow
def test_the_embedded_model_extracts_for_the_downstream_track(cli, env, tmp_path):
    """The real model (Gemma 3 270M on the CPU) extracts from two questions' chunks; the QA
    model and judges are scripted. Its graph is whatever it is: the measures must follow."""
    tasks = task_folder(tmp_path / "tasks", qa=qa_file(tmp_path / "qa"))
    config = yaml.safe_load((tasks / "mh_test.yaml").read_text())
    config |= {"max_triples": 3, "generation_kwargs": {"max_gen_toks": 256, "temperature": 0.0}}
    (tasks / "mh_test.yaml").write_text(yaml.safe_dump(config))
    result = cli(
        *("run", "--model", "gemma-3-270m", "--tasks", "mh_test"),
        *("--include-path", str(tasks), "--limit", "1", "--judges", str(panel(tmp_path))),
        *("--output-path", str(tmp_path / "out")),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    [path] = sorted((tmp_path / "out" / "gemma-3-270m").glob("downstream_*.json"))
    file = DownstreamFile.model_validate_json(path.read_text())
    # --limit 1: the first span, AMT's page 130 chunk 2, holds both hops of two questions
    assert len(file.questions) == 2
    assert all(len(r.answers) == 3 for r in file.questions)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda data: data["questions"].pop(0), "is the hop of no question in it"),
        (
            lambda data: data["questions"][0]["question"]["hops"][0].update(tail="Something"),
            "is not a reference triple of span",
        ),
    ],
)
def test_a_question_taken_away_or_changed_is_refused(cli, env, tmp_path, change, says):
    assert run(cli, env, tmp_path).returncode == 0
    [path] = files(tmp_path, "downstream_*.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    scored = cli("score", "--samples", str(tmp_path / "out" / "candidate"), env=env)
    assert scored.returncode != 0
    assert says in scored.stderr.strip().splitlines()[-1]


def test_run_check_plans_the_qa_model_and_refuses_a_broken_one(cli, env, tmp_path):
    tasks = task_folder(tmp_path / "tasks", qa=qa_file(tmp_path / "qa"))
    args = ("run", "--model", "candidate", "--backend", "scripted", "--tasks", "mh_test")
    args += ("--include-path", str(tasks), "--judges", str(panel(tmp_path)), "--check")
    planned = cli(*args, env=env)
    assert planned.returncode == 0, planned.stderr
    assert "QA model scripted-qa" in planned.stdout
    qa = tmp_path / "qa" / "qa.yaml"
    qa.write_text(qa.read_text().replace("budget_tokens: 1024", "budget_tokens: 5"))
    refused = cli(*args, env=env)
    assert refused.returncode != 0
    assert "field 'downstream.qa'" in refused.stdout + refused.stderr
    assert "budget_tokens" in refused.stdout + refused.stderr
