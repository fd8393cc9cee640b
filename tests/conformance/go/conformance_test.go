// The Go client against every conformance scenario
// (tests/conformance/README.md): the real stagger.Client on a scripted
// grpc-go coordinator in this process, a fake clock, the contract's PRNG
// as the fallback's uniform source, and RetryLoop run through a recorder.
// One subtest per scenario; the PRNG against prng.json first.
//
//	STAGGER_CONFORMANCE=tests/conformance go test ./tests/conformance/go
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"stagger.dev/stagger"
	pb "stagger.dev/stagger/v1"
)

type obj = map[string]interface{}

var t0 = time.Unix(1767225600, 0)

const tolerance = 1e-6

func dir(t *testing.T) string {
	d := os.Getenv("STAGGER_CONFORMANCE")
	if d == "" {
		t.Fatal("set STAGGER_CONFORMANCE to tests/conformance (ctest does)")
	}
	return d
}

func loadScenarios(t *testing.T) []obj {
	files, err := filepath.Glob(filepath.Join(dir(t), "scenarios", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	sort.Strings(files)
	var out []obj
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var file struct{ Scenarios []obj }
		if err := json.Unmarshal(text, &file); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, file.Scenarios...)
	}
	return out
}

func splitmix(seed uint64) func() float64 {
	state := seed
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		state += 0x9E3779B97F4A7C15
		z := state
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		return float64(z>>11) / (1 << 53)
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func secs(v interface{}) time.Duration { return time.Duration(math.Round(v.(float64) * 1e9)) }
func rel(t time.Time) float64          { return t.Sub(t0).Seconds() }

// ---- the scripted coordinator ----------------------------------------------

type script struct {
	pb.UnimplementedRetryCoordinatorServer
	mu       sync.Mutex
	answers  []obj
	dead     bool
	clock    *fakeClock
	cancel   context.CancelFunc
	problems []string
}

func (s *script) Admit(ctx context.Context, req *pb.AdmitRequest) (*pb.AdmitResponse, error) {
	d, err := s.answer(ctx, int(req.Attempt), req.Wait.AsDuration(), false)
	return &pb.AdmitResponse{Decision: d}, err
}

func (s *script) Report(ctx context.Context, req *pb.ReportRequest) (*pb.ReportResponse, error) {
	failure := req.Outcome != pb.Outcome_SUCCESS && req.Outcome != pb.Outcome_PERMANENT_FAILURE
	d, err := s.answer(ctx, int(req.Attempt), 0, failure)
	return &pb.ReportResponse{Decision: d}, err
}

func (s *script) answer(ctx context.Context, attempt int, wait time.Duration, reportFailure bool) (*pb.Decision, error) {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "scripted: dead")
	}
	if len(s.answers) == 0 {
		s.problems = append(s.problems, fmt.Sprintf("a call beyond the script (attempt %d)", attempt))
		s.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "scripted: beyond the script")
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	cancel := s.cancel
	s.mu.Unlock()
	if after, ok := a["after"]; ok {
		s.clock.Advance(secs(after))
	}
	if c, _ := a["cancel"].(bool); c {
		cancel()
		if wait > 0 { // cut short: the client gives the call up
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			return nil, status.Error(codes.Canceled, "scripted: cancelled")
		}
	}
	if _, ok := a["timeout"]; ok {
		if wait > 0 {
			s.clock.Advance(wait + time.Second)
		} else {
			s.clock.Advance(50 * time.Millisecond)
		}
		return nil, status.Error(codes.DeadlineExceeded, "scripted: timeout")
	}
	if e, ok := a["error"].(string); ok {
		msg, _ := a["message"].(string)
		code := map[string]codes.Code{"UNAVAILABLE": codes.Unavailable, "INVALID_ARGUMENT": codes.InvalidArgument}[e]
		return nil, status.Error(code, msg)
	}
	return toDecision(a["decision"].(obj), attempt, reportFailure), nil
}

