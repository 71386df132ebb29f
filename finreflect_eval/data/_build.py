"""Write benchmark data as a Hugging Face dataset folder (parquet per config/split + card), build
the `spans` config from 10-K filings, and push a folder to the Hub."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

import datasets
import pyarrow.parquet as pq
import yaml
from huggingface_hub import DatasetCard, DatasetCardData
from pydantic import BaseModel

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.hashing import text_sha256
from finreflect_eval._util.hub import check_repo_id
from finreflect_eval._util.output_folder import (
    conflict_error,
    files_under,
    plan_write,
    remove_files,
)
from finreflect_eval._util.resources import bundled_path
from finreflect_eval.chunking import (
    chunk_filing,
    infer_filing_metadata,
    read_filing,
    read_text,
    token_counter,
)
from finreflect_eval.data._records import CONFIGS, FEATURES, Span
from finreflect_eval.data._slice import section_slug

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 2048


def write_dataset_folder(
    output: str | Path,
    tables: Mapping[str, Mapping[str, Sequence[BaseModel]]],
    *,
    about: str | None = None,
    pretty_name: str = "10-K spans (finreflect-eval format)",
    license: str | None = None,
    replace: bool = True,
) -> Path:
    """Write `{config: {split: records}}` as `<config>/<split>-00000-of-00001.parquet` (the layout
    `push_to_hub` uses) and a README.md dataset card declaring every config in the folder;
    `about` describes the data (default: the companies and years of its spans). Files it did not
    write are never replaced or mixed in: a README.md or a file under a config folder of anyone
    else's is a one-line error (other files are left alone). With `replace=False`, a folder that
    already holds a dataset is an error too; with `replace`, the data files its card lists that
    this write lacks are removed first (no stale split or config stays behind)."""
    output = Path(output)
    check_output_folder(output, replace=replace, others_beside=True)
    written = {
        f"{config}/{split}-00000-of-00001.parquet": records
        for config, splits in tables.items()
        for split, records in splits.items()
        if records  # no empty splits: datasets lists only the splits that have rows
    }
    plan = plan_write(output, [*written, "README.md"], _Ours(output))
    remove_files(output, plan.stale)  # the check refused every file of the user's in the way
    for name, records in written.items():
        config = name.split("/")[0]
        path = output / name
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [record.model_dump() for record in records]
        datasets.Dataset.from_list(rows, features=FEATURES[config]).to_parquet(str(path))
    spans = [span for split in tables.get("spans", {}).values() for span in split]
    write_card(output, about=about or _about(spans), pretty_name=pretty_name, license=license)
    return output


# `<split>-00000-of-00001.parquet` under a config folder: the data files written here
DATA_FILE = re.compile(r"\w+(\.\w+)*-00000-of-00001\.parquet")


def check_output_folder(output: Path, *, replace: bool, others_beside: bool = False) -> None:
    """Where `dataset build` may write: a new or empty folder or, with `replace`, one holding a
    dataset written here (the files its card lists, and the card). Any file it did not write is
    refused, naming it, so that `--output .` never replaces a project's README.md nor mixes a
    dataset into a project. `others_beside` allows files outside the dataset's own paths
    (README.md and the config folders): the bundled sample keeps its sources beside its data."""
    if output.exists() and not output.is_dir():
        raise FinReflectError(f"--output {output} is a file, not a folder")
    ours = _Ours(output)
    found = []
    for path in files_under(output):  # stops at the first file not ours (`--output ~`)
        if path in ours:
            found.append(path)
        elif not others_beside or path == "README.md" or path.split("/")[0] in CONFIGS:
            raise conflict_error(
                output,
                path,
                "choose a new or empty --output (--replace replaces only a dataset that "
                "finreflect-eval wrote)",
            )
    if found and not replace:
        raise FinReflectError(
            f"{output} already holds a dataset ({min(found)}); choose another --output, or pass "
            "--replace to overwrite it"
        )


class _Ours:
    """The files of a folder that `write_dataset_folder` wrote: README.md and the data files
    its card lists (the card is its record of them). Without a card of ours (it was removed),
    the files named and placed as its data files are taken as ours, as they always were. Never
    a link: writing one would write its target."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.listed = _card_files(folder / "README.md")

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str) or (self.folder / path).is_symlink():
            return False
        if self.listed is not None:
            return path == "README.md" or path in self.listed
        parts = path.split("/")
        return len(parts) == 2 and parts[0] in CONFIGS and bool(DATA_FILE.fullmatch(parts[1]))


