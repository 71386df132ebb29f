import re
from pathlib import Path

import pandas as pd
import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.data import load_benchmark, text_sha256

EVALBENCH_ROWS = [
    # two triples of one chunk, one of another chunk; Domyn stores relations lowercased
    {
        "ticker": "AMT",
        "year": 2024,
        "source_file": "AMT_10k_2024.pdf",
        "page_id": "page_96",
        "chunk_id": "chunk_1",
        "triplet_id": "t1",
        "entity": "amt",
        "relationship": "subject_to",
        "target": "reit status",
        "chunk_text": "AMT operates as a REIT for federal income tax purposes.",
        "is_faithfulness": 1,
        "is_precision": 1,
        "is_relevance": 0,
    },
    {
        "ticker": "AMT",
        "year": 2024,
        "source_file": "AMT_10k_2024.pdf",
        "page_id": "page_96",
        "chunk_id": "chunk_1",
        "triplet_id": "t2",
        "entity": "company",
        "relationship": "operates_in",
        "target": "united state",
        "chunk_text": "AMT operates as a REIT for federal income tax purposes.",
        "is_faithfulness": 0,
        "is_precision": 0,
        "is_relevance": 1,
    },
    {
        "ticker": "LIN",
        "year": 2023,
        "source_file": "LIN_10k_2023.pdf",
        "page_id": "page_24",
        "chunk_id": "chunk_1",
        "triplet_id": "t3",
        "entity": "lin",
        "relationship": "Distributes",
        "target": "process gases",
        "chunk_text": "Linde distributes process gases by pipeline.",
        "is_faithfulness": 1,
        "is_precision": 1,
        "is_relevance": 1,
    },
]


def write_parquet(tmp_path, rows, name="evalbench.parquet"):
    path = tmp_path / name
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_evalbench_adapter_groups_rows_into_spans(tmp_path):
    bench = load_benchmark(str(write_parquet(tmp_path, EVALBENCH_ROWS)))
    assert [s.span_id for s in bench.spans] == [
        "AMT_2024_page_96_chunk_1",
        "LIN_2023_page_24_chunk_1",
    ]
    amt = bench.spans[0]
    assert amt.ticker == "AMT" and amt.fiscal_year == 2024 and amt.chunk_index == 1
    assert amt.sha256 == text_sha256(amt.text) and amt.n_tokens == 11
    assert [t.triple_id for t in bench.reference_triples] == ["t1", "t2", "t3"]
    first = bench.reference_triples[0]
    assert (first.subject, first.relation, first.object) == ("amt", "Subject_To", "reit status")
    assert bench.reference_triples[2].relation == "Distributes"  # off-schema kept as is
    labels = {(j.triple_id, j.criterion): j.label for j in bench.judgments}
    assert len(labels) == 9
    assert labels["t1", "relevance"] == "0" and labels["t2", "faithfulness"] == "0"
    assert labels["t3", "precision"] == "1"
    assert bench.limited(1).spans == bench.spans[:1]
    assert {t.triple_id for t in bench.limited(1).reference_triples} == {"t1", "t2"}


def test_evalbench_optional_columns_are_used(tmp_path):
    rows = [
        dict(row, entity_type="ORG", target_type="REGULATORY_REQUIREMENT") for row in EVALBENCH_ROWS
    ]
    bench = load_benchmark(str(write_parquet(tmp_path, rows)))
    assert bench.reference_triples[0].subject_type == "ORG"
    assert bench.reference_triples[0].object_type == "REGULATORY_REQUIREMENT"


def test_evalbench_row_missing_chunk_text_is_named(tmp_path):
    rows = [dict(row) for row in EVALBENCH_ROWS]
    rows[2]["chunk_text"] = None
    with pytest.raises(FinReflectError, match=r"row 2: missing required field 'chunk_text'"):
        load_benchmark(str(write_parquet(tmp_path, rows)))


def test_evalbench_column_missing_entirely_is_named(tmp_path):
    rows = [{k: v for k, v in row.items() if k != "source_file"} for row in EVALBENCH_ROWS]
    with pytest.raises(FinReflectError, match=r"row 0: missing required field 'source_file'"):
        load_benchmark(str(write_parquet(tmp_path, rows)))


def test_evalbench_bad_label_is_named(tmp_path):
    rows = [dict(row, is_precision=str(row["is_precision"])) for row in EVALBENCH_ROWS]
    rows[1]["is_precision"] = "maybe"
    with pytest.raises(FinReflectError, match=r"row 1: field 'is_precision'"):
        load_benchmark(str(write_parquet(tmp_path, rows)))


def test_evalbench_same_chunk_ids_in_two_files_stay_apart(tmp_path):
    rows = [dict(EVALBENCH_ROWS[0]), dict(EVALBENCH_ROWS[0], source_file="AMT_10k_2024_A.pdf")]
    rows[1]["triplet_id"] = "t9"
    bench = load_benchmark(str(write_parquet(tmp_path, rows)))
    assert len(bench.spans) == 2 and len({s.span_id for s in bench.spans}) == 2
    assert [t.span_id for t in bench.reference_triples] == [s.span_id for s in bench.spans]