func toDecision(d obj, attempt int, reportFailure bool) *pb.Decision {
	out := &pb.Decision{Verdict: pb.Verdict(pb.Verdict_value[d["verdict"].(string)]),
		Reason: pb.Reason(pb.Reason_value[d["reason"].(string)]), Attempt: int32(attempt)}
	if reportFailure && out.Verdict != pb.Verdict_DONE {
		out.Attempt++
	}
	if v, ok := d["admission"]; ok {
		out.Admission = uint64(v.(float64))
	}
	out.WaitSupported, _ = d["wait_supported"].(bool)
	if v, ok := d["delay"]; ok {
		out.Delay = durationpb.New(secs(v))
	}
	if v, ok := d["defer_for"]; ok {
		out.DeferFor = durationpb.New(secs(v))
	}
	return out
}

// ---- a delivery, recorded -----------------------------------------------------

type recorder struct {
	c     *stagger.Client
	trace *[]interface{}
}

func timesOf(deadline, first time.Time, args obj) {
	if !deadline.IsZero() {
		args["deadline"] = rel(deadline)
	}
	if !first.IsZero() {
		args["first_attempt_time"] = rel(first)
	}
}

func answerOf(d stagger.Decision, err error) obj {
	var inv *stagger.InvalidArgumentError
	switch {
	case errors.As(err, &inv):
		return obj{"error": "INVALID_ARGUMENT", "message": inv.Message}
	case errors.Is(err, context.Canceled):
		return obj{"error": "CANCELLED"}
	case err != nil:
		return obj{"error": err.Error()}
	}
	out := obj{"verdict": d.Verdict.String(), "reason": d.Reason.String(), "source": d.Source.String()}
	if d.Verdict == stagger.Proceed {
		out["delay"] = d.Delay.Seconds()
	}
	if d.Verdict == stagger.Defer {
		out["defer_for"] = d.DeferFor.Seconds()
	}
	return out
}

func (r recorder) Admit(ctx context.Context, in stagger.AdmitRequest) (stagger.Decision, error) {
	args := obj{"attempt": float64(in.Attempt)}
	if in.Wait > 0 {
		args["wait"] = in.Wait.Seconds()
	}
	timesOf(in.Deadline, in.FirstAttemptTime, args)
	d, err := r.c.Admit(ctx, in)
	*r.trace = append(*r.trace, []interface{}{"admit", args, answerOf(d, err)})
	return d, err
}

func (r recorder) Report(ctx context.Context, in stagger.ReportRequest) (stagger.Decision, error) {
	args := obj{"attempt": float64(in.Attempt), "outcome": in.Outcome.String(), "admission": float64(in.Admission)}
	if in.RetryAfter != nil {
		args["retry_after"] = in.RetryAfter.Seconds()
	}
	timesOf(in.Deadline, in.FirstAttemptTime, args)
	d, err := r.c.Report(ctx, in)
	*r.trace = append(*r.trace, []interface{}{"report", args, answerOf(d, err)})
	return d, err
}

func endOf(res stagger.Result) obj {
	out := obj{"end": res.End.String(), "attempts_made": float64(res.AttemptsMade), "next_attempt": float64(res.NextAttempt)}
	if (res.End == stagger.EndGaveUp || res.End == stagger.EndDeferred) && res.LastDecision != nil {
		out["reason"] = res.LastDecision.Reason.String()
	}
	if res.End == stagger.EndDeferred {
		out["defer_for"] = res.DeferFor().Seconds()
	}
	if !res.FirstAttemptTime.IsZero() {
		out["first_attempt_time"] = rel(res.FirstAttemptTime)
	}
	var inv *stagger.InvalidArgumentError
	switch {
	case res.End != stagger.EndError:
	case errors.As(res.Err, &inv):
		out["error"], out["message"] = "INVALID_ARGUMENT", inv.Message
	case errors.Is(res.Err, stagger.ErrProtocol):
		out["error"] = "PROTOCOL"
	default:
		out["error"] = res.Err.Error()
	}
	return out
}

