package stagger

import (
	"fmt"
	"net"
	"sort"
	"strings"
)

// Member is one coordinator replica (or the stagger-agent) a client talks
// to: its stable Name, which keys are hashed over, and the gRPC Target of
// its connection.
type Member struct {
	Name   string
	Target string
}

// MemberSpec is what a target names: a static list, or a DNS name whose
// addresses are the members (DNSHost set).
type MemberSpec struct {
	Members []Member
	DNSHost string
	DNSPort string
}

const dnsScheme = "dns:///"

// ParseMembers reads a target in the C++ client's forms
// (client/internal/target_parser.h; tests/vectors/client_vectors.json, members):
//
//	unix:/path/agent.sock  one member: a stagger-agent's socket
//	host:port              one member, named by the whole entry
//	a:port,b:port,...      a list; each entry named by its explicit name=,
//	name=host:port,...     else the first label of a DNS host name, else
//	                       the whole entry (an IP literal, localhost)
//	dns:///host:port       the addresses host resolves to, each named by
//	                       its PTR name's first label (else address:port)
//
// Errors are *InvalidArgumentError ("target: entry 2 (...): ...").
func ParseMembers(target string) (MemberSpec, error) {
	target = strings.Trim(target, httpWhitespace)
	if target == "" {
		return MemberSpec{}, invalid("target: must not be empty")
	}
	if strings.HasPrefix(target, dnsScheme) {
		rest := target[len(dnsScheme):]
		host := hostOf(rest)
		if host == "" || strings.Contains(rest, ",") {
			return MemberSpec{}, invalid("target: dns:/// takes one host:port, got \"%s\"", rest)
		}
		return MemberSpec{DNSHost: host, DNSPort: rest[len(host)+1:]}, nil
	}
	entries := strings.Split(target, ",")
	var out []Member
	for i, raw := range entries {
		entry := strings.Trim(raw, httpWhitespace)
		if entry == "" {
			return MemberSpec{}, invalid("target: entry %d is empty", i+1)
		}
		m := Member{entry, entry}
		if len(entries) > 1 {
			var err error
			if m, err = parseEntry(entry, i); err != nil {
				return MemberSpec{}, err
			}
		}
		for _, x := range out {
			if x.Name == m.Name {
				return MemberSpec{}, invalid("target: entry %d (\"%s\"): the name \"%s\" is taken by another entry; name it (name=host:port)", i+1, entry, m.Name)
			}
		}
		out = append(out, m)
	}
	return MemberSpec{Members: out}, nil
}

// hostOf: "host:port" -> host ("[::1]:5" -> "[::1]"); "" without a port.
func hostOf(hostport string) string {
	colon := strings.LastIndexByte(hostport, ':')
	if colon < 0 || colon+1 == len(hostport) {
		return ""
	}
	return hostport[:colon]
}

func isAddressLiteral(host string) bool {
	if strings.HasPrefix(host, "[") || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.To4() != nil && !strings.Contains(host, ":")
}

func parseEntry(entry string, i int) (Member, error) {
	name, target := "", entry
	if eq := strings.IndexByte(entry, '='); eq >= 0 {
		name = strings.Trim(entry[:eq], httpWhitespace)
		target = strings.Trim(entry[eq+1:], httpWhitespace)
		if name == "" {
			return Member{}, invalid("target: entry %d (\"%s\"): empty name before '='", i+1, entry)
		}
	}
	host := hostOf(target)
	if host == "" && !strings.Contains(target, ":") {
		return Member{}, invalid("target: entry %d (\"%s\"): expected host:port", i+1, entry)
	}
	if name == "" {
		if host == "" || isAddressLiteral(host) {
			name = target
		} else {
			name = strings.SplitN(host, ".", 2)[0]
		}
	}
	return Member{name, target}, nil
}

// sortedByName sorts members by name (bytes), keeping the first of each.
func sortedByName(members []Member) []Member {
	s := append([]Member(nil), members...)
	sort.SliceStable(s, func(a, b int) bool { return s[a].Name < s[b].Name })
	var out []Member
	for _, m := range s {
		if len(out) == 0 || out[len(out)-1].Name != m.Name {
			out = append(out, m)
		}
	}
	return out
}

// ResolveDNSMembers is the members host resolves to now, sorted by name.
func ResolveDNSMembers(host, port string) ([]Member, error) {
	addrs, err := net.LookupHost(host)
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, a := range addrs {
		literal := a
		if strings.Contains(a, ":") {
			literal = "[" + a + "]"
		}
		if names, err := net.LookupAddr(a); err == nil && len(names) > 0 {
			fqdn := strings.TrimSuffix(names[0], ".")
			out = append(out, Member{strings.SplitN(fqdn, ".", 2)[0], fqdn + ":" + port})
			continue
		}
		out = append(out, Member{literal + ":" + port, literal + ":" + port})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dns:///%s:%s: no addresses", host, port)
	}
	return sortedByName(out), nil
}
