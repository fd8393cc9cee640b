"""Errors the stagger package raises.

Contract:
  * InvalidArgument: the request (or an option) is bad -- the caller's bug.
    Its message is exactly staggerd's INVALID_ARGUMENT message, naming the
    field ("attempt: must be in [1, 1000000], got 0"), whether staggerd
    answered it or the local fallback checked it. Never masked by a
    fallback decision. A ValueError, so code that catches ValueError for
    bad input keeps working.
  * Cancelled: the Canceller fired during a call that waits (a waiting
    Admit); nothing was decided.
  * ProtocolError: the coordinator answered something the contract rules
    out (DONE to a call that was not a success report): a broken peer.
Every error is a StaggerError.
"""


class StaggerError(Exception):
    """Base class of the package's errors."""


class InvalidArgument(StaggerError, ValueError):
    """A bad request or option; str(e) is the message naming the field."""

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class Cancelled(StaggerError):
    """The call was cancelled by its Canceller before it was answered."""


class ProtocolError(StaggerError):
    """The coordinator's answer broke the protocol (a broken peer)."""
