package stagger

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	pb "stagger.dev/stagger/v1"
)

// Clock gives the current instant; tests inject a fake one.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// ClientOptions configure a Client; zero fields take the defaults given.
type ClientOptions struct {
	// A stagger-agent's socket ("unix:/run/stagger/agent.sock") or
	// coordinator replicas in the C++ client's forms (ParseMembers).
	// Default "127.0.0.1:50051".
	Target string
	// Deadline of every call: (0, 1m]. Default 50 ms. A waiting Admit gets
	// its wait + 1 s instead.
	CallDeadline time.Duration
	// A failed replica is not called again for this long, then probed:
	// (0, 1h]. Default 1 s. Also its connection's reconnect backoff cap.
	RecheckInterval time.Duration
	// How often a dns:/// target is resolved again: (0, 1h]. Default 5 s.
	DNSRefresh time.Duration
	// How often each replica's health is asked when there are several
	// members. Default 250 ms.
	HealthInterval time.Duration
	// TLS (credentials.NewTLS); nil: plaintext. TLSServerName overrides the
	// name expected in the coordinator's certificate.
	Credentials   credentials.TransportCredentials
	TLSServerName string
	// Time for the recheck interval, the local engine and DEFER conversion.
	// Default RealClock.
	Clock Clock
	// The local engine's uniform source in [0, 1). Default math/rand.
	Random func() float64
	// The local fallback's policy. Default DefaultPolicy(). Keep it equal
	// to the coordinator's for the fallback to decide as it would.
	LocalPolicy *LocalPolicy
	// Where a dns:/// target's members come from. Default ResolveDNSMembers.
	ResolveMembers func(host, port string) ([]Member, error)
}

// notCalled is the cause of a local decision made without calling.
var notCalled = errors.New("coordinator considered down (recheck interval not over); not called")

type view struct {
	ring     *Rendezvous // nil while there are no members
	replicas []*replica  // replicas[i] is named ring.Names()[i]
}

// Client is the Go client of stagger.v1.RetryCoordinator, with the C++
// client's contract (client/coordinator_client.h):
//   - each endpoint key is owned by one replica by rendezvous hashing over
//     the members' names; a call goes to its key's first replica that is
//     up and serving, then to one that is up;
//   - every call has a deadline (CallDeadline; a waiting Admit wait + 1 s);
//   - INVALID_ARGUMENT is returned as an *InvalidArgumentError with the
//     server's message, never masked by a fallback;
//   - the caller's context ending returns its error (a waiting Admit
//     cancelled); the replica is not blamed;
//   - any other failure marks the replica down (not called again for
//     RecheckInterval, then probed) and the call is decided by the local
//     engine (LocalEngine) after staggerd's own checks (CheckAdmit,
//     CheckReport): Source FromFallback with its FallbackCause;
//   - a decision's WaitSupported is the answer's own; a DONE to anything
//     but a success report is passed on (RetryLoop ends EndError).
//
// Safe for concurrent use; Close it when done.
type Client struct {
	o      ClientOptions
	clock  Clock
	local  *LocalEngine
	policy LocalPolicy
	spec   MemberSpec

	mu        sync.Mutex
	view      view
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// NewClient checks the options (an *InvalidArgumentError naming the first
// bad one) and dials every member (without waiting for them).
func NewClient(o ClientOptions) (*Client, error) {
	if err := defaults(&o); err != nil {
		return nil, err
	}
	spec, err := ParseMembers(o.Target)
	if err != nil {
		return nil, err
	}
	c := &Client{o: o, clock: o.Clock, policy: *o.LocalPolicy, spec: spec,
		stop: make(chan struct{}), done: make(chan struct{})}
	c.local = NewLocalEngine(c.policy, o.Random)
	members := spec.Members
	if spec.DNSHost != "" {
		members, _ = c.resolve()
	}
	if c.view, err = c.makeView(members, view{}); err != nil {
		return nil, err
	}
	go c.housekeeping()
	return c, nil
}

func defaults(o *ClientOptions) error {
	if o.Target == "" {
		o.Target = "127.0.0.1:50051"
	}
	for _, d := range []struct {
		name     string
		v        *time.Duration
		def, max time.Duration
		maxText  string
	}{
		{"call_deadline", &o.CallDeadline, 50 * time.Millisecond, time.Minute, "1m"},
		{"recheck_interval", &o.RecheckInterval, time.Second, time.Hour, "1h"},
		{"dns_refresh", &o.DNSRefresh, 5 * time.Second, time.Hour, "1h"},
		{"health_interval", &o.HealthInterval, 250 * time.Millisecond, time.Hour, "1h"},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 || *d.v > d.max {
			return invalid("%s: must be in (0, %s], is %v", d.name, d.maxText, *d.v)
		}
	}
	if o.Clock == nil {
		o.Clock = RealClock
	}
	if o.Random == nil {
		o.Random = rand.New(rand.NewSource(time.Now().UnixNano())).Float64
		o.Random = lockedRandom(o.Random)
	}
	if o.LocalPolicy == nil {
		p := DefaultPolicy()
		o.LocalPolicy = &p
	}
	if o.ResolveMembers == nil {
		o.ResolveMembers = ResolveDNSMembers
	}
	return o.LocalPolicy.Check()
}

func lockedRandom(f func() float64) func() float64 {
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return f()
	}
}

