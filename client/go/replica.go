package stagger

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	pb "stagger.dev/stagger/v1"
)

// replica is one coordinator replica (or the stagger-agent) as the client
// sees it: its connection and stubs, and whether calls go to it -- the C++
// client's contract (client/coordinator_client.h) for one replica:
//   - up: calls go to it; a call that fails (anything but INVALID_ARGUMENT
//     or the caller's own cancellation) marks it down;
//   - down: no call goes to it until RecheckInterval (on the client's
//     clock) has passed since the last failure; then tryUse lets one call
//     through as the probe; its first answer marks it up;
//   - serving: false while its health service answers NOT_SERVING (a
//     draining replica; asked every HealthInterval when the client has
//     several members); the router then prefers each key's next choice.
//
// Safe for concurrent use.
type replica struct {
	member  Member
	conn    *grpc.ClientConn
	stub    pb.RetryCoordinatorClient
	health  healthpb.HealthClient
	clock   Clock
	recheck time.Duration

	mu         sync.Mutex
	up         bool
	nextProbe  time.Time
	notServing int32 // atomic: 1 while the health service says NOT_SERVING
}

func dialReplica(m Member, o *ClientOptions, clock Clock) (*replica, error) {
	opts := []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: minDuration(time.Second, o.RecheckInterval), Multiplier: 1.6,
			Jitter: 0.2, MaxDelay: maxDuration(100*time.Millisecond, o.RecheckInterval)}}),
		grpc.WithDisableRetry(), // the deadline and the fallback are the retry policy
	}
	if o.Credentials != nil {
		if o.TLSServerName != "" {
			if err := o.Credentials.OverrideServerName(o.TLSServerName); err != nil {
				return nil, err
			}
		}
		opts = append(opts, grpc.WithTransportCredentials(o.Credentials))
	} else {
		opts = append(opts, grpc.WithInsecure())
	}
	conn, err := grpc.Dial(m.Target, opts...)
	if err != nil {
		return nil, invalid("target: %s: %v", m.Target, err)
	}
	return &replica{member: m, conn: conn, stub: pb.NewRetryCoordinatorClient(conn),
		health: healthpb.NewHealthClient(conn), clock: clock, recheck: o.RecheckInterval, up: true}, nil
}

// tryUse: whether a call should go here now (down: this call is the probe,
// if the recheck interval is over).
func (r *replica) tryUse() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up {
		return true
	}
	now := r.clock.Now()
	if now.Before(r.nextProbe) {
		return false
	}
	r.nextProbe = now.Add(r.recheck)
	return true
}

func (r *replica) markUp() {
	r.mu.Lock()
	r.up = true
	r.mu.Unlock()
}

func (r *replica) markDown() {
	r.mu.Lock()
	r.up = false
	r.nextProbe = r.clock.Now().Add(r.recheck)
	r.mu.Unlock()
}

func (r *replica) isUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up
}

func (r *replica) serving() bool { return atomic.LoadInt32(&r.notServing) == 0 }

// checkHealth asks the health service; SERVING while down lets the next
// call probe at once. Errors change nothing (unreachability shows in the
// calls).
func (r *replica) checkHealth(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := r.health.Check(ctx, &healthpb.HealthCheckRequest{Service: "stagger.v1.RetryCoordinator"})
	if err != nil {
		return
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		atomic.StoreInt32(&r.notServing, 1)
		return
	}
	atomic.StoreInt32(&r.notServing, 0)
	r.mu.Lock()
	if !r.up {
		r.nextProbe = time.Time{}
	}
	r.mu.Unlock()
}

func (r *replica) close() { _ = r.conn.Close() }
