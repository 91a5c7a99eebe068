"""Exceptions that map to the `kit` command's exit codes."""


class BadInput(ValueError):
    """The input is malformed or names something that does not exist (exit code 2)."""

    exit_code = 2


class Unsafe(RuntimeError):
    """The request is well formed but cannot be carried out safely (exit code 3)."""

    exit_code = 3


class Stuck(RuntimeError):
    """A wait ended without what it waited for: nothing moved for too long, or it never can
    (exit code 1, as for "not done")."""

    exit_code = 1