func sendOf(t *testing.T, d obj, s *script, cancel context.CancelFunc, trace *[]interface{}, timeout time.Duration) (stagger.SendFunc, *int) {
	sends, _ := d["sends"].([]interface{})
	next := 0
	return func(ctx context.Context, a stagger.Attempt) (stagger.AttemptResult, error) {
		*trace = append(*trace, []interface{}{"send", float64(a.Number)})
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout || time.Until(dl) < timeout-5*time.Second {
			t.Errorf("attempt %d: its context does not end at the attempt timeout %v", a.Number, timeout)
		}
		if next >= len(sends) {
			t.Errorf("an attempt beyond the scripted sends")
			return stagger.AttemptResult{Outcome: stagger.Success}, nil
		}
		sd := sends[next].(obj)
		next++
		if v, ok := sd["takes"]; ok {
			s.clock.Advance(secs(v))
		}
		if c, _ := sd["cancel"].(bool); c {
			cancel()
		}
		switch sd["fails"] {
		case "io":
			return stagger.AttemptResult{}, &net.OpError{Op: "read", Err: errors.New("connection reset")}
		case "timeout":
			<-ctx.Done()
			return stagger.AttemptResult{}, ctx.Err()
		}
		if code, ok := sd["http"]; ok {
			h, _ := sd["retry_after_header"].(string)
			return stagger.AttemptResult{Outcome: stagger.OutcomeFromHTTPStatus(int(code.(float64))),
				RetryAfter: stagger.ParseRetryAfter(h, s.clock.Now())}, nil
		}
		out := stagger.AttemptResult{Outcome: stagger.Outcome(pb.Outcome_value[sd["outcome"].(string)])}
		if v, ok := sd["retry_after"]; ok {
			ra := secs(v)
			out.RetryAfter = &ra
		}
		return out, nil
	}, &next
}

func runDelivery(t *testing.T, c *stagger.Client, s *script, d obj) []interface{} {
	var trace []interface{}
	o, _ := d["options"].(obj)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	if v, _ := d["cancel_before"].(bool); v {
		cancel()
	}
	lo := stagger.LoopOptions{Clock: s.clock}
	if v, ok := o["deadline"]; ok {
		lo.Deadline = t0.Add(secs(v))
	}
	if v, ok := o["waiting"].(bool); ok && !v {
		lo.NoWaiting = true
	}
	if v, ok := o["park_limit"]; ok {
		lo.ParkLimit = secs(v)
		if lo.ParkLimit == 0 {
			lo.ParkLimit = stagger.ParkInQueue
		}
	}
	timeout := stagger.DefaultAttemptTimeout
	if v, ok := o["attempt_timeout"]; ok {
		timeout = secs(v)
		lo.AttemptTimeout = timeout
	}
	sleeps := 0
	lo.Sleep = func(ctx context.Context, dur time.Duration) bool {
		trace = append(trace, []interface{}{"sleep", dur.Seconds()})
		sleeps++
		if k, ok := d["cancel_in_sleep"].(float64); ok && int(k) == sleeps {
			cancel()
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		s.clock.Advance(dur)
		return true
	}
	send, sent := sendOf(t, d, s, cancel, &trace, timeout)
	first, fat := 1, time.Time{}
	if v, ok := o["first_attempt"]; ok {
		first = int(v.(float64))
	}
	if v, ok := o["first_attempt_time"]; ok {
		fat = t0.Add(secs(v))
	}
	endpoint := "https://hooks.example.com"
	if v, ok := d["endpoint"].(string); ok {
		endpoint = v
	}
	loop := stagger.NewRetryLoop(recorder{c, &trace}, lo)
	res, _ := loop.Resume(ctx, endpoint, first, fat, send)
	trace = append(trace, []interface{}{"end", endOf(res)})
	if sends, _ := d["sends"].([]interface{}); *sent != len(sends) {
		t.Errorf("%d scripted sends not sent", len(sends)-*sent)
	}
	return trace
}

// ---- comparison -------------------------------------------------------------

func normalize(trace []interface{}) []interface{} {
	for _, ev := range trace {
		e := ev.([]interface{})
		if len(e) != 3 {
			continue
		}
		a := e[2].(obj)
		if _, ok := a["verdict"]; !ok {
			continue
		}
		if _, ok := a["source"]; !ok {
			a["source"] = "coordinator"
		}
		if _, ok := a["delay"]; !ok && a["verdict"] == "PROCEED" {
			a["delay"] = 0.0
		}
	}
	return trace
}

func same(want, got interface{}) bool {
	if w, ok := want.(obj); ok {
		if v, ok := w["value"]; ok && len(w) == 2 {
			want = v
		}
	}
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		return ok && math.Abs(w-g) <= tolerance
	case []interface{}:
		g, ok := got.([]interface{})
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !same(w[i], g[i]) {
				return false
			}
		}
		return true
	case obj:
		g, ok := got.(obj)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, v := range w {
			if gv, ok := g[k]; !ok || !same(v, gv) {
				return false
			}
		}
		return true
	}
	return want == got
}

