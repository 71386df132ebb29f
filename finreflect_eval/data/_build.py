"""Write benchmark data as a Hugging Face dataset folder (parquet per config/split + card), build
the `spans` config from 10-K filings, and push a folder to the Hub."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import datasets
from huggingface_hub import DatasetCard
from pydantic import BaseModel

from finreflect_eval.chunking import chunk_filing, infer_filing_metadata, read_filing, token_counter
from finreflect_eval.data._records import CONFIGS, FEATURES, Span, text_sha256
from finreflect_eval.errors import FinReflectError, first_line
from finreflect_eval.resources import bundled_path

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 2048


def write_dataset_folder(
    output: str | Path, tables: Mapping[str, Mapping[str, Sequence[BaseModel]]]
) -> Path:
    """Write `{config: {split: records}}` as `<config>/<split>-00000-of-00001.parquet` (the layout
    `push_to_hub` uses) and a README.md dataset card declaring every config in the folder."""
    output = Path(output)
    for config, splits in tables.items():
        for split, records in splits.items():
            for stale in (output / config).glob(f"{split}-*.parquet"):  # a rebuilt split
                stale.unlink()
            if not records:
                continue  # no empty splits: datasets lists only the splits that have rows
            path = output / config / f"{split}-00000-of-00001.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            rows = [record.model_dump() for record in records]
            datasets.Dataset.from_list(rows, features=FEATURES[config]).to_parquet(str(path))
    write_card(output)
    return output


def write_card(folder: str | Path) -> Path:
    """(Re)write `README.md`: our dataset card with `configs` listing the parquet files present."""
    folder = Path(folder)
    card = DatasetCard.load(bundled_path("dataset_card.md"))
    card.data.configs = [
        {
            "config_name": config,
            "data_files": [
                {"split": path.name.split("-")[0], "path": f"{config}/{path.name}"}
                for path in sorted((folder / config).glob("*.parquet"))
            ],
        }
        for config in CONFIGS
        if any((folder / config).glob("*.parquet"))
    ]
    if not card.data.configs:
        raise FinReflectError(f"{folder} holds no parquet files under {', '.join(CONFIGS)}")
    path = folder / "README.md"
    path.write_text(card.content, encoding="utf-8")
    return path


def section_slug(section: str) -> str:
    """`Item 1A` → `item1a`; the text before the first Item → `front`."""
    slug = "".join(ch for ch in section.lower() if ch.isalnum())
    return slug if slug.startswith("item") else "front"


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
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise FinReflectError(f"cannot read filing {path}: {exc.strerror}") from exc
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
        for chunk in chunk_filing(read_filing(path), max_tokens, count_tokens):
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
