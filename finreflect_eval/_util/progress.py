"""Whether the pipeline shows progress bars (on stderr): yes on the command line, no in the
Python API unless asked (`show_progress=True`). One setting for the whole process, not per
thread: endpoint judges call their models from worker threads."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

_shown = True


def shown() -> bool:
    """Whether model calls show a progress bar now."""
    return _shown


@contextmanager
def progress_bars(show: bool) -> Iterator[None]:
    """Progress bars on or off inside the block. Off also turns off the bars of the Hugging Face
    libraries (downloads, dataset preparation, loading weights); every setting is restored after."""
    global _shown
    before = _shown
    _shown = show
    try:
        if show:
            yield
        else:
            with _hugging_face_bars_off():
                yield
    finally:
        _shown = before


@contextmanager
def _hugging_face_bars_off() -> Iterator[None]:
    import datasets
    import huggingface_hub.utils as hub

    datasets_on = datasets.is_progress_bar_enabled()
    hub_on = not hub.are_progress_bars_disabled()
    transformers_on = _transformers_bars_on()
    with warnings.catch_warnings():  # an environment variable that forces bars on wins, quietly
        warnings.simplefilter("ignore")
        datasets.disable_progress_bars()
        hub.disable_progress_bars()  # transformers, if first imported inside, reads this one
        _set_transformers_bars(False)
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # transformers first: switching its bars switches the hub's too.
            _set_transformers_bars(hub_on if transformers_on is None else transformers_on)
            (hub.enable_progress_bars if hub_on else hub.disable_progress_bars)()
            if datasets_on:
                datasets.enable_progress_bars()


def _transformers_bars_on() -> bool | None:
    """Whether transformers shows its bars; None when it is not imported (importing it here
    would cost seconds for a run that may never use it)."""
    logging = sys.modules.get("transformers.utils.logging")
    return None if logging is None else logging.is_progress_bar_enabled()


def _set_transformers_bars(on: bool) -> None:
    logging = sys.modules.get("transformers.utils.logging")
    if logging is not None:
        (logging.enable_progress_bar if on else logging.disable_progress_bar)()
