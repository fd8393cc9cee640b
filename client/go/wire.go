package stagger

import (
	"errors"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	pb "stagger.dev/stagger/v1"
)

// The one conversion between the client's values and the stagger.v1
// messages (core/wire/wire.cc's counterpart). Zero times are not sent; a
// nil RetryAfter is not sent.

// encodable: what cannot go on the wire as written is refused here with
// staggerd's message (a key that is not UTF-8 would be sent as another
// key; an attempt outside int32 would wrap).
func encodable(endpoint string, attempt int) error {
	if !utf8.ValidString(endpoint) {
		return invalid("endpoint: not valid UTF-8 at byte %d", invalidUTF8At(endpoint))
	}
	if int64(attempt) != int64(int32(attempt)) {
		return attemptError(attempt)
	}
	return nil
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func admitToWire(in AdmitRequest) *pb.AdmitRequest {
	out := &pb.AdmitRequest{Endpoint: in.Endpoint, Attempt: int32(in.Attempt),
		Deadline: timestamp(in.Deadline), FirstAttemptTime: timestamp(in.FirstAttemptTime)}
	if in.Wait != 0 {
		out.Wait = durationpb.New(in.Wait)
	}
	return out
}

func reportToWire(in ReportRequest) *pb.ReportRequest {
	out := &pb.ReportRequest{Endpoint: in.Endpoint, Attempt: int32(in.Attempt),
		Outcome: pb.Outcome(in.Outcome), Admission: in.Admission,
		Deadline: timestamp(in.Deadline), FirstAttemptTime: timestamp(in.FirstAttemptTime)}
	if in.RetryAfter != nil {
		out.RetryAfter = durationpb.New(*in.RetryAfter)
	}
	return out
}

var errUnusable = errors.New("answered no usable decision")

// fromWire: a coordinator's decision received at `now`, or errUnusable
// (no decision, a verdict this package does not know, a malformed
// duration, DEFER without a time). DEFER's instant is taken from
// defer_for on the client's clock (defer_until only without it).
func fromWire(d *pb.Decision, now time.Time, replica string) (Decision, error) {
	if d == nil || d.Verdict < pb.Verdict_PROCEED || d.Verdict > pb.Verdict_DONE {
		return Decision{}, errUnusable
	}
	out := Decision{Verdict: Verdict(d.Verdict), Reason: Reason(d.Reason), Attempt: int(d.Attempt),
		Admission: d.Admission, WaitSupported: d.WaitSupported, Source: FromCoordinator, Replica: replica}
	if out.Verdict == Proceed && d.Delay != nil {
		if d.Delay.CheckValid() != nil {
			return Decision{}, errUnusable
		}
		out.Delay = maxDuration(0, d.Delay.AsDuration())
	}
	if out.Verdict != Defer {
		return out, nil
	}
	switch {
	case d.DeferFor != nil:
		if d.DeferFor.CheckValid() != nil {
			return Decision{}, errUnusable
		}
		out.DeferFor = maxDuration(0, d.DeferFor.AsDuration())
	case d.DeferUntil != nil:
		out.DeferFor = maxDuration(0, d.DeferUntil.AsTime().Sub(now))
	default:
		return Decision{}, errUnusable
	}
	out.DeferUntil = now.Add(out.DeferFor)
	return out, nil
}
