"""A fake Hugging Face Hub on 127.0.0.1 for tests: it answers the requests the real
`huggingface_hub.HfApi` makes to create a repo, commit files to it and list them, keeps the
committed files in memory and records every request."""

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

from support.chat_server import serving

USER = "hf-test"  # whoami's name, and the namespace of a repo created without one

# `/api/{type}s/{namespace}/{name}[/{action}/{revision}[/{path in repo}]]`
_REPO_PATH = re.compile(
    r"^/api/(?P<type>model|dataset|space)s/(?P<id>[^/]+/[^/]+)"
    r"(?:/(?P<action>preupload|commit|tree|revision)/(?P<rev>[^/]+)(?P<sub>/.*)?)?$"
)

Answer = tuple[int, Any, dict[str, str]]  # status, JSON body, extra headers


@dataclass
class RecordedRequest:
    """One request as the server got it; header names are lower-cased."""

    method: str
    path: str  # URL path with query string
    headers: dict[str, str]
    body: bytes


def _oid(data: bytes) -> str:
    # A git blob hash, as the Hub reports for regular files: the client compares it with its own to
    # leave unchanged files out of a commit, so a re-upload behaves as against the real Hub.
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _head(files: dict[str, bytes]) -> str:
    # A stand-in commit id (40 hex digits) that changes whenever the files do.
    return hashlib.sha1(
        json.dumps(sorted((k, _oid(v)) for k, v in files.items())).encode()
    ).hexdigest()


class HubServer(ThreadingHTTPServer):
    """The fake Hub: `repos` maps a repo id to {"type", "private", "files": {path: bytes}}."""

    daemon_threads = True

    def __init__(self, fail_with: int | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.fail_with = fail_with
        self.requests: list[RecordedRequest] = []
        self.repos: dict[str, dict] = {}
        self.lock = threading.Lock()

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
            return self._route(request.method, urlsplit(request.path), request.body)

    def _route(self, method: str, url: Any, body: bytes) -> Answer:
        if (method, url.path) == ("GET", "/api/whoami-v2"):
            return 200, {"type": "user", "name": USER, "orgs": []}, {}
        if (method, url.path) == ("POST", "/api/validate-yaml"):  # asked for any README.md
            return 200, {"errors": [], "warnings": []}, {}
        if (method, url.path) == ("POST", "/api/repos/create"):
            return self._create(json.loads(body))
        match = _REPO_PATH.match(url.path)
        if match is None:
            return 404, {"error": f"fake Hub has no route for {method} {url.path}"}, {}
        repo = self.repos.get(match["id"])
        if repo is None or repo["type"] != match["type"]:
            # The header is what makes the client raise RepositoryNotFoundError.
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        files: dict[str, bytes] = repo["files"]
        if (method, match["action"]) == ("POST", "preupload"):
            # Every file "regular": contents come inline (base64) in the commit, never LFS or xet.
            modes = [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                | ({"oid": _oid(files[f["path"]])} if f["path"] in files else {})
                for f in json.loads(body)["files"]
            ]
            return 200, {"files": modes}, {}
        if (method, match["action"]) == ("POST", "commit"):
            return self._commit(match["type"], match["id"], repo, body)
        if (method, match["action"]) == ("GET", "tree"):
            recursive = parse_qs(url.query).get("recursive") == ["true"]
            return 200, _tree(files, unquote(match["sub"] or "").strip("/"), recursive), {}
        if method == "GET" and match["action"] in (None, "revision"):
            siblings = [{"rfilename": name} for name in sorted(files)]
            info = {"id": match["id"], "private": repo["private"], "sha": _head(files)}
            return 200, info | {"siblings": siblings}, {}
        return 404, {"error": f"fake Hub has no route for {method} {url.path}"}, {}

    def _create(self, payload: dict) -> Answer:
        repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
        kind = payload.get("type") or "model"
        url = f"{self.url}/{'' if kind == 'model' else kind + 's/'}{repo_id}"
        if repo_id in self.repos:
            # The Hub's answer; with exist_ok=True the client ignores the 409 and reads `url`.
            return 409, {"error": f"You already created this {kind} repo", "url": url}, {}
        private = payload.get("visibility") == "private"
        self.repos[repo_id] = {"type": kind, "private": private, "files": {}}
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
        repo["files"] = files
        oid = _head(files)
        commit_url = f"{self.url}/{'' if kind == 'model' else kind + 's/'}{repo_id}/commit/{oid}"
        return 200, {"commitUrl": commit_url, "commitOid": oid, "pullRequestUrl": None}, {}


def _tree(files: dict[str, bytes], folder: str, recursive: bool) -> list[dict]:
    """The Hub's tree listing of `folder`: its files and subfolders, all levels if `recursive`."""
    base = f"{folder}/" if folder else ""
    entries: dict[str, dict] = {}
    for name, data in sorted(files.items()):
        if not name.startswith(base):
            continue
        parts = name[len(base) :].split("/")
        for depth in range(1, len(parts) if recursive else min(len(parts), 2)):
            path = base + "/".join(parts[:depth])
            entries[path] = {"type": "directory", "path": path, "oid": _oid(path.encode())}
        if recursive or len(parts) == 1:
            entries[name] = {"type": "file", "path": name, "size": len(data), "oid": _oid(data)}
    return list(entries.values())


class _Handler(BaseHTTPRequestHandler):
    server: HubServer

    def _serve(self) -> None:
        headers = {key.lower(): value for key, value in self.headers.items()}
        body = self._read_body(headers)
        request = RecordedRequest(self.command, self.path, headers, body)
        status, payload, extra = self.server.handle_request_of(request)
        data = json.dumps(payload).encode()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client may have left
            self.send_response(status)
            for key, value in extra.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
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