// ---- the tests ------------------------------------------------------------------

func TestPRNGMatchesPrngJSON(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(dir(t), "prng.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Seeds map[string][]float64 }
	if err := json.Unmarshal(text, &f); err != nil {
		t.Fatal(err)
	}
	for seed, draws := range f.Seeds {
		var n uint64
		fmt.Sscan(seed, &n)
		u := splitmix(n)
		for i, want := range draws {
			if got := u(); got != want {
				t.Errorf("seed %s draw %d: %v, want %v", seed, i, got, want)
			}
		}
	}
}

func TestScenarios(t *testing.T) {
	scenarios := loadScenarios(t)
	if len(scenarios) < 60 || stagger.DefaultAttemptTimeout != 30*time.Second {
		t.Fatalf("%d scenarios; default attempt timeout %v", len(scenarios), stagger.DefaultAttemptTimeout)
	}
	s := &script{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterRetryCoordinatorServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	for _, sc := range scenarios {
		sc := sc
		t.Run(sc["name"].(string), func(t *testing.T) { runScenario(t, s, lis.Addr().String(), sc) })
	}
}

func runScenario(t *testing.T, s *script, target string, sc obj) {
	s.mu.Lock()
	s.clock = &fakeClock{t: t0}
	s.problems = nil
	s.dead = sc["coordinator"] == "dead"
	s.answers = nil
	if list, ok := sc["coordinator"].([]interface{}); ok {
		for _, a := range list {
			s.answers = append(s.answers, a.(obj))
		}
	}
	s.mu.Unlock()
	seed := uint64(1)
	if v, ok := sc["seed"].(float64); ok {
		seed = uint64(v)
	}
	policy := policyOf(sc["policy"])
	c, err := stagger.NewClient(stagger.ClientOptions{Target: target, CallDeadline: 5 * time.Second,
		Clock: s.clock, Random: splitmix(seed), LocalPolicy: &policy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !c.WaitForCoordinator(ctx) {
		t.Fatal("the scripted coordinator is not reachable")
	}
	for k, d := range sc["deliveries"].([]interface{}) {
		dl := d.(obj)
		got := runDelivery(t, c, s, dl)
		want := normalize(dl["trace"].([]interface{}))
		if !same(want, got) {
			w, _ := json.Marshal(want)
			g, _ := json.Marshal(got)
			t.Errorf("delivery %d:\nwant %s\ngot  %s", k+1, w, g)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) > 0 || len(s.answers) > 0 {
		t.Errorf("script: %s; %d answers unused", strings.Join(s.problems, "; "), len(s.answers))
	}
}

func policyOf(v interface{}) stagger.LocalPolicy {
	p := stagger.DefaultPolicy()
	m, _ := v.(obj)
	for k, x := range m {
		f := x.(float64)
		switch k {
		case "backoff_base":
			p.BackoffBase = secs(f)
		case "backoff_cap":
			p.BackoffCap = secs(f)
		case "max_attempts":
			p.MaxAttempts = int(f)
		case "initial_jitter":
			p.InitialJitter = secs(f)
		case "retry_after_max":
			p.RetryAfterMax = secs(f)
		case "consecutive_failures":
			p.ConsecutiveFailures = int(f)
		case "failure_ratio":
			p.FailureRatio = f
		case "min_throughput":
			p.MinThroughput = int(f)
		case "window":
			p.Window = secs(f)
		case "open_base":
			p.OpenBase = secs(f)
		case "open_max":
			p.OpenMax = secs(f)
		case "half_open_probes":
			p.HalfOpenProbes = int(f)
		case "close_after_successes":
			p.CloseAfterSuccesses = int(f)
		case "probe_timeout":
			p.ProbeTimeout = secs(f)
		case "spread":
			p.Spread = secs(f)
		case "max_key_bytes":
			p.MaxKeyBytes = int(f)
		default:
			panic("unknown policy field " + k)
		}
	}
	return p
}
