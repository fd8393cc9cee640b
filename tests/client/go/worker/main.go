// A Go worker on the generated stubs (docs/CLIENT.md, "Go"): one delivery
// through a stagger-agent's socket (its path is the first argument): Admit,
// then a SUCCESS Report echoing the admission token. Prints both answers.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	v1 "stagger/v1"
)

func main() {
	conn, err := grpc.Dial("unix://"+os.Args[1], grpc.WithInsecure())
	if err != nil {
		panic(err)
	}
	c := v1.NewRetryCoordinatorClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := c.Admit(ctx, &v1.AdmitRequest{Endpoint: "https://go.example", Attempt: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Decision.Verdict, d.Decision.Reason, d.Decision.Admission)
	r, err := c.Report(ctx, &v1.ReportRequest{Endpoint: "https://go.example", Attempt: 1, Outcome: v1.Outcome_SUCCESS, Admission: d.Decision.Admission})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Decision.Verdict, r.Decision.Reason)
}
