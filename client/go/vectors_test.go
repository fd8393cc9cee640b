package stagger

// The Go client against tests/vectors/client_vectors.json, the vectors the
// C++, Python and TypeScript clients check too: every HTTP status,
// Retry-After, URL, validation message, duration text, hash, owner,
// member list and policy default.
//
//	STAGGER_VECTORS=tests/vectors/client_vectors.json go test stagger.dev/stagger

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

type vobj = map[string]interface{}

func vectors(t *testing.T) vobj {
	path := os.Getenv("STAGGER_VECTORS")
	if path == "" {
		path = "../../tests/vectors/client_vectors.json"
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (set STAGGER_VECTORS)", err)
	}
	var v vobj
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func cases(t *testing.T, v vobj, section string) []vobj {
	list, _ := v[section].([]interface{})
	if len(list) == 0 {
		t.Fatalf("no %s vectors", section)
	}
	out := make([]vobj, len(list))
	for i, c := range list {
		out[i] = c.(vobj)
	}
	return out
}

// expand: a vector string, or {prefix, repeat, times, suffix}.
func expand(v interface{}) string {
	if s, ok := v.(string); ok {
		return s
	}
	m := v.(vobj)
	pre, _ := m["prefix"].(string)
	suf, _ := m["suffix"].(string)
	return pre + strings.Repeat(m["repeat"].(string), int(m["times"].(float64))) + suf
}

func TestVectorsHTTPStatus(t *testing.T) {
	for _, c := range cases(t, vectors(t), "http_status") {
		if got := OutcomeFromHTTPStatus(int(c["status"].(float64))).String(); got != c["outcome"] {
			t.Errorf("status %v: %s, want %v", c["status"], got, c["outcome"])
		}
	}
}

func TestVectorsRetryAfter(t *testing.T) {
	ra := vectors(t)["retry_after"].(vobj)
	now := time.Unix(int64(ra["now_unix_seconds"].(float64)), 0)
	for _, c := range ra["cases"].([]interface{}) {
		cs := c.(vobj)
		got := ParseRetryAfter(expand(cs["header"]), now)
		want, isNum := cs["ms"].(float64)
		switch {
		case !isNum && got != nil:
			t.Errorf("%q: %v, want none", cs["header"], *got)
		case isNum && (got == nil || got.Milliseconds() != int64(want)):
			t.Errorf("%q: %v, want %v ms", cs["header"], got, want)
		}
	}
}

func TestVectorsEndpointKey(t *testing.T) {
	for _, c := range cases(t, vectors(t), "endpoint_key") {
		key, err := EndpointKeyFromURL(expand(c["url"]), int(c["path_segments"].(float64)))
		if want, ok := c["key"].(string); ok && (err != nil || key != want) {
			t.Errorf("%q: %q %v, want %q", expand(c["url"]), key, err, want)
		}
		if want, ok := c["error"].(string); ok && (err == nil || err.Error() != want) {
			t.Errorf("%q: error %v, want %q", expand(c["url"]), err, want)
		}
	}
}

var protoDuration = regexp.MustCompile(`^(-?)(\d+)(?:\.(\d{1,9}))?s$`)

func durationOf(text string) time.Duration {
	m := protoDuration.FindStringSubmatch(text)
	secs, _ := strconv.ParseInt(m[2], 10, 64)
	frac := (m[3] + "000000000")[:9]
	nanos, _ := strconv.ParseInt(frac, 10, 64)
	d := time.Duration(secs)*time.Second + time.Duration(nanos)
	if m[1] == "-" {
		d = -d
	}
	return d
}

func requestError(c vobj) error {
	r := c["request"].(vobj)
	endpoint := expand(r["endpoint"])
	attempt, _ := r["attempt"].(float64)
	if c["call"] == "Admit" {
		in := AdmitRequest{Endpoint: endpoint, Attempt: int(attempt)}
		if w, ok := r["wait"].(string); ok {
			in.Wait = durationOf(w)
		}
		return CheckAdmit(in, 512)
	}
	in := ReportRequest{Endpoint: endpoint, Attempt: int(attempt)}
	switch o := r["outcome"].(type) {
	case string:
		in.Outcome = outcomeNamed(o)
	case float64:
		in.Outcome = Outcome(o)
	}
	if ra, ok := r["retry_after"].(string); ok {
		d := durationOf(ra)
		in.RetryAfter = &d
	}
	return CheckReport(in, 512)
}

func outcomeNamed(name string) Outcome {
	for o, n := range outcomeNames {
		if n == name {
			return o
		}
	}
	return 0 // OUTCOME_UNSPECIFIED
}

func TestVectorsValidation(t *testing.T) {
	for _, c := range cases(t, vectors(t), "validation") {
		err := requestError(c)
		want, bad := c["error"].(string)
		switch {
		case !bad && err != nil:
			t.Errorf("%s: %v, want valid", c["name"], err)
		case bad && (err == nil || err.Error() != want):
			t.Errorf("%s: %v, want %q", c["name"], err, want)
		}
	}
}

func TestVectorsDurationText(t *testing.T) {
	for _, c := range cases(t, vectors(t), "duration_text") {
		ns := int64(c["seconds"].(float64))*1e9 + int64(c["nanos"].(float64))
		if got := FormatDuration(ns); got != c["text"] {
			t.Errorf("%d ns: %q, want %q", ns, got, c["text"])
		}
	}
}

func TestVectorsHashesAndOwners(t *testing.T) {
	v := vectors(t)
	for _, c := range cases(t, v, "stable_hash") {
		if got := fmt.Sprintf("%016x", StableHash(expand(c["input"]))); got != c["hash"] {
			t.Errorf("%q: %s, want %v", c["input"], got, c["hash"])
		}
	}
	for _, c := range cases(t, v, "rendezvous") {
		var names []string
		for _, n := range c["replicas"].([]interface{}) {
			names = append(names, n.(string))
		}
		r, err := NewRendezvous(names)
		if err != nil {
			t.Fatal(err)
		}
		if got := names[r.Owner(c["key"].(string))]; got != c["owner"] {
			t.Errorf("%v among %v: %s, want %v", c["key"], names, got, c["owner"])
		}
	}
}

func TestVectorsMembers(t *testing.T) {
	for _, c := range cases(t, vectors(t), "members") {
		spec, err := ParseMembers(c["target"].(string))
		if want, ok := c["error"].(string); ok {
			if err == nil || err.Error() != want {
				t.Errorf("%q: %v, want %q", c["target"], err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c["target"], err)
			continue
		}
		if host, ok := c["dns_host"].(string); ok {
			if spec.DNSHost != host || spec.DNSPort != c["dns_port"] {
				t.Errorf("%q: %+v", c["target"], spec)
			}
			continue
		}
		var want []Member
		for _, m := range c["members"].([]interface{}) {
			mm := m.(vobj)
			want = append(want, Member{mm["name"].(string), mm["target"].(string)})
		}
		if fmt.Sprint(spec.Members) != fmt.Sprint(want) {
			t.Errorf("%q: %v, want %v", c["target"], spec.Members, want)
		}
	}
}

func TestVectorsPolicyDefaults(t *testing.T) {
	p := DefaultPolicy()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	ours := map[string]interface{}{
		"backoff.kind": "DECORRELATED_JITTER", "backoff.base_ms": ms(p.BackoffBase),
		"backoff.cap_ms": ms(p.BackoffCap), "backoff.max_attempts": float64(p.MaxAttempts),
		"backoff.initial_jitter_ms": ms(p.InitialJitter), "backoff.retry_after_max_ms": ms(p.RetryAfterMax),
		"backoff.horizon_ms": 0.0, "breaker.consecutive_failures": float64(p.ConsecutiveFailures),
		"breaker.failure_ratio": p.FailureRatio, "breaker.min_throughput": float64(p.MinThroughput),
		"breaker.window_ms": ms(p.Window), "breaker.open_base_ms": ms(p.OpenBase),
		"breaker.open_max_ms": ms(p.OpenMax), "breaker.half_open_probes": float64(p.HalfOpenProbes),
		"breaker.close_after_successes": float64(p.CloseAfterSuccesses),
		"breaker.probe_timeout_ms":      ms(p.ProbeTimeout), "deferral.spread_ms": ms(p.Spread),
		"limits.max_key_bytes": float64(p.MaxKeyBytes),
	}
	want := vectors(t)["policy_defaults"].(vobj)
	if len(want) != len(ours) {
		t.Errorf("%d defaults, want %d: a field added to policy_defaults needs its check here", len(ours), len(want))
	}
	for k, w := range want {
		got, ok := ours[k]
		if f, isNum := w.(float64); isNum && ok {
			ok = math.Abs(got.(float64)-f) < 1e-9
		} else {
			ok = ok && got == w
		}
		if !ok {
			t.Errorf("%s: %v, want %v", k, ours[k], w)
		}
	}
	if err := p.Check(); err != nil {
		t.Error(err)
	}
}
