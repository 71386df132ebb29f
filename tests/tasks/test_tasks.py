"""Tasks as YAML: bundled tasks and group, include paths, errors naming file and field."""

import json
from pathlib import Path

import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.tasks.config import TaskIndex

TASK = """\
include: {base}
task: {name}
mode: single_pass
"""


def write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def bundled_base():
    from finreflect_eval._util.resources import tasks_dir

    return tasks_dir() / "finreflect" / "_base.yaml"


def test_bundled_tasks_and_group():
    index = TaskIndex()
    modes = ("single_pass", "multi_pass", "reflection")
    assert set(index.tasks) == {
        f"finreflect_{kind}{mode}"
        for kind in ("", "smoke_", "full_", "multihop_")
        for mode in modes
    } | {"finreflect_multihop_smoke_single_pass"}
    assert [t.name for t in index.resolve(["finreflect"])] == [
        "finreflect_single_pass",
        "finreflect_multi_pass",
        "finreflect_reflection",
    ]
    reflection = index.tasks["finreflect_reflection"].config
    assert reflection.max_iterations == 3 and reflection.num_fewshot == 2
    assert set(reflection.prompts) == {"extract", "critic", "correct"}
    assert reflection.version == 2
    # the base file's relative paths resolve against the base file
    assert reflection.schema_path.endswith("tasks/schema.yaml")
    assert set(reflection.judge_prompts) == {
        "faithfulness",
        "precision",
        "relevance",
        "comprehensiveness",
    }
    # a list of includes merges in order: the smoke task is the full task with smaller settings
    smoke = index.tasks["finreflect_smoke_reflection"].config
    assert smoke.max_iterations == 1 and smoke.min_triples == 1 and smoke.judges == "demo"
    assert smoke.prompts == reflection.prompts and smoke.mode == "reflection"
    # the downstream tasks: the main task's prompts and mode, no judged criterion, a QA model
    multihop = index.tasks["finreflect_multihop_reflection"].config
    assert multihop.prompts == reflection.prompts and multihop.criteria == []
    assert (multihop.downstream.qa, multihop.downstream.max_hops) == ("reference", 3)
    assert multihop.dataset_path == "domyn/FinMultiHopQA"
    assert reflection.downstream is None


def test_cli_lists_and_validates(cli):
    listed = cli("tasks", "list")
    assert listed.returncode == 0, listed.stderr
    for name in ("finreflect_single_pass", "finreflect_multi_pass", "finreflect_reflection"):
        assert f"| {name} |" in listed.stdout
    assert "| finreflect | group:" in listed.stdout
    validated = cli("tasks", "validate")
    assert validated.returncode == 0, validated.stderr
    assert "13 task(s) valid, 4 group(s)" in validated.stdout


def test_include_path_adds_and_overrides_with_a_notice(tmp_path, caplog):
    write(tmp_path, "mine.yaml", TASK.format(base=bundled_base(), name="my_task"))
    write(tmp_path, "again.yaml", TASK.format(base=bundled_base(), name="finreflect_reflection"))
    index = TaskIndex([tmp_path])
    assert "my_task" in index.tasks
    assert index.tasks["finreflect_reflection"].config.mode == "single_pass"
    assert "overrides an earlier definition" in caplog.text


HEAD = "include: {base}\ntask: t\n"
BROKEN = [
    ("task: t\nmode: single_pass: x\n", r"bad\.yaml: not valid YAML \(line 2\)"),
    (HEAD + "mode: sideways\n", r"bad\.yaml: field 'mode'"),
    (HEAD + "mode: single_pass\nmax_iteration: 2\n", r"field 'max_iteration'"),
    (HEAD + "mode: reflection\n", r"field '\(top level\)'.*'critic' prompt"),
    (HEAD + "mode: single_pass\nprompts: {{extract: nope.jinja}}\n", r"field 'prompts.extract'"),
    (
        HEAD + "mode: single_pass\ngeneration_kwargs: {{max_gen_toks: -1}}\n",
        r"field 'generation_kwargs.max_gen_toks'",
    ),
    ("group: g\ntask: [no_such_task]\n", r"bad\.yaml: field 'task': unknown task 'no_such_task'"),
]


