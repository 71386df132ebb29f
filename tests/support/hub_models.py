"""A fake Hub of model repos on 127.0.0.1, for `run --check`: it answers what
`HfApi.model_info(..., files_metadata=True)` reads (the commit, the files with their sizes,
whether the repo is gated) and `auth_check`, and records every request path. It serves no file
(its own server, apart from `support.hub_server`, whose routes are datasets and uploads)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from support.chat_server import serving

_MODEL_PATH = re.compile(
    r"^/api/models/(?P<id>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+)|/(?P<action>auth-check))?$"
)
NOT_FOUND = (404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})


class ModelHub(ThreadingHTTPServer):
    """`models` maps a repo id to its files' sizes, whether it is gated and whether the token
    has been granted access to it; `paths` are the request paths, in order."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.models: dict[str, dict[str, Any]] = {}
        self.paths: list[str] = []

    def add_model(
        self, repo_id: str, files: dict[str, int], *, gated: bool = False, granted: bool = True
    ) -> str:
        """Add a repo; returns its commit sha."""
        self.models[repo_id] = {"files": files, "gated": gated, "granted": granted}
        return _sha(files)

    def answer(self, path: str) -> tuple[int, Any, dict[str, str]]:
        match = _MODEL_PATH.match(urlsplit(path).path)
        if match is None or match["id"] not in self.models:
            return NOT_FOUND  # and any file download
        model = self.models[match["id"]]
        if match["action"] == "auth-check":
            if model["gated"] and not model["granted"]:  # the header makes a GatedRepoError
                return 403, {"error": "access is restricted"}, {"X-Error-Code": "GatedRepo"}
            return 200, {}, {}
        files = model["files"]
        siblings = [
            {"rfilename": name, "size": size, "blobId": hashlib.sha1(name.encode()).hexdigest()}
            for name, size in sorted(files.items())
        ]
        info = {
            "id": match["id"],
            "sha": _sha(files),
            "private": False,
            "gated": "manual" if model["gated"] else False,
            "siblings": siblings,
        }
        return 200, info, {}


def _sha(files: dict[str, int]) -> str:
    # A stand-in commit id (40 hex digits) that changes with the files.
    return hashlib.sha1(json.dumps(sorted(files.items())).encode()).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    server: ModelHub

    def _serve(self) -> None:
        self.server.paths.append(self.path)
        status, payload, headers = self.server.answer(self.path)
        data = json.dumps(payload).encode()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.send_response(status)
            for key, value in {**headers, "Content-Type": "application/json"}.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    do_GET = do_HEAD = do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass


@contextlib.contextmanager
def model_hub() -> Iterator[ModelHub]:
    """A started fake Hub of model repos (its URL is `.url`), shut down on exit."""
    with serving(ModelHub()) as server:
        yield server
