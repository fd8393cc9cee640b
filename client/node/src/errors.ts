// The client's named errors.
//
//   InvalidArgumentError  the request was bad: the message is staggerd's,
//                         word for word ("attempt: must be in [1, 1000000],
//                         got 0"), whether the coordinator or the local
//                         checks found it. Never masked by a fallback.
//   CancelledError        the caller's AbortSignal fired during a call.
export class InvalidArgumentError extends Error {
  override readonly name = "InvalidArgumentError";
  // The field the message names (its text before the first ':').
  readonly field: string;
  constructor(message: string) {
    super(message);
    const colon = message.indexOf(":");
    this.field = colon < 0 ? "" : message.slice(0, colon);
  }
}

export class CancelledError extends Error {
  override readonly name = "CancelledError";
  constructor(message = "cancelled by the caller's AbortSignal") {
    super(message);
  }
}

// The coordinator's answer broke the protocol (DONE to a call that was not
// a success report): a broken peer. The delivery loop ends "error" with it.
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
}