@pytest.mark.parametrize(("text", "message"), BROKEN)
def test_broken_yaml_fails_naming_file_and_field(tmp_path, cli, text, message):
    write(tmp_path, "bad.yaml", text.format(base=bundled_base()))
    with pytest.raises(FinReflectError, match=message):
        TaskIndex([tmp_path])
    result = cli("tasks", "validate", "--include-path", str(tmp_path))
    assert result.returncode == 1 and "bad.yaml" in result.stderr


def test_template_that_does_not_render_fails_validation(tmp_path, cli):
    template = "{% macro system() %}{{ no_such_variable }}{% endmacro %}"
    write(tmp_path / "prompts", "broken.jinja", template)
    task = f"include: {bundled_base()}\ntask: t\nmode: single_pass\n"
    write(tmp_path, "t.yaml", task + "prompts: {extract: prompts/broken.jinja}\n")
    result = cli("tasks", "validate", "--include-path", str(tmp_path), "--tasks", "t")
    assert result.returncode == 1
    assert (
        "t.yaml: field 'prompts.extract'" in result.stderr and "no_such_variable" in result.stderr
    )


def test_unknown_task_suggests_known_ones():
    with pytest.raises(FinReflectError, match="unknown task, group or tag 'finreflect_single'"):
        TaskIndex().resolve(["finreflect_single"])


def test_include_cycle_and_missing_base_name_the_including_file(tmp_path):
    write(tmp_path / "a", "x.yaml", "include: ../b/y.yaml\ntask: x\nmode: single_pass\n")
    write(tmp_path / "b", "_y.yaml", "")
    write(tmp_path / "b", "y.yaml", "include: ../a/x.yaml\n")
    with pytest.raises(FinReflectError, match=r"field 'include': include cycle"):
        TaskIndex([tmp_path])
    other = tmp_path / "other"
    write(other, "z.yaml", "include: _missing.yaml\ntask: z\nmode: single_pass\n")
    with pytest.raises(FinReflectError, match=r"z\.yaml: field 'include': no such file"):
        TaskIndex([other])


def test_same_name_twice_in_one_folder_is_an_error(tmp_path):
    write(tmp_path, "one.yaml", TASK.format(base=bundled_base(), name="dup"))
    write(tmp_path, "two.yaml", TASK.format(base=bundled_base(), name="dup"))
    with pytest.raises(FinReflectError, match=r"'dup' is also defined in .*one\.yaml"):
        TaskIndex([tmp_path])


def test_each_prompt_comes_from_its_own_folder(tmp_path):
    import shutil

    from finreflect_eval._util.resources import tasks_dir

    bundled = tasks_dir() / "prompts"
    shutil.copytree(bundled, tmp_path / "a_prompts")
    mine = tmp_path / "zz_prompts"
    shutil.copytree(bundled, mine)
    text = (mine / "extract.jinja").read_text().replace("You extract", "MY EXTRACTOR extracts")
    (mine / "extract.jinja").write_text(text)
    write(
        tmp_path / "tasks",
        "t.yaml",
        f"include: {bundled_base()}\ntask: t\nmode: reflection\nprompts:\n"
        f"  extract: {mine / 'extract.jinja'}\n  critic: {tmp_path / 'a_prompts/critic.jinja'}\n"
        f"  correct: {tmp_path / 'a_prompts/correct.jinja'}\n",
    )
    task = TaskIndex([tmp_path / "tasks"]).tasks["t"]
    from finreflect_eval.data import load_benchmark

    span = load_benchmark("sample", limit=1).spans[0]
    system, _ = task.render("extract", span=span, fewshot=[])
    assert system.startswith("MY EXTRACTOR extracts")


def test_task_hash_does_not_depend_on_where_tasks_are_installed(tmp_path):
    import shutil

    from finreflect_eval._util.resources import tasks_dir

    shutil.copytree(tasks_dir(), tmp_path / "copy")
    original = TaskIndex().tasks["finreflect_reflection"]
    index = TaskIndex([tmp_path / "copy"])  # same files elsewhere: overrides, same hash
    assert index.tasks["finreflect_reflection"].path != original.path
    assert index.tasks["finreflect_reflection"].hash == original.hash


