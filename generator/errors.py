"""Problems a user can fix. Each prints as one line naming the file or input at fault.

Anything else that escapes is a bug in errorkb and keeps its traceback.
"""

# Exit codes of every command (README): done; bad input, said in one line; bad usage; done, but
# something was skipped or needs attention (an unparseable upstream file, stale or orphaned content).
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3


class ErrorkbError(Exception):
    """A problem with errorkb's input, printed as one line without a traceback."""


class SourceError(ErrorkbError):
    """The upstream source cannot be read: unknown spec, missing revision, corrupt download."""


class DownloadError(SourceError):
    """The package index or an archive on it cannot be reached, or sent something other than
    what it lists: worth trying again, unlike a release that cannot be read."""


class ConfigError(ErrorkbError):
    """`errorkb.toml` is missing a value or has one of the wrong type."""


class ContentError(ErrorkbError):
    """One or more curated content files are invalid; the message lists every problem."""


class BuildError(ErrorkbError):
    """The site cannot be written: output folder locked, not writable, or another build running."""
