"""The base class of the toolkit's named input errors, and the commands' exit statuses.

Every error about something a user gives the toolkit (an audio file, a bundle or export
folder, a data folder, an annotation, a cache item, an argument) is an `InvalidInput`
whose message names the file, field or argument and says what was expected. Commands
turn it into one line on stderr and an exit status, never a traceback: `EXIT_OK` (0),
`EXIT_SOME_INPUTS` (1), `EXIT_USAGE` (2), `EXIT_INTERRUPTED` (130) and
`EXIT_BROKEN_PIPE` (141). Any other exception is a bug and keeps its traceback. What
each status means: docs/usage.md, "Bundles".
"""

from __future__ import annotations

EXIT_OK, EXIT_SOME_INPUTS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141


class InvalidInput(ValueError):
    """Something given to the toolkit that cannot be used; the message names it."""
