"""Results and samples pushed to a Hugging Face Hub dataset repo, as lm-eval's
`--hf_hub_log_args` does: `<model>/results_<run>_<panel>.json` and
`<model>/samples_<task>_<run>.jsonl`, with a dataset card whose `configs` make each task's
samples (and the results) a config of `datasets.load_dataset`: `<model>__<task>`, one split
per run and `latest`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from finreflect_eval._util.errors import FinReflectError, first_invalid_field, first_line
from finreflect_eval._util.hub import check_repo_id
from finreflect_eval._util.redaction import find_secret
from finreflect_eval.records import Results
from finreflect_eval.runs.store import Run

DEFAULT_REPO = "finreflect-eval-results"


class HubLogArgs(BaseModel):
    """lm-eval's `--hf_hub_log_args` fields (`hub_repo_name` is its deprecated name for both
    repos; `gated` is not offered)."""

    model_config = ConfigDict(extra="forbid")

    hub_results_org: str = ""  # default: the token's user
    hub_repo_name: str = ""
    details_repo_name: str = ""
    results_repo_name: str = ""
    push_results_to_hub: bool = False
    push_samples_to_hub: bool = False
    public_repo: bool = False  # False: the repos are private, named `<name>-private` (lm-eval)
    token: str = ""  # default: $HF_TOKEN, else the saved login
    leaderboard_url: str = ""
    point_of_contact: str = ""

    @classmethod
    def parse(cls, args: dict[str, Any], flag: str = "--hf_hub_log_args") -> HubLogArgs:
        """The fields given (errors name `flag`, the option as the user typed it)."""
        try:
            parsed = cls.model_validate(args)
        except ValidationError as exc:
            raise FinReflectError(f"{flag}: {first_invalid_field(exc)}") from None
        org = parsed.hub_results_org or "user"  # (the token's user: any valid name stands in)
        for kind in ("results", "details"):
            check_repo_id(parsed.repo(kind, org), flag)
        return parsed

    def repo(self, kind: str, org: str) -> str:
        name = (
            self.hub_repo_name
            or (self.results_repo_name if kind == "results" else "")
            or self.details_repo_name
            or DEFAULT_REPO
        )
        return f"{org}/{name}" if self.public_repo else f"{org}/{name}-private"


def push_run(run: Run, results: Results, args: HubLogArgs) -> list[str]:
    """Upload what `args` asks (results, samples) of a scored run; the URLs of the repos. A
    failure is one line that says the local files are kept."""
    from huggingface_hub import CommitOperationAdd, HfApi

    model = results.model_name_sanitized
    files = {"results": [], "details": []}
    if args.push_results_to_hub:
        path = run.store.results_path(results.run, results.judges.panel)
        files["results"].append(path)
    if args.push_samples_to_hub:
        files["details"] += [run.folder / info.samples for info in run.manifest.tasks.values()]
    if not any(files.values()):
        return []
    for part, record in (("results", results), ("manifest", run.manifest)):  # runs of old
        secret = find_secret(record.model_dump(mode="json"), part)  # versions recorded them
        if secret:
            raise FinReflectError(f"not pushed: {secret} holds a secret; the files stay local")
    api = HfApi(token=args.token or os.environ.get("HF_TOKEN") or None)
    try:
        org = args.hub_results_org or api.whoami()["name"]
        repos: dict[str, list[Path]] = {}
        for kind, paths in files.items():
            repos.setdefault(args.repo(kind, org), []).extend(paths)
        urls = []
        for repo, paths in repos.items():
            url = api.create_repo(
                repo, repo_type="dataset", private=not args.public_repo, exist_ok=True
            )
            present = api.list_repo_files(repo, repo_type="dataset")
            names = [f"{model}/{path.name}" for path in paths]
            card = dataset_card(sorted({*present, *names}), args)
            operations = [
                CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(path))
                for name, path in zip(names, paths, strict=True)
            ]
            operations.append(CommitOperationAdd("README.md", card.encode("utf-8")))
            api.create_commit(
                repo,
                operations,
                repo_type="dataset",
                commit_message=f"finreflect-eval run {results.run} of {results.model_name}",
            )
            urls.append(str(url))
        return urls
    except Exception as exc:  # the network, the Hub's answer, offline mode, a bad token
        raise FinReflectError(
            f"cannot push to the Hub ({first_line(exc)}); the results are kept in {run.folder}"
        ) from exc


def dataset_card(files: list[str], args: HubLogArgs) -> str:
    """The card of a results repo holding `files`: a config per model and task (its samples,
    a split per run, `latest` the newest) and per model for its results files."""
    configs: dict[str, dict[str, str]] = {}  # config name -> {run: path}
    for path in files:
        model, _, name = path.partition("/")
        stem, suffix = Path(name).stem, Path(name).suffix
        if stem.startswith("samples_") and suffix == ".jsonl":
            task, _, run = stem.removeprefix("samples_").rpartition("_")
            configs.setdefault(f"{model}__{task}", {})[run] = path
        elif stem.startswith("results_") and suffix == ".json":
            run = stem.split("_")[1]
            configs.setdefault(f"{model}__results", {})[run] = path
    entries = []
    for config, runs in sorted(configs.items()):
        splits = [{"split": _split(run), "path": path} for run, path in sorted(runs.items())]
        latest = runs[max(runs)]
        entries.append(
            {"config_name": config, "data_files": [*splits, {"split": "latest", "path": latest}]}
        )
    header = yaml.safe_dump({"configs": entries, "tags": ["finreflect-eval"]}, sort_keys=False)
    lines = [
        "---",
        header.rstrip(),
        "---",
        "# finreflect-eval results",
        "",
        "Results and per-span samples of finreflect-eval runs (KG extraction from 10-K filings, "
        "scored by a panel of LLM judges). Each `<model>__<task>` config holds a task's samples: "
        "one split per run, `latest` the newest.",
    ]
    if args.leaderboard_url:
        lines += ["", f"Leaderboard: {args.leaderboard_url}"]
    if args.point_of_contact:
        lines += ["", f"Point of contact: {args.point_of_contact}"]
    return "\n".join(lines) + "\n"


def _split(run: str) -> str:
    """A run id as a split name (letters, digits and underscores)."""
    return run.replace("-", "_")
