"""Load a benchmark split: the bundled sample, a local folder or file, or a Hub dataset."""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from finreflect_eval._util.errors import FinReflectError, first_invalid_field, first_line
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval._util.resources import sample_dir
from finreflect_eval.data._evalbench import evalbench_to_benchmark, first_chunks, is_evalbench
from finreflect_eval.data._multihop import is_multihop, multihop_to_benchmark
from finreflect_eval.data._records import CONFIGS, RECORD_TYPES, Benchmark
from finreflect_eval.data._slice import select_slice
from finreflect_eval.records import SliceSpec

if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)

SAMPLE = "sample"
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")  # name or org/name
_FILE_BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}


def resolve_dataset(dataset: str) -> str:
    """`sample` → the bundled folder; an existing path → itself; anything else is a Hub id."""
    if dataset == SAMPLE:
        return str(sample_dir())
    path = Path(dataset).expanduser()
    if path.exists():
        return str(path.resolve())
    if dataset.startswith((".", "/", "~")) or not _HUB_ID.match(dataset):
        raise FinReflectError(f"dataset path {dataset} does not exist")
    return dataset


def load_benchmark(
    dataset: str = SAMPLE,
    *,
    split: str = "test",
    limit: int | None = None,
    revision: str | None = None,
    config: str | None = None,
    slice: SliceSpec | None = None,
) -> Benchmark:
    """Load one split as typed records: the `slice` of it when given, then the first `limit`
    spans (in dataset order).

    Accepts our format (configs `spans`, `reference_triples`, `judgments`) or rows in the layout
    of `domyn/FinReflectKG-EvalBench` (one triple per row with its chunk), told apart by columns;
    `config` names the config of row data (lm-eval's `dataset_name`).
    """
    import datasets

    source = resolve_dataset(dataset)
    # datasets 5.x keys its cache of a local folder by the folder's name, not its content, so a
    # rebuilt folder (or another folder of the same name) would load stale rows: local data is
    # converted in a throw-away cache instead (cheap: it is parquet already).
    local = Path(source).exists()
    cache = tempfile.TemporaryDirectory(prefix="finreflect-data-") if local else nullcontext()
    bars = datasets.is_progress_bar_enabled()
    verbosity = datasets.logging.get_verbosity()
    if local:  # a local conversion takes milliseconds: its progress bars are only noise
        datasets.disable_progress_bars()
        # and a broken file is our one-line error below, not datasets' own log lines too
        datasets.logging.set_verbosity(datasets.logging.CRITICAL + 1)
    try:
        if not local:
            revision = hub_commit(source, revision)
        with cache as cache_dir:
            benchmark = _load(
                source,
                split=split,
                revision=revision,
                config=config,
                name=dataset,
                cache_dir=cache_dir,
                limit=None if slice else limit,  # a slice needs the whole split
            )
    except FinReflectError:
        raise
    except (ConnectionError, OSError) as exc:
        # Offline mode, no network, or a missing Hub repo all surface as these.
        raise FinReflectError(
            f"cannot load dataset '{dataset}' ({first_line(exc)}); offline, run the smoke tasks "
            "on the bundled sample (--tasks finreflect_smoke) or pass --dataset sample or a "
            "local copy"
        ) from exc
    except Exception as exc:  # malformed data: empty or broken files, unreadable rows
        detail = "it has no rows" if isinstance(exc, StopIteration) else first_line(exc)
        raise FinReflectError(f"cannot read dataset '{dataset}': {detail}") from exc
    finally:
        if bars:
            datasets.enable_progress_bars()
        datasets.logging.set_verbosity(verbosity)
    if slice is not None:
        spans = select_slice(benchmark.spans, slice)
        benchmark = replace(benchmark.subset(spans), size=len(spans), slice=slice)
    return benchmark.limited(limit)


# While `commits_remembered` is open: the commits found, by (Hub dataset, revision).
_remembered: ContextVar[dict[tuple[str, str | None], str] | None] = ContextVar(
    "_remembered", default=None
)