def test_evalbench_folder_with_single_train_split(tmp_path):
    folder = tmp_path / "hub_layout"
    (folder / "data").mkdir(parents=True)
    write_parquet(folder / "data", EVALBENCH_ROWS, "train-00000-of-00001.parquet")
    bench = load_benchmark(str(folder))  # asks for "test", takes the only split
    assert len(bench.spans) == 2 and len(bench.reference_triples) == 3


def test_unknown_format_is_refused(tmp_path):
    path = write_parquet(tmp_path, [{"question": "q", "answer": "a"}])
    with pytest.raises(FinReflectError, match="neither our format"):
        load_benchmark(str(path))


def test_missing_local_path_is_refused():
    with pytest.raises(FinReflectError, match="does not exist"):
        load_benchmark("./no/such/folder")


def test_evalbench_keys_are_normalised_and_triple_ids_unique(tmp_path):
    rows = [dict(EVALBENCH_ROWS[0]), dict(EVALBENCH_ROWS[1], ticker="amt", year=2024.0)]
    bench = load_benchmark(str(write_parquet(tmp_path, rows)))
    assert [s.span_id for s in bench.spans] == ["AMT_2024_page_96_chunk_1"]
    rows[1]["triplet_id"] = "t1"
    with pytest.raises(FinReflectError, match=r"row 1: field 'triplet_id': 't1' repeats row 0"):
        load_benchmark(str(write_parquet(tmp_path, rows, "dup.parquet")))


def test_a_file_has_only_a_test_split(tmp_path):
    path = write_parquet(tmp_path, EVALBENCH_ROWS)
    with pytest.raises(FinReflectError, match="has no split 'dev'"):
        load_benchmark(str(path), split="dev")


def test_row_data_with_a_limit_is_streamed_and_read_only_that_far(tmp_path, monkeypatch):
    import datasets

    calls = []
    real = datasets.load_dataset
    monkeypatch.setattr(
        datasets, "load_dataset", lambda *a, **k: calls.append(k.get("streaming")) or real(*a, **k)
    )
    rows = [*EVALBENCH_ROWS, dict(EVALBENCH_ROWS[2], chunk_id="chunk_2", chunk_text=None)]
    bench = load_benchmark(str(write_parquet(tmp_path, rows)), limit=2)  # row 3 is never read
    assert calls == [True]
    assert len(bench.spans) == 2 and len(bench.reference_triples) == 3


def test_replace_removes_only_the_datasets_own_files(tmp_path):
    from finreflect_eval.data import load_benchmark, write_dataset_folder

    spans = load_benchmark("sample").spans[:2]
    write_dataset_folder(tmp_path, {"spans": {"test": spans}}, replace=False)
    keep = tmp_path / "notes" / "mine.parquet"  # not a config of ours: never touched
    keep.parent.mkdir()
    keep.write_bytes(b"mine")
    with pytest.raises(FinReflectError, match="already holds a dataset"):
        write_dataset_folder(tmp_path, {"spans": {"test": spans[:1]}}, replace=False)
    write_dataset_folder(tmp_path, {"spans": {"test": spans[:1]}}, replace=True)
    assert keep.read_bytes() == b"mine"
    assert len(load_benchmark(str(tmp_path)).spans) == 1


def our_dataset(folder):
    """A dataset folder as `dataset build` writes it: README.md card and spans parquet."""
    from finreflect_eval.data import write_dataset_folder

    return write_dataset_folder(folder, {"spans": {"test": load_benchmark("sample").spans[:2]}})


