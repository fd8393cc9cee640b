"""stagger: the Python client of Stagger, the retry coordinator.

Delivery workers ask stagger.v1.RetryCoordinator "may I send attempt n
now?" and tell it what happened; client/python/README.md has a worker in
ten lines, the fallback contract and the limits.

  CoordinatorClient    admit / report against stagger-agent or coordinator
                       replicas (sharded), falling back to a local engine
  RetryLoop            a whole delivery: ask, wait, send, report
  endpoint_key_from_url, outcome_from_http_status, parse_retry_after
                       the C++ client's helpers, same answers
  InvalidArgument      bad input, with staggerd's message

The generated modules (stagger.v1, stagger.grpc_health.v1) live in the
build tree (<build>/client/python/gen), not here: __path__ is extended over
every `stagger` directory on sys.path so they are found as subpackages.
"""

import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

# The public API (imports after the __path__ extension: they need stagger.v1).
from stagger.cancel import Canceller  # noqa: E402
from stagger.client import CoordinatorClient  # noqa: E402
from stagger.decision import (Decision, Outcome, Reason, Source,  # noqa: E402
                              Verdict, reason_name)
from stagger.endpoint_key import endpoint_key_from_url  # noqa: E402
from stagger.errors import (Cancelled, InvalidArgument,  # noqa: E402
                            ProtocolError, StaggerError)
from stagger.http_outcome import (outcome_from_http_status,  # noqa: E402
                                  parse_retry_after)
from stagger.loop import (Attempt, AttemptResult, DecisionEvent,  # noqa: E402
                          LoopEnd, LoopOptions, LoopResult, RetryLoop)
from stagger.members import Member  # noqa: E402
from stagger.policy import LocalPolicy  # noqa: E402

__all__ = [
    "Attempt", "AttemptResult", "Cancelled", "Canceller", "CoordinatorClient",
    "Decision", "DecisionEvent", "InvalidArgument", "LocalPolicy", "LoopEnd",
    "LoopOptions", "LoopResult", "Member", "Outcome", "ProtocolError", "Reason",
    "RetryLoop",
    "Source", "StaggerError", "Verdict", "endpoint_key_from_url",
    "outcome_from_http_status", "parse_retry_after", "reason_name",
]
