# What the Python snippets leave to the worker (readme_snippet_test.py puts
# this before each one): a delivery from its queue, its HTTP POST, two exits.
import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass
class Job:
    url: str
    body: bytes
    next_attempt: int = 1               # where a parked delivery resumes
    first: Optional[float] = None       # when its first attempt went


def post(url: str, body: bytes, timeout: float) -> Tuple[int, Optional[str]]:
    """The worker's HTTP client: the status and Retry-After header."""
    return 200, None


def park(job: Job, seconds: float) -> None:
    """Redeliver `job` after `seconds`."""


def dead_letter(job: Job, why: str) -> None:
    """Give `job` up."""
