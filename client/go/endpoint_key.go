package stagger

import (
	"strconv"
	"strings"
)

// The limits of EndpointKeyFromURL.
const (
	MaxURLBytes     = 8192
	MaxPathSegments = 16
)

// EndpointKeyFromURL is the endpoint key a worker sends for a delivery URL,
// without the secrets URLs often carry -- the C++ client's
// EndpointKeyFromUrl (client/key_from_url.h), with the same normalisation
// and error messages (tests/vectors/client_vectors.json, endpoint_key):
//
//	scheme "://" host [":" port] ["/" seg1 ... "/" segN]
//
// Scheme and host are lower-cased (ASCII letters); an IPv6 host keeps its
// brackets; the port only if it is not the scheme's default (http 80,
// https 443), as the number it is; the first pathSegments non-empty path
// segments as written; never userinfo, query or fragment. Refused with an
// *InvalidArgumentError ("url: ..." / "path_segments: ...").
func EndpointKeyFromURL(url string, pathSegments int) (string, error) {
	if pathSegments < 0 || pathSegments > MaxPathSegments {
		return "", invalid("path_segments: must be in 0..%d, got %d", MaxPathSegments, pathSegments)
	}
	if len(url) > MaxURLBytes {
		return "", invalid("url: %d bytes, over the limit of %d", len(url), MaxURLBytes)
	}
	for i := 0; i < len(url); i++ {
		if url[i] <= 0x20 || url[i] == 0x7f {
			return "", invalid("url: control character or space")
		}
	}
	sep := strings.Index(url, "://")
	if sep < 0 {
		return "", invalid("url: not an absolute URL (no \"://\")")
	}
	if !schemeOK(url[:sep]) {
		return "", invalid("url: bad scheme")
	}
	scheme := asciiLower(url[:sep])
	rest := url[sep+3:]
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	authority, path := rest, ""
	if slash := strings.IndexByte(rest, '/'); slash >= 0 {
		authority, path = rest[:slash], rest[slash:]
	}
	authority = authority[strings.LastIndexByte(authority, '@')+1:] // userinfo dropped
	host, portText, err := splitHostPort(authority)
	if err != nil {
		return "", err
	}
	key := scheme + "://" + host
	if portText != "" {
		port, err := strconv.Atoi(portText)
		if err != nil || port < 1 || port > 65535 {
			return "", invalid("url: port must be a number in 1..65535")
		}
		if !(scheme == "https" && port == 443) && !(scheme == "http" && port == 80) {
			key += ":" + strconv.Itoa(port)
		}
	}
	return key + pathPrefix(path, pathSegments), nil
}

func pathPrefix(path string, n int) string {
	out := ""
	for _, seg := range strings.Split(path, "/") {
		if n == 0 {
			break
		}
		if seg != "" {
			out += "/" + seg
			n--
		}
	}
	return out
}

func schemeOK(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlpha(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// splitHostPort: "host[:port]" (IPv6 in brackets) -> lower-cased host, port
// text.
func splitHostPort(authority string) (string, string, error) {
	host, port := authority, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", "", invalid("url: unclosed '[' in the host")
		}
		rest := host[end+1:]
		host = host[:end+1]
		if rest != "" {
			if rest[0] != ':' {
				return "", "", invalid("url: junk after the IPv6 host")
			}
			port = rest[1:]
		}
	} else if colon := strings.LastIndexByte(host, ':'); colon >= 0 {
		host, port = host[:colon], host[colon+1:]
	}
	if host == "" || host == "[]" {
		return "", "", invalid("url: no host")
	}
	return asciiLower(host), port, nil
}
