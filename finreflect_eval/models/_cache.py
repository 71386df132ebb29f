"""A response cache in one SQLite file, shared safely by threads and processes.

Keys are hashes of (model identity, request); values are JSON. Writes are committed per batch,
so a killed run keeps everything it finished.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from finreflect_eval._util.errors import FinReflectError


class ResponseCache:
    """The file is created with the first answer stored: a run refused before any model call
    leaves none behind."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if self.path.exists():  # a file that is not a cache is an error before any call
            self._connect()
        else:  # and so is a place where it could not be created
            folder = next(p for p in self.path.parents if p.exists())
            if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
                raise FinReflectError(f"cannot open cache {self.path}: {folder} is not writable")

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # One connection per cache, guarded by a lock for threads; SQLite's own file
                # locking (WAL journal, busy timeout) serialises writers across processes.
                db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS responses "
                    "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                )
                db.commit()
            except (OSError, sqlite3.Error) as exc:
                raise FinReflectError(f"cannot open cache {self.path}: {exc}") from exc
            self._db = db
        return self._db

    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            if self._db is None and not self.path.exists():
                return [None] * len(keys)
            db = self._connect()
            for start in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(f"SELECT key, value FROM responses WHERE key IN ({marks})", chunk)
                found.update((key, json.loads(value)) for key, value in rows)
        return [found.get(key) for key in keys]

    def put_many(self, items: Iterable[tuple[str, dict[str, Any]]]) -> None:
        rows = [(key, json.dumps(value, ensure_ascii=False)) for key, value in items]
        if not rows:
            return
        with self._lock:
            db = self._connect()
            with db:
                db.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            if self._db is None and not self.path.exists():
                return 0
            return self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
