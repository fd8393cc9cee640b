// The Go worker of the HTTP end-to-end run (tests/e2e/http/scenario.py;
// docs/EXAMPLE.md): real HTTP POSTs to --url through the stagger module
// (client/go), against --target (a stagger-agent's socket, unix:/path).
// The same contract as the C++ and Python workers (http_worker.cc, http_worker.py):
//
//   - the endpoint key is EndpointKeyFromURL(--url, 1);
//   - the --warmup_ids one after another, then the --ids all at once (a
//     goroutine each), every delivery a RetryLoop run over one shared
//     Client, deadline --deadline_s from its start;
//   - an attempt is one POST with the body {"id", "attempt", "worker"}
//     (net/http, its context ending at --attempt_timeout_s), mapped by
//     OutcomeFromHTTPStatus and ParseRetryAfter; a connection that fails is
//     an error, which the loop reports (a timeout as TIMEOUT, else
//     RETRYABLE_FAILURE);
//   - DEFERs are parked inside RetryLoop (no park limit).
//
// It writes --out, the JSON http_worker.cc documents (end SUCCEEDED | GAVE_UP |
// DEFERRED | CANCELLED | ERROR). Exit 0 once --out is written; 2 for bad
// flags.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"stagger.dev/stagger"
)

type flags struct {
	target, url, name, out string
	warmups, ids           []string
	deadline, timeout      time.Duration
	callDeadline           time.Duration
}

func parseFlags() flags {
	var f flags
	var warmups, ids string
	var deadline, timeout, call float64
	flag.StringVar(&f.target, "target", "", "the agent's socket: unix:/path")
	flag.StringVar(&f.url, "url", "", "http://host:port/path")
	flag.StringVar(&f.name, "name", "go", "this worker's name")
	flag.StringVar(&warmups, "warmup_ids", "", "deliveries one after another")
	flag.StringVar(&ids, "ids", "", "deliveries all at once")
	flag.Float64Var(&deadline, "deadline_s", 300, "each delivery's deadline")
	flag.Float64Var(&timeout, "attempt_timeout_s", 60, "each attempt's timeout")
	flag.Float64Var(&call, "call_deadline_s", 5, "each coordinator call's deadline")
	flag.StringVar(&f.out, "out", "", "where the JSON goes")
	flag.Parse()
	if f.target == "" || !strings.HasPrefix(f.url, "http://") || f.out == "" {
		flag.Usage()
		os.Exit(2)
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	f.warmups, f.ids = split(warmups), split(ids)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	f.deadline, f.timeout, f.callDeadline = sec(deadline), sec(timeout), sec(call)
	return f
}

// recorder passes every call to the shared client and keeps an event of
// it (http_worker.cc's Event). One per delivery: its loop calls one at a time.
type recorder struct {
	c      *stagger.Client
	events []map[string]interface{}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func (r *recorder) keep(call string, attempt int, asked time.Time, wait time.Duration, d stagger.Decision, err error) map[string]interface{} {
	e := map[string]interface{}{"call": call, "attempt": attempt, "asked": unix(asked),
		"answered": unix(time.Now()), "wait": wait.Seconds()}
	if err != nil {
		e["error"] = err.Error()
	} else {
		e["verdict"], e["reason"], e["source"] = d.Verdict.String(), d.Reason.String(), d.Source.String()
		e["delay"], e["defer_for"] = d.Delay.Seconds(), d.DeferFor.Seconds()
	}
	r.events = append(r.events, e)
	return e
}

func (r *recorder) Admit(ctx context.Context, in stagger.AdmitRequest) (stagger.Decision, error) {
	asked := time.Now()
	d, err := r.c.Admit(ctx, in)
	r.keep("admit", in.Attempt, asked, in.Wait, d, err)
	return d, err
}

func (r *recorder) Report(ctx context.Context, in stagger.ReportRequest) (stagger.Decision, error) {
	asked := time.Now()
	d, err := r.c.Report(ctx, in)
	e := r.keep("report", in.Attempt, asked, 0, d, err)
	e["outcome"] = in.Outcome.String()
	if in.RetryAfter != nil {
		e["retry_after"] = in.RetryAfter.Seconds()
	}
	return d, err
}

func post(ctx context.Context, url, body string) (stagger.AttemptResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return stagger.AttemptResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return stagger.AttemptResult{}, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return stagger.AttemptResult{Outcome: stagger.OutcomeFromHTTPStatus(resp.StatusCode),
		RetryAfter: stagger.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}, nil
}

func deliver(c *stagger.Client, key string, f flags, id string) map[string]interface{} {
	rec := &recorder{c: c}
	loop := stagger.NewRetryLoop(rec, stagger.LoopOptions{Deadline: time.Now().Add(f.deadline),
		AttemptTimeout: f.timeout})
	res, err := loop.Run(context.Background(), key, func(ctx context.Context, a stagger.Attempt) (stagger.AttemptResult, error) {
		body, _ := json.Marshal(map[string]interface{}{"id": id, "attempt": a.Number, "worker": f.name})
		return post(ctx, f.url, string(body))
	})
	out := map[string]interface{}{"id": id, "end": res.End.String(), "reason": nil, "error": nil,
		"attempts": res.AttemptsMade, "events": rec.events}
	if (res.End == stagger.EndGaveUp || res.End == stagger.EndDeferred) && res.LastDecision != nil {
		out["reason"] = res.LastDecision.Reason.String()
	}
	if err != nil {
		out["error"] = err.Error()
	}
	return out
}

func main() {
	f := parseFlags()
	key, err := stagger.EndpointKeyFromURL(f.url, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := stagger.NewClient(stagger.ClientOptions{Target: f.target, CallDeadline: f.callDeadline})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var results []map[string]interface{}
	for _, id := range f.warmups {
		results = append(results, deliver(c, key, f, id))
	}
	fmt.Fprintf(os.Stderr, "%s: %d warm-up deliveries done; %d at once\n", f.name, len(f.warmups), len(f.ids))
	burst := make([]map[string]interface{}, len(f.ids))
	var wg sync.WaitGroup
	for k := range f.ids {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			burst[k] = deliver(c, key, f, f.ids[k])
		}(k)
	}
	wg.Wait()
	_ = c.Close()
	text, _ := json.Marshal(map[string]interface{}{"worker": f.name, "endpoint_key": key,
		"deliveries": append(results, burst...)})
	if err := os.WriteFile(f.out, text, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "%s: done\n", f.name)
}
