"""The one exception type the CLI turns into a one-line message (no traceback)."""


class FinReflectError(Exception):
    """A problem with the user's input or environment, explained in one line."""
