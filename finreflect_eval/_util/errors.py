"""The one exception type the CLI turns into a one-line message (no traceback; a refused
submission lists its reasons, a line each), and helpers that make one line out of other
libraries' errors."""

from __future__ import annotations

from pydantic import ValidationError


class FinReflectError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class Refusal(FinReflectError):
    """A submission refused, with every reason found at once (fixing one and resubmitting hours
    later only to meet the next would waste a run): `refused: <reason>` when there is one, else
    `refused: N reasons` and then a line per reason, after `where` (a stored entry's path). The
    CLI prints every line of it."""

    def __init__(self, reasons: list[str], where: str = "") -> None:
        self.reasons = reasons
        if len(reasons) == 1:
            lines = [f"{where}refused: {reasons[0]}"]
        else:
            lines = [f"{where}refused: {len(reasons)} reasons", *(f"- {r}" for r in reasons)]
        super().__init__("\n".join(lines))


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
