"""User-facing errors.

Anything raised as an `EagleLabError` is printed by the CLI as one line
(``eagle3lab: error: ...``) with exit code 2, never as a traceback. Modules
subclass it for errors a caller may want to catch specifically.
"""


class EagleLabError(Exception):
    """An error whose message is meant for the user, not a bug."""

    exit_code = 2


class ServerError(EagleLabError):
    """A server could not be started, reached or stopped (or its command line cannot be built)."""
