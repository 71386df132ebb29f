"""The official benchmark in tests: a folder laid out like the Hub dataset, the official `paper`
panel served by scripted endpoints, and a leaderboard that registers the folder's slice."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pandas as pd

from finreflect_eval.data import load_benchmark, span_list
from finreflect_eval.tasks.config import TaskIndex
from support import scripted_judges
from support.chat_server import Reply, ScriptedServer, answer, judge_answer

REPO = Path(__file__).resolve().parents[2]
OFFICIAL = TaskIndex().tasks["finreflect_single_pass"].config.slice
SECTIONS = ("Item 1. Business", "Item 1A. Risk Factors", "Item 7. Management's Discussion")
PAPER = ("qwen3-235b-a22b", "gpt-oss-120b", "nemotron-super-49b-v1.5")


def hub_folder(root: Path) -> Path:
    """A folder laid out like `domyn/FinReflectKG-EvalBench` on the Hub: a README declaring the
    `default` config and `data/train-*.parquet` of rows, one triple per row with its chunk (3
    companies x 3 sections x 4 chunks; the first chunk of a section starts with its Item)."""
    rows = []
    for ticker in ("AAA", "BBB", "CCC"):
        page = 0
        for section in SECTIONS:
            for index in range(4):
                page += 1
                heading = f"{section}\n\n" if index == 0 else ""
                text = f"{heading}{ticker} reports revenue growth in part {page} of its filing."
                for number, target in enumerate(("revenue", "growth")):
                    rows.append(
                        {
                            "ticker": ticker.lower(),
                            "year": 2024,
                            "source_file": f"{ticker}_10K_2024.pdf",
                            "page_id": f"page_{page}",
                            "chunk_id": "chunk_1",
                            "triplet_id": f"{ticker}-{page}-{number}",
                            "entity": ticker.lower(),
                            "relationship": "discloses",
                            "target": target,
                            "chunk_text": text,
                            "is_faithfulness": 1,
                            "is_precision": 1,
                            "is_relevance": number,
                        }
                    )
    folder = root / "FinReflectKG-EvalBench"
    (folder / "data").mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "data" / "train-00000-of-00001.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
        "    path: data/train-*\n---\n\nRows of FinReflectKG-EvalBench, for a test.\n"
    )
    return folder


@contextlib.contextmanager
def paper_at_endpoints(
    verdict: int = 1, level: str = "good", *, considered: bool = False
) -> Iterator[list[str]]:
    """The official `paper` panel, each judge served by a scripted OpenAI-compatible server
    answering every triple with `verdict` and every span with `level` (`considered`: as
    `scripted_judges.considered` does, a verdict of its own per item); yields the `run` options."""
    reply = considered_answer if considered else partial(judge_answer, verdict=verdict, level=level)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(ScriptedServer.running([Reply(body=reply)])) for _ in PAPER]
        endpoints = ",".join(f"{n}={s.url}" for n, s in zip(PAPER, servers, strict=True))
        yield ["--judges", "paper", "--judge-endpoints", endpoints]


def considered_answer(body: dict) -> dict:
    """`scripted_judges.considered`, answered by a server."""
    schema = body["response_format"]["json_schema"]["schema"]
    return answer(scripted_judges.considered_answer(schema, body["messages"][-1]["content"]))


def register(board: Path, dataset: Path, *, pin: bool = False) -> None:
    """What a maintainer does for an official dataset: record its slice's fingerprint and span
    list (`dataset info` prints them) in the leaderboard's datasets.json; `pin`: as the pinned
    data version (of a made-up commit: the folder has none), whose entries are ranked."""
    sliced = load_benchmark(str(dataset), slice=OFFICIAL)
    entries = json.loads((REPO / "leaderboard" / "datasets.json").read_text())
    entries[0].update(
        fingerprint=sliced.fingerprint,
        spans=len(sliced.spans),
        span_list_sha256=span_list([s.span_id for s in sliced.spans])["sha256"],
    )
    if pin:
        entries[0].update(revision="c0ffee" * 6 + "c0ff", pinned="c0ffee" * 6 + "c0ff")
    board.mkdir(parents=True, exist_ok=True)
    (board / "datasets.json").write_text(json.dumps(entries))
