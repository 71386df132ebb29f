"""Reading a fake Hub repo's files at one commit, as the real clients do: a file's bytes (with the
headers huggingface_hub reads: the commit, the ETag, the size; a byte range when asked), the tree
listing and `paths-info`. `support.hub_server` routes the requests here."""

from __future__ import annotations

import hashlib
import re
from typing import Any

Answer = tuple[int, Any, dict[str, str]]  # status, JSON body (or raw bytes), extra headers

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def blob_id(data: bytes) -> str:
    """A git blob hash, as the Hub reports for regular files: the client compares it with its own
    to leave unchanged files out of a commit, and keys its download cache by it (the ETag)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def resolve(files: dict[str, bytes], path: str, commit: str, byte_range: str | None) -> Answer:
    """`/resolve/{revision}/{path}`: the file at that commit (HEAD gets the same headers), all of
    it or the range asked for (`bytes=a-b`, `bytes=a-`, `bytes=-n`)."""
    data = files.get(path)
    if data is None:
        return 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}
    headers = {
        "X-Repo-Commit": commit,
        "ETag": f'"{blob_id(data)}"',
        "Accept-Ranges": "bytes",
        "Content-Type": "application/octet-stream",
    }
    found = _RANGE.match(byte_range or "")
    if found is None:
        return 200, data, headers
    first, last = found.groups()
    if first:
        start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
    else:  # the last n bytes
        start, end = max(len(data) - int(last or 0), 0), len(data) - 1
    if start > end:
        return 416, {"error": "Range not satisfiable"}, {"Content-Range": f"bytes */{len(data)}"}
    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
    return 206, data[start : end + 1], headers


def tree(files: dict[str, bytes], folder: str, recursive: bool) -> list[dict]:
    """The Hub's tree listing of `folder`: its files and subfolders, all levels if `recursive`."""
    base = f"{folder}/" if folder else ""
    entries: dict[str, dict] = {}
    for name, data in sorted(files.items()):
        if not name.startswith(base):
            continue
        parts = name[len(base) :].split("/")
        for depth in range(1, len(parts) if recursive else min(len(parts), 2)):
            path = base + "/".join(parts[:depth])
            entries[path] = _folder(path)
        if recursive or len(parts) == 1:
            entries[name] = _file(name, data)
    return list(entries.values())


def paths_info(files: dict[str, bytes], paths: list[str]) -> list[dict]:
    """`paths-info`: each path that is a file or a folder at the commit (others left out)."""
    found = []
    for path in (p.strip("/") for p in paths):
        if path in files:
            found.append(_file(path, files[path]))
        elif any(name.startswith(f"{path}/") for name in files):
            found.append(_folder(path))
    return found


def _file(path: str, data: bytes) -> dict:
    return {"type": "file", "path": path, "size": len(data), "oid": blob_id(data)}


def _folder(path: str) -> dict:
    return {"type": "directory", "path": path, "oid": blob_id(path.encode())}
