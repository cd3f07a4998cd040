"""A stand-in for a process dying at a commit phase, for the catalog tests."""

from __future__ import annotations


class Crash(BaseException):
    """Stands for the process dying at a phase (raised past every ``except Exception``)."""


def crash_at(phase: str):
    """A ``phases.observe`` callback that 'dies' when ``phase`` is reached."""
    def crash(name, **ctx):
        if name == phase:
            raise Crash(name)
    return crash
