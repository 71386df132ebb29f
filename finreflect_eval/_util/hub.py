"""Names on the Hugging Face Hub, checked before anything is written or uploaded: a typo in a
repo id is the user's to fix, and must never read as a network problem."""

from __future__ import annotations

from finreflect_eval._util.errors import FinReflectError, first_line


def check_repo_id(repo_id: str, what: str) -> str:
    """`repo_id` when it can name a Hub repo (`org/name`, or `name`); else a one-line error
    naming `what` (the flag or field that gave it)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise FinReflectError(
            f"{what}: {repo_id!r} is not a Hub repo id (org/name): {first_line(exc)}"
        ) from None
    return repo_id
