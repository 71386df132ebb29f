"""`score` writes a task's review queue only when it is not on disk as the same samples made it:
scoring a run again leaves its queue files alone (at the benchmark's size, writing them took
longer than scoring), and rewrites them whenever the samples, or the files, changed."""

import os
import shutil

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

    # A stamp that is not ours (a hostile folder) is not believed: the queue is written. Nor
    # is a pipe where a stamp would be (reading it would wait for ever).
    index = folder / SCORE_INDEX
    stamps = [
        max(index.glob(f"*{task}*.queue.*"), key=lambda path: path.stat().st_mtime_ns)
        for task in TASKS
    ]
    stamps[0].write_text("{not json")
    stamps[1].unlink()
    os.mkfifo(stamps[1])
    assert sorted(score_again(folder, monkeypatch)) == sorted(TASKS)
    assert score_again(folder, monkeypatch) == []

    # A run folder copied from elsewhere with its times (cp -a, tar, rsync), its stamps and a
    # queue file of its own: the queues are written here.
    copied = tmp_path / "copied"
    shutil.copytree(folder, copied, copy_function=shutil.copy2)
    planted = next(copied.glob("review_finreflect_smoke_reflection_*.csv"))
    stat = planted.stat()
    planted.write_bytes(b"=HYPERLINK(1)".ljust(stat.st_size))
    os.utime(planted, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert sorted(score_again(copied, monkeypatch)) == sorted(TASKS)
    assert planted.read_bytes() == (folder / planted.name).read_bytes()


def test_a_panel_name_with_a_dot_keeps_it_in_its_queue_files(tmp_path):
    """`demo.v1` and `demo.v2` are two panels: neither's queue is named as `demo`'s."""
    panel = panel_file(tmp_path, "gold_labels", "accepts_all", name="demo.v1")
    folder = scripted_run(tmp_path, "acme/kg-7b", 2, panel).parent
    names = sorted(path.name for path in folder.glob("review_*"))
    assert len(names) == 3 and all(name.rsplit(".", 1)[0].endswith("_demo.v1") for name in names)
