"""The `finreflect-eval` command line. Every error reaches the user as one line naming its cause
(a refused submission: that line, then a line per reason; `--verbosity DEBUG` adds the
traceback), with a documented exit code: 0 success, 1 a problem with the input or the
environment, 2 a usage error, 3 an internal error, 130 interrupted.

May import every room: it is the top floor (`api`, `leaderboard`, `view`, `preflight`, `pipeline`
and below).
"""

from __future__ import annotations

import errno
import logging
import sys
import traceback
from collections.abc import Sequence

from finreflect_eval._util.errors import FinReflectError, Refusal, first_line
from finreflect_eval._util.redaction import RedactingFilter, redact_text

logger = logging.getLogger("finreflect_eval")

USER_ERROR, USAGE_ERROR, INTERNAL_ERROR, INTERRUPTED = 1, 2, 3, 130


def main(argv: Sequence[str] | None = None) -> int:
    from finreflect_eval.cli.parser import parse_args

    args = parse_args(sys.argv[1:] if argv is None else argv)  # a usage error exits 2
    level = getattr(logging, args.verbosity)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # at every level, no URL credentials
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    if level > logging.DEBUG:  # httpx logs every request at INFO: one line per model call
        for name in ("httpx", "httpx2", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        args.func(args)
    except KeyboardInterrupt:
        print("finreflect-eval: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        code, message = explain(exc)
        if level <= logging.DEBUG:
            print(redact_text("".join(traceback.format_exception(exc))), end="", file=sys.stderr)
        print(f"finreflect-eval: {redact_text(message)}", file=sys.stderr)
        return code
    return 0


def explain(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one line for an error that reached the command line (a refusal's
    reasons follow it, a line each)."""
    if isinstance(exc, Refusal):
        return USER_ERROR, f"error: {exc}"
    if isinstance(exc, FinReflectError):
        return USER_ERROR, f"error: {_one_line(str(exc))}"
    if isinstance(exc, OSError):  # the disk, the filesystem, permissions
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        if exc.errno == errno.ENOSPC:
            return USER_ERROR, f"error: no space left on the device{where}; nothing was lost"
        if exc.strerror:
            return USER_ERROR, f"error: {exc.strerror}{where}"
        return USER_ERROR, f"error: {first_line(exc)}"
    if isinstance(exc, UnicodeDecodeError):
        return USER_ERROR, f"error: not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, MemoryError):
        return USER_ERROR, "error: out of memory"
    return INTERNAL_ERROR, (
        f"internal error: {first_line(exc)} (a bug: please report it; --verbosity DEBUG shows "
        "the traceback)"
    )


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines) if len(lines) <= 3 else lines[0]