// Admit asks whether attempt in.Attempt to in.Endpoint may be sent now.
// With in.Wait > 0 the coordinator may hold the call that long (waiting
// admission); ctx cancels it.
func (c *Client) Admit(ctx context.Context, in AdmitRequest) (Decision, error) {
	if err := encodable(in.Endpoint, in.Attempt); err != nil {
		return Decision{}, err
	}
	timeout := c.o.CallDeadline
	if in.Wait > 0 {
		timeout = minDuration(in.Wait, MaxWait) + time.Second
	}
	d, err, cause := c.call(ctx, in.Endpoint, timeout, func(cctx context.Context, r *replica) (*pb.Decision, error) {
		resp, err := r.stub.Admit(cctx, admitToWire(in))
		return resp.GetDecision(), err
	})
	if cause == nil {
		return d, err
	}
	if err := CheckAdmit(in, c.policy.MaxKeyBytes); err != nil {
		return Decision{}, err
	}
	d = c.local.Admit(in, c.clock.Now())
	d.FallbackCause = cause
	return d, nil
}

// Report says what happened to attempt in.Attempt; for a failure the
// answer is the decision for in.Attempt + 1.
func (c *Client) Report(ctx context.Context, in ReportRequest) (Decision, error) {
	if err := encodable(in.Endpoint, in.Attempt); err != nil {
		return Decision{}, err
	}
	d, err, cause := c.call(ctx, in.Endpoint, c.o.CallDeadline, func(cctx context.Context, r *replica) (*pb.Decision, error) {
		resp, err := r.stub.Report(cctx, reportToWire(in))
		return resp.GetDecision(), err
	})
	if cause == nil {
		return d, err
	}
	if err := CheckReport(in, c.policy.MaxKeyBytes); err != nil {
		return Decision{}, err
	}
	d = c.local.Report(in, c.clock.Now())
	d.FallbackCause = cause
	return d, nil
}

type rpc func(ctx context.Context, r *replica) (*pb.Decision, error)

