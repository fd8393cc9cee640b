"""endpoint_key_from_url: the endpoint key a worker sends for a delivery
URL, without the secrets URLs often carry -- the C++ client's
EndpointKeyFromUrl (client/key_from_url.h), with the same normalisation and
the same error messages (tests/vectors/client_vectors.json, endpoint_key).

The key is  scheme "://" host [":" port] ["/" seg1 ... "/" segN]:
  * scheme and host lower-cased (ASCII letters only); an IPv6 host keeps
    its brackets;
  * the port only if it is not the scheme's default (http 80, https 443),
    written as the number it is ("0443" is 443);
  * the first `path_segments` non-empty path segments, as written;
  * NEVER userinfo, query or fragment.
Refused with InvalidArgument ("url: ..." / "path_segments: ..."): no
"scheme://", a scheme RFC 3986 does not allow, an empty host, a port that
is not a number in 1..65535, control characters or spaces anywhere, a URL
over MAX_URL_BYTES (UTF-8 bytes), path_segments outside
0..MAX_PATH_SEGMENTS.
Pure.
"""

import re

from stagger.errors import InvalidArgument

MAX_URL_BYTES = 8192
MAX_PATH_SEGMENTS = 16

# absl::SimpleAtoi's accepted form for a port (no spaces can reach it).
_NUMBER = re.compile(r"[+-]?[0-9]+\Z")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                             "abcdefghijklmnopqrstuvwxyz")


def _bad(what: str) -> InvalidArgument:
    return InvalidArgument("url: " + what)


def _scheme_ok(s: str) -> bool:
    return (s != "" and s[0].isascii() and s[0].isalpha() and
            all(c.isascii() and (c.isalnum() or c in "+-.") for c in s))


def _split_host_port(authority: str) -> "tuple[str, str]":
    """"host[:port]" (IPv6 in brackets) -> (lower-cased host, port text)."""
    host, port = authority, ""
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            raise _bad("unclosed '[' in the host")
        rest, host = host[close + 1:], host[:close + 1]
        if rest:
            if rest[0] != ":":
                raise _bad("junk after the IPv6 host")
            port = rest[1:]
    elif ":" in host:
        colon = host.rfind(":")
        host, port = host[:colon], host[colon + 1:]
    if host in ("", "[]"):
        raise _bad("no host")
    return host.translate(_ASCII_LOWER), port


def endpoint_key_from_url(url: str, path_segments: int = 0) -> str:
    """The endpoint key of `url` (see the module docstring)."""
    if not 0 <= path_segments <= MAX_PATH_SEGMENTS:
        raise InvalidArgument("path_segments: must be in 0..%d, got %d"
                              % (MAX_PATH_SEGMENTS, path_segments))
    raw = url.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_URL_BYTES:
        raise _bad("%d bytes, over the limit of %d" % (len(raw), MAX_URL_BYTES))
    if any(b <= 0x20 or b == 0x7F for b in raw):
        raise _bad("control character or space")
    sep = url.find("://")
    if sep < 0:
        raise _bad('not an absolute URL (no "://")')
    if not _scheme_ok(url[:sep]):
        raise _bad("bad scheme")
    scheme = url[:sep].translate(_ASCII_LOWER)
    rest = url[sep + 3:].split("#", 1)[0].split("?", 1)[0]
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    authority = authority[authority.rfind("@") + 1:]  # userinfo dropped
    host, port_text = _split_host_port(authority)
    key = scheme + "://" + host
    if port_text:
        port = int(port_text) if _NUMBER.match(port_text) else 0
        if not 1 <= port <= 65535:
            raise _bad("port must be a number in 1..65535")
        if (scheme, port) not in (("https", 443), ("http", 80)):
            key += ":%d" % port
    segments = [seg for seg in path.split("/") if seg]
    for seg in segments[:path_segments]:
        key += "/" + seg
    return key
