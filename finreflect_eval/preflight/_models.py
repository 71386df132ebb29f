"""The models a run loads: each Hub id exists and is accessible (and what it would download),
each local path exists, each endpoint answers; and the disk the downloads need. Nothing here
downloads a file: the Hub is asked for metadata only, the local cache is only looked at."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError, first_line
from finreflect_eval._util.resources import install_hint
from finreflect_eval.models import ModelSpec, check_spec, get_backend, probe_endpoint
from finreflect_eval.models.embedded import EMBEDDED_MODELS
from finreflect_eval.pipeline.judging import JudgeSpec

HUB_TIMEOUT = 10.0  # seconds for one metadata request
ENDPOINT_TIMEOUT = 5.0  # seconds for an endpoint's `GET /models`
# What loading a model in this process imports, by backend, and the extra that installs it.
PACKAGES = {"hf": (("torch", "transformers", "outlines"), "hf"), "vllm": (("vllm",), "vllm")}
WEIGHT_BACKENDS = ("hf", "vllm")  # the backends that load weights from the Hub or a folder


@dataclass
class ModelCheck:
    """What a model of the run needs: where its weights come from, what they still download
    (bytes; None: unknown), and the needs that are not met (one line each)."""

    role: str
    spec: ModelSpec
    source: str = ""
    sha: str | None = None
    download: int | None = 0
    problems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.role} ({self.spec.model})"

    def unmet(self, need: str) -> None:
        self.problems.append(f"{self.name}: {need}")


class Hub:
    """The Hub as the check sees it: offline when HF_HUB_OFFLINE is set, or from the first
    request that finds it unreachable (then no further request waits for it)."""

    def __init__(self) -> None:
        from huggingface_hub import HfApi, is_offline_mode

        self.api = HfApi()
        self.offline: str | None = "offline (HF_HUB_OFFLINE=1)" if is_offline_mode() else None
        self.unreachable = False  # asked, and no answer came: loading Hub data would only retry
        # The commit each Hub dataset revision is at, asked once (`data.commits_remembered`).
        self.dataset_commits: dict[tuple[str, str | None], str] = {}

    def ask(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`call`'s answer; None when the Hub cannot be reached (`offline` says why). HTTP
        errors (not found, gated) are raised."""
        from huggingface_hub import get_session

        if self.offline:
            return None
        # The transport errors of the HTTP library the Hub client uses (httpx in
        # huggingface_hub 1, httpx2 in 2), and offline mode's ConnectionError.
        library = importlib.import_module(type(get_session()).__module__.partition(".")[0])
        try:
            return call(*args, **kwargs)
        except (library.TransportError, ConnectionError) as exc:
            self.offline = f"the Hub is unreachable ({first_line(exc)})"
            self.unreachable = True
            return None


def check_model(role: str, spec: ModelSpec, hub: Hub, note: JudgeSpec | None = None) -> ModelCheck:
    """A model loaded in this process (hf, vllm, ...); `note`: a panel's facts about it."""
    check = ModelCheck(role, spec)
    try:
        check_spec(spec)  # the backend and its args, as the run checks them first
    except FinReflectError as exc:
        check.unmet(str(exc))
        return check
    packages, extra = PACKAGES.get(spec.backend, ((), ""))
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:  # one need, however many models use the backend
        check.problems.append(f"backend {spec.backend} needs {missing[0]}: {install_hint(extra)}")
    if spec.backend not in WEIGHT_BACKENDS:
        check.source = f"backend {spec.backend}"
        return check
    path = Path(spec.model).expanduser()
    embedded = EMBEDDED_MODELS.get(spec.model)
    if embedded is not None:
        check.source = f"embedded ({embedded.package})"
        if importlib.util.find_spec(embedded.package) is None:
            check.unmet(f"needs its package: {install_hint(embedded.extra)}")
    elif path.exists():
        check.source = "local file" if path.is_file() else "local folder"
    else:  # a Hub id (`check_spec` refused a local path that does not exist)
        if hub.offline is None:
            _from_hub(check, hub, note)
        if hub.offline and not check.source:  # offline, or found unreachable just now
            _from_cache(check, hub, note)
    return check


