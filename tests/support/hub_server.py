"""A fake Hugging Face Hub on 127.0.0.1 for tests: it answers the requests the real
`huggingface_hub.HfApi` makes to create a repo, commit files to it and list them, and those
`datasets.load_dataset` and `HfApi().dataset_info` make to read a repo at a revision (`main`, the
newest commit, or an older commit's sha; the files come from `support.hub_files`). It keeps every
commit's files in memory and records every request."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from support import hub_files
from support.chat_server import serving
from support.hub_files import Answer, blob_id

USER = "hf-test"  # whoami's name, and the namespace of a repo created without one

# `/api/{type}s/{namespace}/{name}[/{action}/{revision}[/{path in repo}]]`
_REPO_PATH = re.compile(
    r"^/api/(?P<type>model|dataset|space)s/(?P<id>[^/]+/[^/]+)"
    r"(?:/(?P<action>preupload|commit|tree|revision|paths-info)/(?P<rev>[^/]+)(?P<sub>/.*)?)?$"
)
# `/{type}s/{namespace}/{name}/resolve/{revision}/{path in repo}` (a model: no `{type}s/`)
_FILE_PATH = re.compile(
    r"^/(?:(?P<type>dataset|space)s/)?(?P<id>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"
)


@dataclass
class RecordedRequest:
    """One request as the server got it; header names are lower-cased."""

    method: str
    path: str  # URL path with query string
    headers: dict[str, str]
    body: bytes


def _commit_id(parent: str | None, files: dict[str, bytes]) -> str:
    # A stand-in commit id (40 hex digits) of the parent and the files: each commit its own.
    listing = [parent, sorted((k, blob_id(v)) for k, v in files.items())]
    return hashlib.sha1(json.dumps(listing).encode()).hexdigest()


class HubServer(ThreadingHTTPServer):
    """The fake Hub: `repos` maps a repo id to {"type", "private", "files": {path: bytes} (the
    newest commit's), "commits": [(sha, files), ...] (oldest first; `main` is the last)}."""

    daemon_threads = True

    def __init__(self, fail_with: int | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.fail_with = fail_with
        self.requests: list[RecordedRequest] = []
        self.repos: dict[str, dict] = {}
        self.lock = threading.Lock()

    def add_commit(self, repo_id: str, files: dict[str, bytes], kind: str = "dataset") -> str:
        """Commit these files (the whole tree) to `main` of the repo, created if it is not there
        yet; returns the commit's sha. The earlier commits stay readable by their sha."""
        with self.lock:
            repo = self.repos.get(repo_id) or self._new_repo(repo_id, kind, private=False)
            return _add_commit(repo, files)

    def write_repo(self, repo_id: str, folder: Path) -> None:
        """Write the repo's files under `folder`, e.g. for `datasets.load_dataset`."""
        for name, data in self.repos[repo_id]["files"].items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)

    def handle_request_of(self, request: RecordedRequest) -> Answer:
        with self.lock:  # handlers run on their own threads; repos change under the lock only
            self.requests.append(request)
            if self.fail_with is not None:
                return self.fail_with, {"error": f"scripted failure {self.fail_with}"}, {}
            return self._route(request, urlsplit(request.path))

    def _route(self, request: RecordedRequest, url: Any) -> Answer:
        method, body = request.method, request.body
        if (method, url.path) == ("GET", "/api/whoami-v2"):
            return 200, {"type": "user", "name": USER, "orgs": []}, {}
        if (method, url.path) == ("POST", "/api/validate-yaml"):  # asked for any README.md
            return 200, {"errors": [], "warnings": []}, {}
        if (method, url.path) == ("POST", "/api/repos/create"):
            return self._create(json.loads(body))
        match = _REPO_PATH.match(url.path) or _FILE_PATH.match(url.path)
        if match is None:
            return 404, {"error": f"fake Hub has no route for {method} {url.path}"}, {}
        repo = self.repos.get(match["id"])
        if repo is None or repo["type"] != (match["type"] or "model"):
            # The header is what makes the client raise RepositoryNotFoundError.
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        # Reads are at the revision asked for (none: `main`); writes go to `main`.
        found = _at_revision(repo, unquote(match["rev"] or "main"))
        if found is None:
            return 404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
        sha, files = found
        if "path" in match.groupdict():
            if method not in ("GET", "HEAD"):
                return 405, {"error": f"fake Hub has no route for {method} {url.path}"}, {}
            path = unquote(match["path"])
            return hub_files.resolve(files, path, sha, request.headers.get("range"))
        if (method, match["action"]) == ("POST", "preupload"):
            # Every file "regular": contents come inline (base64) in the commit, never LFS or xet.
            modes = [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                | ({"oid": blob_id(files[f["path"]])} if f["path"] in files else {})
                for f in json.loads(body)["files"]
            ]
            return 200, {"files": modes}, {}
        if (method, match["action"]) == ("POST", "commit"):
            return self._commit(match["type"], match["id"], repo, body)
        if (method, match["action"]) == ("GET", "tree"):
            recursive = parse_qs(url.query).get("recursive") == ["true"]
            return 200, hub_files.tree(files, unquote(match["sub"] or "").strip("/"), recursive), {}
        if (method, match["action"]) == ("POST", "paths-info"):
            return 200, hub_files.paths_info(files, parse_qs(body.decode()).get("paths", [])), {}
        if method == "GET" and match["action"] in (None, "revision"):
            siblings = [{"rfilename": name} for name in sorted(files)]
            info = {"id": match["id"], "private": repo["private"], "sha": sha}
            return 200, info | {"siblings": siblings}, {}
        return 404, {"error": f"fake Hub has no route for {method} {url.path}"}, {}

    def _new_repo(self, repo_id: str, kind: str, private: bool) -> dict:
        repo = {"type": kind, "private": private, "files": {}, "commits": []}
        _add_commit(repo, {})  # as on the Hub, a new repo has a first commit
        self.repos[repo_id] = repo
        return repo

    def _create(self, payload: dict) -> Answer:
        repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
        kind = payload.get("type") or "model"
        url = f"{self.url}/{'' if kind == 'model' else kind + 's/'}{repo_id}"
        if repo_id in self.repos:
            # The Hub's answer; with exist_ok=True the client ignores the 409 and reads `url`.
            return 409, {"error": f"You already created this {kind} repo", "url": url}, {}
        self._new_repo(repo_id, kind, private=payload.get("visibility") == "private")
        return 200, {"url": url, "name": repo_id}, {}

    def _commit(self, kind: str, repo_id: str, repo: dict, body: bytes) -> Answer:
        files = dict(repo["files"])  # applied only once every line is understood
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        for line in lines[1:]:  # the first is the header: summary and description
            key, value = line["key"], line["value"]
            if key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                files.pop(value["path"], None)
            elif key == "deletedFolder":
                prefix = value["path"].rstrip("/") + "/"
                files = {k: v for k, v in files.items() if not k.startswith(prefix)}
            else:  # lfsFile: we never asked for LFS
                return 400, {"error": f"fake Hub does not take {key!r} commit lines"}, {}
        oid = _add_commit(repo, files)
        commit_url = f"{self.url}/{'' if kind == 'model' else kind + 's/'}{repo_id}/commit/{oid}"
        return 200, {"commitUrl": commit_url, "commitOid": oid, "pullRequestUrl": None}, {}


def _add_commit(repo: dict, files: dict[str, bytes]) -> str:
    parent = repo["commits"][-1][0] if repo["commits"] else None
    sha = _commit_id(parent, files)
    repo["files"] = dict(files)  # the newest commit's files, the same dict: a test may edit them
    repo["commits"].append((sha, repo["files"]))
    return sha


def _at_revision(repo: dict, revision: str) -> tuple[str, dict[str, bytes]] | None:
    """(sha, files) of `main` (the newest commit) or of a commit by its sha; None: no such."""
    if revision == "main":
        return repo["commits"][-1]
    return next((commit for commit in repo["commits"] if commit[0] == revision), None)


class _Handler(BaseHTTPRequestHandler):
    server: HubServer

    def _serve(self) -> None:
        headers = {key.lower(): value for key, value in self.headers.items()}
        body = self._read_body(headers)
        request = RecordedRequest(self.command, self.path, headers, body)
        status, payload, extra = self.server.handle_request_of(request)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        extra = {"Content-Type": "application/json", "Content-Length": str(len(data))} | extra
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client may have left
            self.send_response(status)
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    def _read_body(self, headers: dict[str, str]) -> bytes:
        # Chunked too: a client that streamed its NDJSON commit would send no Content-Length.
        if headers.get("transfer-encoding") != "chunked":
            return self.rfile.read(int(headers.get("content-length", 0)))
        chunks = []
        while size := int(self.rfile.readline().split(b";")[0], 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
        self.rfile.readline()
        return b"".join(chunks)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass


@contextlib.contextmanager
def hub_server(fail_with: int | None = None) -> Iterator[HubServer]:
    """A started fake Hub (its URL is `.url`), shut down on exit; fail_with: answer every request
    with this HTTP status (e.g. 500/401) to test failures."""
    with serving(HubServer(fail_with)) as server:
        yield server
