"""Imported at start-up when this folder is on PYTHONPATH: every rename into place (how every
file of a run is written) fails as on a full disk, so a test can see what a full disk does."""

import errno
import os


def _full(src, dst, *args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))


os.replace = _full