def _card_files(path: Path) -> set[str] | None:
    """The data files a README.md lists, if it is a card as `write_card` writes it (a YAML
    header whose configs are ours, each data file laid out as
    `<config>/<split>-00000-of-00001.parquet`); None for any other README.md, or none."""
    if path.is_symlink() or not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    parts = text.split("---\n", 2)  # "", the YAML header, the body
    if len(parts) < 3 or parts[0]:
        return None
    try:
        metadata = yaml.safe_load(parts[1])
        declared = [
            (config["config_name"], PurePosixPath(file["path"]))
            for config in metadata["configs"]
            for file in config["data_files"]
        ]
    except (yaml.YAMLError, TypeError, KeyError):  # not YAML, or not shaped like our card
        return None
    ours = bool(declared) and all(
        config in CONFIGS
        and path.parent == PurePosixPath(config)
        and DATA_FILE.fullmatch(path.name)
        for config, path in declared
    )
    return {str(path) for _, path in declared} if ours else None


def _about(spans: Sequence[BaseModel]) -> str:
    companies = sorted({span.ticker for span in spans})
    years = sorted({span.fiscal_year for span in spans})
    return (
        "Spans built with `finreflect-eval dataset build` from the 10-K filings of "
        f"{', '.join(companies) or 'no company'} (fiscal years {', '.join(map(str, years))})."
    )


def write_card(
    folder: str | Path,
    *,
    about: str,
    pretty_name: str = "10-K spans (finreflect-eval format)",
    license: str | None = None,
) -> Path:
    """(Re)write `README.md` from the card template: the configs of the parquet files present
    (`spans` the default), `dataset_info` with the row counts, a size category, and `about`."""
    folder = Path(folder)
    files = {
        config: sorted((folder / config).glob("*.parquet"))
        for config in CONFIGS
        if any((folder / config).glob("*.parquet"))
    }
    if not files:
        raise FinReflectError(f"{folder} holds no parquet files under {', '.join(CONFIGS)}")
    tables = {  # config -> split -> the split's rows (one parquet file per split)
        config: {path.name.split("-")[0]: pq.read_table(path) for path in paths}
        for config, paths in files.items()
    }
    rows = {
        config: {split: table.num_rows for split, table in splits.items()}
        for config, splits in tables.items()
    }
    configs = [
        {
            "config_name": config,
            **({"default": True} if config == "spans" else {}),
            "data_files": [
                {"split": path.name.split("-")[0], "path": f"{config}/{path.name}"}
                for path in paths
            ],
        }
        for config, paths in files.items()
    ]
    dataset_info = [
        {
            "config_name": config,
            "features": [
                {"name": name, "dtype": feature.dtype} for name, feature in FEATURES[config].items()
            ],
            # num_bytes: the rows' Arrow size, as datasets counts it (the same on any machine)
            "splits": [
                {"name": split, "num_bytes": table.nbytes, "num_examples": table.num_rows}
                for split, table in tables[config].items()
            ],
        }
        for config in files
    ]
    card_data = DatasetCardData(
        pretty_name=pretty_name,
        license=license,
        language=["en"],
        task_categories=["text-generation", "text-classification"],
        tags=TAGS,
        size_categories=[_size_category(sum(rows.get("spans", {}).values()))],
        configs=configs,
        dataset_info=dataset_info,
    )
    counts = "\n".join(
        [
            "| config | split | rows |",
            "|---|---|---|",
            *(
                f"| `{c}` | `{split}` | {n} |"
                for c, splits in rows.items()
                for split, n in splits.items()
            ),
        ]
    )
    card = DatasetCard.from_template(
        card_data,
        template_path=str(bundled_path("dataset_card.md")),
        pretty_name=pretty_name,
        about=about.strip(),
        counts=counts,
    )
    path = folder / "README.md"
    path.write_text(card.content, encoding="utf-8")
    return path


