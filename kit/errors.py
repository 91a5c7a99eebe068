"""Exceptions that map to the `kit` command's exit codes."""
from __future__ import annotations

import functools

INTERRUPTED = 130  # exit code after Ctrl-C (128 + SIGINT), as a shell reports it


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


class Unreachable(BadInput):
    """The cluster cannot be reached (no answer, connection or session lost): exit code 2, and
    what a backend's `connection_lost` names, so that a long-running caller retries on it."""


def translate_errors(translate):
    """A class decorator: each public method of the class (and ``__enter__``) turns what
    ``translate(exc)`` maps into one of kit's errors (the library's own exception otherwise
    propagates as it is). A backend's library errors so reach its callers as kit's alone.

    Parameters
    ----------
    translate : callable
        ``exc -> BadInput | Unsafe | Stuck | None``.
    """
    def wrap(method):
        @functools.wraps(method)
        def call(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except (BadInput, Unsafe, Stuck):
                raise
            except Exception as e:  # noqa: BLE001  (each library's own base class differs)
                mapped = translate(e)
                if mapped is None:
                    raise
                raise mapped from None
        return call

    def decorate(cls):
        for name, value in list(vars(cls).items()):
            if callable(value) and not isinstance(value, type) and (not name.startswith("_") or name == "__enter__"):
                setattr(cls, name, wrap(value))
        return cls
    return decorate