def test_a_tag_selects_its_tasks_and_a_run_reports_them(cli, tmp_path, env):
    from support.runs import panel_file, run_args

    index = TaskIndex()
    assert {t.name for t in index.resolve(["finreflect_modes"])} == {
        "finreflect_single_pass",
        "finreflect_multi_pass",
        "finreflect_reflection",
    }
    assert len(index.resolve(["smoke"])) == 3 and index.tags["smoke"][0].startswith("finreflect_s")
    panel = panel_file(tmp_path, "accepts_all", "accepts_all", "rejects_all")
    result = cli(*run_args(tmp_path, panel, "finreflect_modes", limit=1), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    (results,) = (tmp_path / "out" / "candidate").glob("results_*.json")
    scored = json.loads(results.read_text())
    assert list(scored["results"]) == [t.name for t in index.resolve(["finreflect_modes"])]
    assert "groups" not in scored  # a tag selects; only a group aggregates (lm-eval: no key)


def test_metric_list_decides_what_is_reported_and_judged(cli, tmp_path, env):
    from support.runs import panel_file, run_args

    write(
        tmp_path / "tasks",
        "few.yaml",
        TASK.format(base=bundled_base(), name="few_metrics")
        + "metric_list:\n  - {metric: faithfulness, aggregation: macro}\n"
        + "  - {metric: reference_recall}\n",
    )
    panel = panel_file(tmp_path, "accepts_all", "rejects_all")
    args = [*run_args(tmp_path, panel, "few_metrics", limit=2), "--include-path"]
    result = cli(*args, str(tmp_path / "tasks"), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    (results,) = (tmp_path / "out" / "candidate").glob("results_*.json")
    scored = json.loads(results.read_text())
    entry = scored["results"]["few_metrics"]
    reported = {key for key in entry if key not in ("name", "alias", "sample_len")}
    assert reported == {
        "faithfulness,none",
        "faithfulness_stderr,none",
        "reference_recall,none",
        "reference_recall_stderr,none",
    }
    details = scored["details"]["few_metrics"]
    assert list(details["criteria"]) == ["faithfulness"]
    assert details["criteria"]["faithfulness"]["aggregation"] == "macro"
    assert scored["higher_is_better"]["few_metrics"] == {
        "faithfulness": True,
        "reference_recall": True,
    }
    # the judges were asked about faithfulness only: 2 judges x 2 spans, one call each
    assert Path(env["SCRIPTED_JUDGE_LOG"]).read_text().count("call") == 2 * 2


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ("[{metric: faithfulnes}]", "unknown metric 'faithfulnes'"),
        ("[{metric: check_rules, aggregation: micro}]", "no aggregation"),
        ("[]", "at least 1 item"),
        ("[{metric: precision}, {metric: precision}]", "listed twice"),
    ],
)
def test_a_bad_metric_list_names_the_file_and_field(tmp_path, metrics, message):
    write(
        tmp_path / "tasks",
        "bad.yaml",
        TASK.format(base=bundled_base(), name="bad_metrics") + f"metric_list: {metrics}\n",
    )
    with pytest.raises(FinReflectError, match=f"bad.yaml: field 'metric_list.*{message}"):
        TaskIndex([tmp_path / "tasks"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("max_triples: 5\nmax_triples: 50\n", r"line 5\): key 'max_triples' given twice \(first"),
        (
            "generation_kwargs:\n  temperature: 0\n  seed: 1\n  temperature: 1\n",
            r"line 7\): key 'temperature' given twice \(first on line 5\)",
        ),
        ("prompts: [{a: 1, a: 1}]\n", r"line 4\): key 'a' given twice"),
    ],
)
def test_a_key_given_twice_names_the_file_key_and_line(tmp_path, body, message):
    write(tmp_path, "bad.yaml", HEAD.format(base=bundled_base()) + "mode: single_pass\n" + body)
    with pytest.raises(FinReflectError, match=r"bad\.yaml: not valid YAML \(" + message):
        TaskIndex([tmp_path])


def test_yaml_merge_keys_may_still_override(tmp_path):
    from finreflect_eval._util.resources import load_yaml

    path = write(tmp_path, "m.yaml", "base: &b {x: 1, y: 2}\nover:\n  <<: *b\n  x: 3\n")
    assert load_yaml(path, "test file")["over"] == {"x": 3, "y": 2}
