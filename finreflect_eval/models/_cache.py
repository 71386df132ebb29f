"""A response cache in one SQLite file, shared safely by threads and processes.

Keys are hashes of (model identity, request); values are JSON. Writes are committed per batch,
so a killed run keeps everything it finished.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from finreflect_eval.errors import FinReflectError


class ResponseCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One connection per cache, guarded by a lock for threads; SQLite's own file locking
            # (WAL journal, busy timeout) serialises writers across processes.
            self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise FinReflectError(f"cannot open cache {self.path}: {exc}") from exc
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            for start in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, value FROM responses WHERE key IN ({marks})", chunk
                )
                found.update((key, json.loads(value)) for key, value in rows)
        return [found.get(key) for key in keys]

    def put_many(self, items: Iterable[tuple[str, dict[str, Any]]]) -> None:
        rows = [(key, json.dumps(value, ensure_ascii=False)) for key, value in items]
        if not rows:
            return
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
