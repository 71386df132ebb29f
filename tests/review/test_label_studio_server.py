"""The real Label Studio (tests/support/label_studio.py) answers its SDK as our review export and
import expect: a project with the faithfulness config, tasks imported, a reviewer's choice and a
cancelled (skipped) annotation made through the API, and the project's JSON export, whose shape the
importer reads."""

import os

import pytest
from support.label_studio import label_studio_server

pytestmark = pytest.mark.slow

LABEL_CONFIG = """<View>
  <Text name="span" value="$text"/>
  <Choices name="faithfulness" toName="span" choice="single">
    <Choice value="yes"/>
    <Choice value="no"/>
  </Choices>
</View>"""
YES = {"from_name": "faithfulness", "to_name": "span", "type": "choices"} | {
    "value": {"choices": ["yes"]}
}


def test_a_reviewers_choice_comes_back_in_the_json_export(label_studio):
    ls = label_studio.client()
    project = ls.projects.create(title="faithfulness review", label_config=LABEL_CONFIG)
    spans = [
        {"data": {"text": "Revenue rose 12% on services.", "span_id": "s1"}},
        {"data": {"text": "Margins were flat.", "span_id": "s2"}},
    ]
    imported = ls.projects.import_tasks(id=project.id, request=spans, return_task_ids=True)
    assert imported.task_count == 2
    task_ids = {task.data["span_id"]: task.id for task in ls.tasks.list(project=project.id)}
    assert set(task_ids) == {"s1", "s2"}

    ls.annotations.create(id=task_ids["s1"], result=[YES])
    ls.annotations.create(id=task_ids["s2"], result=[], was_cancelled=True)  # "Skip" in the UI
    exported = ls.projects.exports.as_json(project.id)

    reviewer = ls.users.whoami().id
    by_span = {task["data"]["span_id"]: task for task in exported}
    assert set(by_span) == {"s1", "s2"}
    assert {"id", "data", "annotations", "project"} <= set(by_span["s1"])
    assert by_span["s1"]["id"] == task_ids["s1"]
    (annotation,) = by_span["s1"]["annotations"]
    assert {"id", "completed_by", "result", "was_cancelled", "task", "lead_time"} <= set(annotation)
    choices = [
        item["value"]["choices"][0]
        for item in annotation["result"]
        if item["from_name"] == "faithfulness"
    ]
    assert choices == ["yes"]
    assert annotation["was_cancelled"] is False
    assert annotation["completed_by"] == reviewer  # the user's id, not a dict
    assert annotation["task"] == task_ids["s1"]

    (cancelled,) = by_span["s2"]["annotations"]
    assert cancelled["was_cancelled"] is True
    assert cancelled["result"] == []
    assert (by_span["s2"]["total_annotations"], by_span["s2"]["cancelled_annotations"]) == (0, 1)


def test_the_server_is_stopped_on_exit(tmp_path):
    with label_studio_server(tmp_path) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert os.getpgid(server.pid) == server.pid  # its own process group
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)