def _from_hub(check: ModelCheck, hub: Hub, note: JudgeSpec | None) -> None:
    """The repo's metadata (files and their sizes at the revision), then its access check."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    model, revision = check.spec.model, check.spec.args.get("revision")
    try:
        info = hub.ask(
            hub.api.model_info, model, revision=revision, files_metadata=True, timeout=HUB_TIMEOUT
        )
        if info is None:
            return  # unreachable: the local cache decides
        hub.ask(hub.api.auth_check, model)
    except GatedRepoError:
        check.unmet(_gated(model, note, denied=True))
        return
    except RepositoryNotFoundError:
        check.unmet(
            "not found on the Hub, or private: check the id (a private repo needs HF_TOKEN)"
        )
        return
    except RevisionNotFoundError:
        check.unmet(f"the Hub repo has no revision '{revision}'")
        return
    except (HfHubHTTPError, ValueError) as exc:  # ValueError: not a repo id
        check.unmet(f"not a local path or a Hub model ({first_line(exc)})")
        return
    check.source, check.sha = "Hub", info.sha
    sizes = {sibling.rfilename: sibling.size for sibling in info.siblings or []}
    weights = weight_files(list(sizes), check.spec.args.get("gguf_file"))
    if not weights:
        check.unmet("the repo has no safetensors or .bin weights (a GGUF repo: add gguf_file=NAME)")
        return
    todo = [
        name
        for name in weights
        if not _cached(try_to_load_from_cache(model, name, revision=info.sha))
    ]
    check.download = (
        None if any(sizes[name] is None for name in todo) else sum(sizes[n] for n in todo)
    )


def _from_cache(check: ModelCheck, hub: Hub, note: JudgeSpec | None) -> None:
    """Offline: a model complete in the local Hub cache needs nothing; else it is a need."""
    snapshot = cached_snapshot(
        check.spec.model, check.spec.args.get("revision"), check.spec.args.get("gguf_file")
    )
    if snapshot is not None:
        check.source, check.sha = "local Hub cache", snapshot.name
        return
    check.download = None if note is None or note.weights_gb is None else int(note.weights_gb * 1e9)
    need = (
        f"not in the local Hub cache, and {hub.offline}: it can be neither checked nor "
        "downloaded; download it online first, or give a local folder"
    )
    if note is not None and note.gated:
        need += f"; {_gated(check.spec.model, note, denied=False)}"
    check.unmet(need)


def weight_files(names: list[str], gguf_file: str | None = None) -> list[str]:
    """The files of a repo that loading it downloads (what transformers and vLLM take):
    the GGUF file asked for; else the top-level `model*.safetensors` (a repo may also keep a
    `consolidated.safetensors` copy), or any top-level safetensors; else the PyTorch .bin files."""
    if gguf_file:
        return [gguf_file] if gguf_file in names else []
    top = [name for name in names if "/" not in name]
    for chosen in (
        [n for n in top if n.startswith("model") and n.endswith(".safetensors")],
        [n for n in top if n.endswith(".safetensors")],
        [n for n in top if n.startswith("pytorch_model") and n.endswith(".bin")],
    ):
        if chosen:
            return sorted(chosen)
    return []


def cached_snapshot(model: str, revision: str | None, gguf_file: str | None = None) -> Path | None:
    """The cached snapshot of a Hub model at `revision` (default main) when its weights are all
    there (every shard of an index), else None."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model, gguf_file or "config.json", revision=revision)
    except ValueError:  # not a repo id
        return None
    if not _cached(found):
        return None
    snapshot = Path(found).parents[len(Path(gguf_file or "config.json").parts) - 1]
    if gguf_file:
        return snapshot
    names = [path.name for path in snapshot.iterdir()]
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if index in names:
            shards = set(json.loads((snapshot / index).read_text())["weight_map"].values())
            return snapshot if all((snapshot / shard).exists() for shard in shards) else None
    return snapshot if weight_files(names) else None


def _cached(found: Any) -> bool:
    return isinstance(found, str)  # try_to_load_from_cache: a path, or None / a "missing" marker


def _gated(model: str, note: JudgeSpec | None, *, denied: bool) -> str:
    from huggingface_hub import get_token

    url = (note and note.licence_url) or f"https://huggingface.co/{model}"
    if get_token() is None:
        return f"gated: accept the licence at {url} and set HF_TOKEN (HF_TOKEN is not set)"
    if denied:
        return f"gated: your token has not been granted access: accept the licence at {url}"
    return f"gated: accept the licence at {url} (HF_TOKEN is set; access unconfirmed offline)"


def check_endpoint(role: str, spec: ModelSpec) -> ModelCheck:
    """A model behind a server: listed, and asked `GET /models` (cheap, changes nothing)."""
    check = ModelCheck(role, spec, download=0)
    try:
        check_spec(spec)
        needs_httpx = hasattr(get_backend(spec.backend), "endpoint_path")
        if needs_httpx and importlib.util.find_spec("httpx") is None:
            check.problems.append(f"backend {spec.backend} needs httpx: {install_hint('api')}")
            return check
        answer = probe_endpoint(spec, ENDPOINT_TIMEOUT)
    except FinReflectError as exc:
        check.unmet(str(exc))
        return check
    if answer is None:  # a server of another kind: listed only
        check.source = f"endpoint (backend {spec.backend})"
    elif answer.error:
        check.unmet(f"{answer.error}: start the server, or fix its URL")
    else:
        said = f"HTTP {answer.status}" if answer.status else "connected; slow to list its models"
        check.source = f"endpoint {answer.shown} ({said})"
    return check


def hub_cache() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def free_bytes(folder: Path) -> int:
    """Free space where `folder` is, or would be created."""
    folder = folder.absolute()
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def disk_problem(checks: list[ModelCheck]) -> str | None:
    """The downloads (the known sizes) against the free space where the Hub cache lives: every
    model stays cached, so they add up."""
    needed = sum(check.download or 0 for check in checks)
    free = free_bytes(hub_cache())
    if needed <= free:
        return None
    unknown = any(check.download is None for check in checks)
    return (
        f"disk: the model weights to download need {'at least ' if unknown else ''}"
        f"{gigabytes(needed)}, but {hub_cache()} has {gigabytes(free)} free: free space there, "
        "or set HF_HOME (or HF_HUB_CACHE) to a folder on a larger disk"
    )


def gigabytes(size: int | None) -> str:
    return "unknown" if size is None else f"{size / 1e9:.1f} GB"