@contextmanager
def commits_remembered(commits: dict[tuple[str, str | None], str]) -> Iterator[None]:
    """Within it, `hub_commit` asks the Hub for a revision's commit once, kept in `commits`
    (which the caller may fill with what it asked itself: `run --check` asks for the data's
    version, then loads the data of every task at it)."""
    token = _remembered.set(commits)
    try:
        yield
    finally:
        _remembered.reset(token)


def hub_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit a Hub dataset's `revision` (a branch, tag or sha; None: the default branch)
    points to now. Loading that sha, and recording it, keeps the data and the version a run
    names the same even if the branch moves meanwhile. Offline, or with the Hub unreachable, it
    is None: `datasets` then serves its latest cached copy whatever the revision, so which commit
    is unknown."""
    remembered = _remembered.get()
    if remembered is not None and (repo_id, revision) in remembered:
        return remembered[(repo_id, revision)]
    sha = _ask_commit(repo_id, revision)
    if remembered is not None and sha is not None:
        remembered[(repo_id, revision)] = sha
    return sha


def _ask_commit(repo_id: str, revision: str | None) -> str | None:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        return HfApi().dataset_info(repo_id, revision=revision).sha
    except OfflineModeIsEnabled:
        return None
    except HfHubHTTPError:  # the Hub answered: no such repo or revision, no access (OSErrors)
        raise
    except Exception as exc:  # the Hub unreachable (httpx's error types, by hub version)
        # As offline: `datasets` may still serve a cached copy, of a commit nobody can name.
        logger.warning(
            "the Hub is unreachable (%s): the commit of dataset %s is not recorded",
            first_line(exc),
            repo_id,
        )
        return None


def _load(
    source: str,
    *,
    split: str,
    revision: str | None,
    config: str | None,
    name: str,
    cache_dir: str | None,
    limit: int | None,
) -> Benchmark:
    import datasets

    # Row data (one triple per row) can be huge (domyn/FinReflectKG: 17.5M rows): with a limit
    # it is streamed and read only as far as the first `limit` chunks.
    stream = limit is not None
    path = Path(source)
    if path.is_file():
        if split != "test":  # a file is one split: the test data (never few-shot examples)
            raise FinReflectError(f"dataset file '{name}' has no split '{split}'")
        builder = _FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise FinReflectError(f"unsupported dataset file type: {path.name}")
        rows = datasets.load_dataset(
            builder, data_files=str(path), split="train", cache_dir=cache_dir, streaming=stream
        )
        return _from_rows(rows, name=name, split=split, revision=revision, limit=limit)

    configs = datasets.get_dataset_config_names(source, revision=revision)
    if "spans" in configs:
        if config not in (None, "spans"):
            raise FinReflectError(
                f"dataset '{name}' is in our format (configs {', '.join(CONFIGS)}): it has no "
                f"config '{config}' to choose (leave dataset_name empty)"
            )
        return _load_our_format(
            source, configs, split=split, revision=revision, name=name, cache_dir=cache_dir
        )
    dataset_dict = datasets.load_dataset(
        source, config, revision=revision, cache_dir=cache_dir, streaming=stream
    )
    actual, rows = _pick_split(dataset_dict, split, name)
    return _from_rows(rows, name=name, split=actual, revision=revision, limit=limit)


def _from_rows(
    rows: Any, *, name: str, split: str, revision: str | None, limit: int | None
) -> Benchmark:
    """Rows of a Dataset, or of an IterableDataset when streaming."""
    columns = rows.column_names or list(next(iter(rows), {}))
    if is_multihop(columns):  # questions with their KG paths: every row (a limit cuts spans)
        benchmark = multihop_to_benchmark(rows, dataset=name, split=split, revision=revision)
        return replace(benchmark, size=len(benchmark.spans))
    if not is_evalbench(columns):
        raise FinReflectError(
            f"dataset '{name}' is neither our format (configs {', '.join(CONFIGS)}), "
            "FinReflectKG-EvalBench rows nor multi-hop QA rows (question, answer, hops; "
            f"columns found: {', '.join(columns)})"
        )
    if limit is not None:
        rows = first_chunks(rows, limit)
    benchmark = evalbench_to_benchmark(rows, dataset=name, split=split, revision=revision)
    # Read only as far as the limit: the split's size stays unknown.
    return replace(benchmark, size=None if limit is not None else len(benchmark.spans))


def _pick_split(
    dataset_dict: datasets.DatasetDict, split: str, name: str
) -> tuple[str, datasets.Dataset]:
    """The split asked for, or for "test" the only split of single-split data (the Hub's
    FinReflectKG-EvalBench has only "train"): its name (what a run records) and its rows."""
    if split in dataset_dict:
        return split, dataset_dict[split]
    if len(dataset_dict) == 1 and split == "test":
        (only,) = dataset_dict
        logger.info("dataset '%s' has no split '%s'; using its only split '%s'", name, split, only)
        return only, dataset_dict[only]
    raise FinReflectError(
        f"dataset '{name}' has no split '{split}' (splits: {', '.join(dataset_dict)})"
    )


def _load_our_format(
    source: str,
    configs: list[str],
    *,
    split: str,
    revision: str | None,
    name: str,
    cache_dir: str | None,
) -> Benchmark:
    import datasets

    records: dict[str, list[Any]] = {}
    for config in CONFIGS:
        if config not in configs:  # e.g. a freshly built folder has spans only
            records[config] = []
            continue
        dataset_dict = datasets.load_dataset(source, config, revision=revision, cache_dir=cache_dir)
        if split not in dataset_dict:
            if config == "spans":
                raise FinReflectError(
                    f"dataset '{name}' has no split '{split}' (splits: {', '.join(dataset_dict)})"
                )
            records[config] = []
            continue
        records[config] = parse_rows(
            dataset_dict[split], config, where=f"{name} [{config}/{split}]"
        )
    spans, triples, judgments = (records[config] for config in CONFIGS)
    _check_integrity(spans, triples, judgments, where=f"{name} [{split}]")
    return Benchmark(
        dataset=name,
        split=split,
        spans=spans,
        reference_triples=triples,
        judgments=judgments,
        revision=revision,
        size=len(spans),
    )


def parse_rows(rows: Iterable[Mapping[str, Any]], config: str, *, where: str) -> list[Any]:
    """Validate rows into records; the first bad row is an error naming the row and field."""
    record_type: type[BaseModel] = RECORD_TYPES[config]
    records = []
    for index, row in enumerate(rows):
        missing = [
            f
            for f, info in record_type.model_fields.items()
            if info.is_required() and row.get(f) is None
        ]
        if missing:
            raise FinReflectError(f"{where} row {index}: missing required field '{missing[0]}'")
        try:
            records.append(record_type.model_validate(dict(row)))
        except ValidationError as exc:
            raise FinReflectError(f"{where} row {index}: {first_invalid_field(exc)}") from exc
    return records


def _check_integrity(spans, triples, judgments, *, where: str) -> None:
    seen: set[str] = set()
    for index, span in enumerate(spans):
        if span.span_id in seen:
            raise FinReflectError(f"{where} spans row {index}: duplicate span_id '{span.span_id}'")
        if span.sha256 != text_sha256(span.text):
            raise FinReflectError(f"{where} spans row {index}: field 'sha256' does not match text")
        seen.add(span.span_id)
    for config, rows in (("reference_triples", triples), ("judgments", judgments)):
        for index, row in enumerate(rows):
            if row.span_id not in seen:
                raise FinReflectError(
                    f"{where} {config} row {index}: field 'span_id': unknown span '{row.span_id}'"
                )


def available_splits(dataset: str, revision: str | None = None) -> list[str]:
    """Split names of a dataset (of its `spans` config in our format), test first."""
    import datasets

    source = resolve_dataset(dataset)
    try:
        if Path(source).is_file():
            return ["test"]
        configs = datasets.get_dataset_config_names(source, revision=revision)
        config = "spans" if "spans" in configs else configs[0]
        splits = datasets.get_dataset_split_names(source, config, revision=revision)
    except (ConnectionError, OSError) as exc:
        raise FinReflectError(
            f"cannot load dataset '{dataset}' ({first_line(exc)}); offline, use --dataset sample "
            "or a local path"
        ) from exc
    return sorted(splits, key=lambda s: (s != "test", s != "dev", s))
