"""The one base type of user-facing errors (bad input, config or files, a backend that cannot
run as asked): its message says what is wrong and how to fix it, and the CLI prints it as one
line with exit code 2. Everything else is a bug and keeps its traceback."""


class UserError(Exception):
    """A mistake in what was asked; the message names it and the way out."""
