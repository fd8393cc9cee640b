// A Go worker on the stagger module (client/go, docs/CLIENT.md "Go"),
// built from outside the repository by tests/client/go/go_worker_test.sh: it delivers -deliveries
// HTTP POSTs to -url through -target (a stagger-agent's socket), each one a
// RetryLoop run, and prints every decision and how each delivery ended:
//
//	admit 1 PROCEED INITIAL_JITTER coordinator
//	report 1 DONE SUCCEEDED coordinator
//	end SUCCEEDED 1
//
// Exit 0 when every delivery succeeded; 1 otherwise; 2 for bad flags.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"stagger.dev/stagger"
)

func main() {
	target := flag.String("target", "", "the agent's socket: unix:/path")
	url := flag.String("url", "", "where to POST")
	deliveries := flag.Int("deliveries", 1, "how many, one after another")
	flag.Parse()
	if *target == "" || *url == "" {
		flag.Usage()
		os.Exit(2)
	}
	client, err := stagger.NewClient(stagger.ClientOptions{Target: *target, CallDeadline: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer client.Close()
	loop := stagger.NewRetryLoop(client, stagger.LoopOptions{OnDecision: func(e stagger.DecisionEvent) {
		fmt.Println(e.Call, e.Attempt, e.Decision.Verdict, e.Decision.Reason, e.Decision.Source)
	}})
	key, err := stagger.EndpointKeyFromURL(*url, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ok := true
	for i := 0; i < *deliveries; i++ {
		res, err := loop.Run(context.Background(), key, func(ctx context.Context, a stagger.Attempt) (stagger.AttemptResult, error) {
			return post(ctx, *url, fmt.Sprintf(`{"delivery": %d, "attempt": %d}`, i, a.Number))
		})
		fmt.Println("end", res.End, res.AttemptsMade)
		if err != nil || res.End != stagger.EndSucceeded {
			fmt.Fprintln(os.Stderr, res)
			ok = false
		}
	}
	if !ok {
		os.Exit(1)
	}
}

func post(ctx context.Context, url, body string) (stagger.AttemptResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return stagger.AttemptResult{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return stagger.AttemptResult{}, err // reported RETRYABLE_FAILURE, or TIMEOUT
	}
	defer resp.Body.Close()
	return stagger.AttemptResult{Outcome: stagger.OutcomeFromHTTPStatus(resp.StatusCode),
		RetryAfter: stagger.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}, nil
}
