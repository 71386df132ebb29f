"""The one exception type the CLI turns into a one-line message (no traceback), and helpers that
make one line out of other libraries' errors."""

from __future__ import annotations

from pydantic import ValidationError


class FinReflectError(Exception):
    """A problem with the user's input or environment, explained in one line."""


# The Python API's argument errors are also the built-in kinds, so a caller that catches
# TypeError or ValueError (as for any Python function) still catches them.
class ArgumentTypeError(FinReflectError, TypeError):
    """An argument of the Python API of a type it does not take; the message names it."""


class ArgumentValueError(FinReflectError, ValueError):
    """An argument of the Python API with a value it does not take; the message names it."""


def first_line(exc: BaseException | str) -> str:
    """`Type: first line of the message` (libraries often add pages of context below)."""
    if isinstance(exc, str):
        lines = exc.strip().splitlines()
        return lines[0] if lines else ""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def first_invalid_field(exc: ValidationError, top: str = "(top level)") -> str:
    """`field 'a.b': message` for the first error of a pydantic validation."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or top
    return f"field '{field}': {error['msg']}"
