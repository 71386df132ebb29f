"""The installed package's version, and any installed package's."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("finreflect-eval")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"


def installed_version(name: str) -> str | None:
    """The version of an installed distribution; None where it is not installed."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None
