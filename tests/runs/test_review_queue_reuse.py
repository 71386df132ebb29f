"""`score` writes a task's review queue only when it is not on disk as the same samples made it:
scoring a run again leaves its queue files alone (at the benchmark's size, writing them took
longer than scoring), and rewrites them whenever the samples, or the files, changed."""

import os

from support.runs import panel_file, scripted_run

from finreflect_eval.pipeline import evaluator
from finreflect_eval.review import queue as review
from finreflect_eval.runs.store import SCORE_INDEX, RunStore

TASKS = ("finreflect_smoke_single_pass", "finreflect_smoke_reflection")


def queue_files(folder):
    return {path.name: path.stat().st_mtime_ns for path in sorted(folder.glob("review_*"))}


def score_again(folder, monkeypatch):
    """Score the run as `finreflect-eval score` does; the tasks whose queue was built."""
    built = []
    real = review.review_queue

    def counted(span_facts, votes):
        built.extend(span_facts)
        return real(span_facts, votes)

    monkeypatch.setattr(review, "review_queue", counted)
    evaluator.score(RunStore(folder).load(for_scoring=True))
    return built


def test_scoring_again_leaves_an_unchanged_queue_alone_and_rewrites_a_changed_one(
    tmp_path, monkeypatch
):
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", "accepts_all")
    folder = scripted_run(tmp_path, "acme/kg-7b", 3, panel, TASKS).parent
    written = queue_files(folder)
    assert len(written) == 3 * len(TASKS)
    contents = {name: (folder / name).read_bytes() for name in written}
    results = next(folder.glob("results_*.json"))
    results.unlink()

    assert score_again(folder, monkeypatch) == []
    assert queue_files(folder) == written and results.exists()

    # A queue file edited, or removed: that task's queue is written again, as it was.
    csv_file = next(folder.glob("review_finreflect_smoke_reflection_*.csv"))
    csv_file.write_text("edited")
    spans_file = next(folder.glob("review_spans_finreflect_smoke_single_pass_*.jsonl"))
    spans_file.unlink()
    assert sorted(score_again(folder, monkeypatch)) == sorted(TASKS)
    assert {name: (folder / name).read_bytes() for name in written} == contents

    # One task's samples changed (a new time): its queue is built again, the other's is not.
    store = RunStore(folder)
    samples = store.samples_path(store.load().manifest, TASKS[0])
    stat = samples.stat()
    os.utime(samples, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert score_again(folder, monkeypatch) == [TASKS[0]]
    assert score_again(folder, monkeypatch) == []

    # A stamp that is not ours (a hostile folder) is not believed: the queue is written.
    for stamp in (folder / SCORE_INDEX).glob("*.queue.*"):
        stamp.write_text("{not json")
    assert sorted(score_again(folder, monkeypatch)) == sorted(TASKS)
    assert score_again(folder, monkeypatch) == []