// call: the coordinator's decision (or the error the caller gets), or a
// non-nil cause to decide locally.
func (c *Client) call(ctx context.Context, key string, timeout time.Duration, f rpc) (d Decision, err, cause error) {
	r := c.route(key)
	if r == nil {
		return Decision{}, nil, notCalled
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wire, err := f(cctx, r)
	if err != nil {
		if status.Code(err) == codes.InvalidArgument {
			r.markUp() // it answered: it is up, the request is bad
			return Decision{}, &InvalidArgumentError{Message: status.Convert(err).Message()}, nil
		}
		if ctx.Err() != nil {
			return Decision{}, ctx.Err(), nil
		}
		r.markDown()
		return Decision{}, nil, fmt.Errorf("coordinator %s: %s: %s", r.member.Name,
			status.Code(err), status.Convert(err).Message())
	}
	d, bad := fromWire(wire, c.clock.Now(), r.member.Name)
	if bad != nil {
		r.markDown()
		return Decision{}, nil, fmt.Errorf("coordinator %s %w", r.member.Name, bad)
	}
	r.markUp()
	return d, nil, nil
}

// route: the first usable replica in the key's order, serving ones first.
func (c *Client) route(key string) *replica {
	c.mu.Lock()
	v := c.view
	c.mu.Unlock()
	if len(v.replicas) == 1 {
		if v.replicas[0].tryUse() {
			return v.replicas[0]
		}
		return nil
	}
	if v.ring == nil {
		return nil
	}
	rank := v.ring.Rank(key)
	for _, servingOnly := range []bool{true, false} {
		for _, i := range rank {
			r := v.replicas[i]
			if (r.serving() || !servingOnly) && r.tryUse() {
				return r
			}
		}
	}
	return nil
}

// Replicas are the current members.
func (c *Client) Replicas() []Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Member, len(c.view.replicas))
	for i, r := range c.view.replicas {
		out[i] = r.member
	}
	return out
}

// CoordinatorUp says whether calls go to at least one replica now.
func (c *Client) CoordinatorUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.view.replicas {
		if r.isUp() {
			return true
		}
	}
	return false
}

// WaitForCoordinator waits (until ctx ends) for every replica's connection
// to be ready; true if all were.
func (c *Client) WaitForCoordinator(ctx context.Context) bool {
	c.mu.Lock()
	rs := append([]*replica(nil), c.view.replicas...)
	c.mu.Unlock()
	for _, r := range rs {
		for s := r.conn.GetState(); s != connectivity.Ready; s = r.conn.GetState() {
			if !r.conn.WaitForStateChange(ctx, s) {
				return false
			}
		}
	}
	return true
}

// Close stops the background work and every connection. Idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range c.view.replicas {
			r.close()
		}
	})
	return nil
}

// makeView: replicas for `members`, keeping old's unchanged ones.
func (c *Client) makeView(members []Member, old view) (view, error) {
	kept := map[Member]*replica{}
	for _, r := range old.replicas {
		kept[r.member] = r
	}
	var v view
	for _, m := range members {
		r, ok := kept[m]
		if ok {
			delete(kept, m)
		} else {
			var err error
			if r, err = dialReplica(m, &c.o, c.clock); err != nil {
				return old, err
			}
		}
		v.replicas = append(v.replicas, r)
	}
	for _, r := range kept {
		r.close()
	}
	if len(members) > 0 {
		names := make([]string, len(members))
		for i, m := range members {
			names[i] = m.Name
		}
		ring, err := NewRendezvous(names)
		if err != nil {
			return old, err
		}
		v.ring = ring
	}
	return v, nil
}

func (c *Client) resolve() ([]Member, error) {
	found, err := c.o.ResolveMembers(c.spec.DNSHost, c.spec.DNSPort)
	if err != nil || len(found) == 0 {
		return nil, fmt.Errorf("dns:///%s:%s: %v", c.spec.DNSHost, c.spec.DNSPort, err)
	}
	return sortedByName(found), nil
}

// housekeeping: health checks (several members) and DNS refreshes, until
// Close.
func (c *Client) housekeeping() {
	defer close(c.done)
	several := len(c.spec.Members) > 1 || c.spec.DNSHost != ""
	if !several {
		<-c.stop
		return
	}
	tick := time.NewTicker(c.o.HealthInterval)
	defer tick.Stop()
	nextDNS := time.Now().Add(c.o.DNSRefresh)
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		rs := append([]*replica(nil), c.view.replicas...)
		c.mu.Unlock()
		for _, r := range rs {
			r.checkHealth(maxDuration(c.o.HealthInterval, 100*time.Millisecond))
		}
		if c.spec.DNSHost != "" && time.Now().After(nextDNS) {
			c.refreshMembers()
			nextDNS = time.Now().Add(c.o.DNSRefresh)
		}
	}
}

func (c *Client) refreshMembers() {
	found, err := c.resolve()
	if err != nil {
		return // keep the members last seen
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, err := c.makeView(found, c.view); err == nil {
		c.view = v
	}
}