TAGS = [
    "finance",
    "sec-filings",
    "10-k",
    "knowledge-graph",
    "information-extraction",
    "llm-as-a-judge",
    "llm-evaluation",
]


def _size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < bound:
            return label
    return "100K<n<1M" if n < 1_000_000 else "1M<n<10M"


def build_spans(
    files: Sequence[str | Path],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    tokenizer: str = "regex",
    ticker: str | None = None,
    fiscal_year: int | None = None,
) -> list[Span]:
    """Chunk 10-K filings into spans, in (ticker, year, document) order with stable ids."""
    count_tokens = token_counter(tokenizer)
    filings = []
    for file in files:
        path = Path(file)
        text = read_text(path)
        inferred_ticker, inferred_year = infer_filing_metadata(path, text)
        filing_ticker = ticker or inferred_ticker
        year = fiscal_year or inferred_year
        if not filing_ticker or not year:
            missing = "--ticker" if not filing_ticker else "--fiscal-year"
            raise FinReflectError(
                f"cannot infer {missing.lstrip('-')} from {path.name}; pass {missing}"
            )
        filings.append((filing_ticker.upper(), year, path))

    spans: dict[str, Span] = {}
    for filing_ticker, year, path in sorted(filings, key=lambda f: (f[0], f[1], f[2].name)):
        chunks = chunk_filing(read_filing(path), max_tokens, count_tokens)
        if not chunks:
            raise FinReflectError(f"{path} holds no 10-K text to chunk")
        for chunk in chunks:
            span_id = (
                f"{filing_ticker}_{year}_{section_slug(chunk.section)}_{chunk.chunk_index:04d}"
            )
            if span_id in spans:
                raise FinReflectError(
                    f"two filings give span {span_id}: {spans[span_id].source_file} and "
                    f"{path.name} (same ticker and fiscal year?)"
                )
            spans[span_id] = Span(
                span_id=span_id,
                ticker=filing_ticker,
                company=filing_ticker,
                fiscal_year=year,
                source_file=path.name,
                section=chunk.section,
                page_id=chunk.page_id,
                chunk_index=chunk.chunk_index,
                content_type=chunk.content_type,
                text=chunk.text,
                n_tokens=chunk.n_tokens,
                sha256=text_sha256(chunk.text),
            )
    return list(spans.values())


def push_dataset(
    folder: str | Path, repo_id: str, *, private: bool = False, token: str | None = None
) -> str:
    """Upload a dataset folder to a Hub dataset repo (created if needed); returns the commit URL."""
    from huggingface_hub import HfApi

    folder = Path(folder)
    check_repo_id(repo_id, "repo_id")
    if not (folder / "README.md").is_file():
        raise FinReflectError(f"{folder} is not a dataset folder (no README.md with configs)")
    configs = datasets.get_dataset_config_names(str(folder))
    if "spans" not in configs:
        raise FinReflectError(f"{folder} has no 'spans' config (configs: {', '.join(configs)})")
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            repo_type="dataset",
            allow_patterns=["README.md", *(f"{config}/*.parquet" for config in configs)],
            commit_message="Upload finreflect-eval benchmark data",
        )
    except Exception as exc:  # network, auth and offline errors come from several libraries
        raise FinReflectError(
            f"cannot push to Hub dataset '{repo_id}' ({first_line(exc)}); check the "
            "network, HF_HUB_OFFLINE and your token (HF_TOKEN or `hf auth login`)"
        ) from exc
    return str(commit)
