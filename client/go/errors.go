package stagger

import (
	"errors"
	"fmt"
)

// InvalidArgumentError: the request (or an option) is bad -- the caller's
// bug. Message is exactly staggerd's INVALID_ARGUMENT message, naming the
// field ("attempt: must be in [1, 1000000], got 0"), whether staggerd
// answered it or the local fallback checked it. Never masked by a fallback
// decision.
type InvalidArgumentError struct{ Message string }

func (e *InvalidArgumentError) Error() string { return e.Message }

func invalid(format string, args ...interface{}) error {
	return &InvalidArgumentError{Message: fmt.Sprintf(format, args...)}
}

// ErrProtocol: the coordinator's answer broke the protocol (DONE to a call
// that was not a success report): a broken peer. RetryLoop ends EndError
// with it.
var ErrProtocol = errors.New("coordinator answered DONE to a call that was not a success report")