def files_under(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("replace", [False, True])
def test_a_readme_not_written_here_is_never_replaced(tmp_path, replace):
    from finreflect_eval.data import write_dataset_folder

    (tmp_path / "README.md").write_text("# My project\n")
    with pytest.raises(FinReflectError, match=r"holds README\.md, which finreflect-eval did not"):
        write_dataset_folder(
            tmp_path, {"spans": {"test": load_benchmark("sample").spans[:2]}}, replace=replace
        )
    assert files_under(tmp_path) == {Path("README.md"): b"# My project\n"}


def test_a_file_not_written_here_among_the_data_files_is_refused(tmp_path):
    from finreflect_eval.data import write_dataset_folder

    our_dataset(tmp_path)
    (tmp_path / "spans" / "mine.parquet").write_bytes(b"mine")
    before = files_under(tmp_path)
    with pytest.raises(FinReflectError, match=r"holds spans/mine\.parquet, which finreflect-eval"):
        write_dataset_folder(tmp_path, {"spans": {"test": load_benchmark("sample").spans[:1]}})
    assert files_under(tmp_path) == before


@pytest.mark.parametrize(
    "foreign", ["README.md", "pyproject.toml", "src/app.py", "spans/mine.parquet", ".git/HEAD"]
)
@pytest.mark.parametrize("replace", [False, True])
def test_dataset_build_refuses_a_folder_holding_files_it_did_not_write(tmp_path, foreign, replace):
    from finreflect_eval.data import check_output_folder

    our_dataset(tmp_path)
    (tmp_path / foreign).parent.mkdir(exist_ok=True)
    (tmp_path / foreign).write_text("the user's own file\n")  # README.md: the card rewritten
    folder = re.escape(str(tmp_path))
    with pytest.raises(FinReflectError, match=rf"^{folder} holds {re.escape(foreign)}, which"):
        check_output_folder(tmp_path, replace=replace)


def test_dataset_build_writes_into_a_new_or_empty_folder_or_over_its_own_dataset(tmp_path):
    from finreflect_eval.data import check_output_folder

    check_output_folder(tmp_path / "new", replace=False)
    (tmp_path / "empty" / "spans").mkdir(parents=True)  # folders without files are empty
    check_output_folder(tmp_path / "empty", replace=False)
    our_dataset(tmp_path / "built")
    with pytest.raises(FinReflectError, match=r"already holds a dataset .*pass --replace"):
        check_output_folder(tmp_path / "built", replace=False)
    check_output_folder(tmp_path / "built", replace=True)


def test_dataset_build_never_writes_through_a_link(tmp_path):
    from finreflect_eval.data import check_output_folder

    our_dataset(tmp_path / "built")
    card = tmp_path / "built" / "README.md"
    card.rename(tmp_path / "card.md")
    card.symlink_to(tmp_path / "card.md")  # our card, but writing README.md would write card.md
    with pytest.raises(FinReflectError, match=r"holds README\.md, which"):
        check_output_folder(tmp_path / "built", replace=True)


# --- dataset build over its own dataset: what it replaces, and the user's files ---

FILING = "## Item 7. MD&A\n\nRevenue grew.\n"


def build_args(tmp_path, output, split, *more):
    filing = tmp_path / "NVDA_10-K-2025-02-26.md"
    filing.write_text(FILING)
    return ("dataset", "build", str(filing), "--output", str(output), "--split", split, *more)


def test_dataset_build_replaces_its_own_splits_and_refuses_the_users_files(tmp_path, cli):
    """`dataset build --replace` over the dataset it wrote removes its stale split; a file of the
    user's in the folder (beside it, or among its data files) is refused by name in one line,
    and nothing changes: it writes only into a folder that holds its dataset alone."""
    output = tmp_path / "dataset"
    assert cli(*build_args(tmp_path, output, "dev")).returncode == 0
    result = cli(*build_args(tmp_path, output, "test", "--replace"))
    assert result.returncode == 0, result.stderr
    assert sorted(files_under(output)) == [
        Path("README.md"),
        Path("spans/test-00000-of-00001.parquet"),
    ]
    for name in ("notes.md", "extra/page.html", "spans/mine.txt"):
        (output / name).parent.mkdir(exist_ok=True)
        (output / name).write_text("the user's own file\n")
        before = files_under(output)
        result = cli(*build_args(tmp_path, output, "test", "--replace"))
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert f"holds {name}, which finreflect-eval did not write" in result.stderr
        assert files_under(output) == before
        (output / name).unlink()


@pytest.mark.parametrize("split", ["validation", "test"])
def test_a_data_file_its_card_does_not_list_is_the_users(tmp_path, cli, split):
    """A parquet file named as `dataset build` names its data files, but which its card does not
    list (a split the user added by hand), is never removed by --replace (`validation`) nor
    overwritten (`test`, the split written): refused by name, nothing changed."""
    output = tmp_path / "dataset"
    assert cli(*build_args(tmp_path, output, "dev")).returncode == 0
    users = output / "spans" / f"{split}-00000-of-00001.parquet"
    users.write_bytes(b"the user's own split")
    before = files_under(output)
    result = cli(*build_args(tmp_path, output, "test", "--replace"))
    assert result.returncode == 1, result.stderr
    assert f"holds spans/{users.name}, which finreflect-eval did not write" in result.stderr
    assert files_under(output) == before


def test_a_rebuild_keeps_the_users_files_beside_its_dataset(tmp_path):
    """Through the Python API, files beside the dataset (not README.md, not under a config
    folder) are the user's and stay; the data files of an earlier, bigger write go."""
    from finreflect_eval.data import write_dataset_folder

    spans = load_benchmark("sample").spans[:2]
    write_dataset_folder(tmp_path, {"spans": {"test": spans, "dev": spans[:1]}})
    users = {Path("notes.md"): b"# my notes\n", Path("extra/page.html"): b"<p>mine</p>\n"}
    for name, data in users.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    write_dataset_folder(tmp_path, {"spans": {"test": spans[:1]}})
    found = files_under(tmp_path)
    assert {name: found.pop(name) for name in users} == users
    assert sorted(found) == [Path("README.md"), Path("spans/test-00000-of-00001.parquet")]
