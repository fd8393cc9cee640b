"""Members: which coordinator replicas a client talks to and the stable name
of each -- the C++ client's ParseMembers (client/internal/target_parser.h), with the same
forms, names and messages (tests/vectors/client_vectors.json, members). The
names are what endpoint keys are hashed over (rendezvous.py), so every
client and staggerd's --replicas must agree on them.

Target forms:
  unix:/path/agent.sock       one member: a stagger-agent's socket.
  host:port                   one member (named by the whole entry).
  a:port,b:port,...           a static list; each entry named by its
  name=host:port,...            explicit `name=`, else the first label of a
                                DNS host name ("stagger-0.svc:50051" is
                                "stagger-0"), else the whole entry (an IPv4
                                or [IPv6] literal, or localhost). Names must
                                be distinct.
  dns:///host:port            the members are what `host` resolves to, each
                                named by the first label of its PTR name
                                (then name:port is its target), else by its
                                address:port.
parse_members raises InvalidArgument ("target: ...") naming the entry.
Stateless apart from DNS lookups.
"""

import dataclasses
import socket
from typing import List, Sequence, Tuple

from stagger.errors import InvalidArgument

_DNS_SCHEME = "dns:///"
_WHITESPACE = " \t\n\v\f\r"  # absl::StripAsciiWhitespace


@dataclasses.dataclass(frozen=True)
class Member:
    name: str    # stable; what keys are hashed over
    target: str  # gRPC target of its channel


@dataclasses.dataclass(frozen=True)
class MemberSpec:
    """A static list (dns_host empty), or a DNS name to resolve."""
    members: Tuple[Member, ...] = ()
    dns_host: str = ""
    dns_port: str = ""


def _host_of(hostport: str) -> str:
    """"host:port" -> host ("[::1]:5" -> "[::1]"); "" without a port."""
    colon = hostport.rfind(":")
    if colon < 0 or colon + 1 == len(hostport):
        return ""
    return hostport[:colon]


def _is_address_literal(host: str) -> bool:
    if host.startswith("[") or host == "localhost":
        return True
    try:
        socket.inet_pton(socket.AF_INET, host)
        return True
    except (OSError, ValueError):
        return False


def _parse_entry(entry: str, i: int) -> Member:
    name, target = "", entry
    eq = entry.find("=")
    if eq >= 0:
        name = entry[:eq].strip(_WHITESPACE)
        target = entry[eq + 1:].strip(_WHITESPACE)
        if not name:
            raise InvalidArgument(
                "target: entry %d (\"%s\"): empty name before '='" % (i + 1, entry))
    host = _host_of(target)
    if not host and ":" not in target:
        raise InvalidArgument(
            'target: entry %d ("%s"): expected host:port' % (i + 1, entry))
    if not name:
        name = (target if not host or _is_address_literal(host)
                else host.split(".", 1)[0])
    return Member(name, target)


def parse_members(target: str) -> MemberSpec:
    """The members `target` names (see the module docstring)."""
    target = target.strip(_WHITESPACE)
    if not target:
        raise InvalidArgument("target: must not be empty")
    if target.startswith(_DNS_SCHEME):
        target = target[len(_DNS_SCHEME):]
        host = _host_of(target)
        if not host or "," in target:
            raise InvalidArgument(
                'target: dns:/// takes one host:port, got "%s"' % target)
        return MemberSpec(dns_host=host, dns_port=target[len(host) + 1:])
    entries = target.split(",")
    members: List[Member] = []
    for i, raw in enumerate(entries):
        entry = raw.strip(_WHITESPACE)
        if not entry:
            raise InvalidArgument("target: entry %d is empty" % (i + 1))
        m = Member(entry, entry) if len(entries) == 1 else _parse_entry(entry, i)
        if any(x.name == m.name for x in members):
            raise InvalidArgument(
                'target: entry %d ("%s"): the name "%s" is taken by another '
                "entry; name it (name=host:port)" % (i + 1, entry, m.name))
        members.append(m)
    return MemberSpec(members=tuple(members))


def sorted_by_name(members: Sequence[Member]) -> List[Member]:
    """`members` sorted by name, the first of each name kept."""
    out: List[Member] = []
    for m in sorted(members, key=lambda m: m.name.encode()):
        if not out or out[-1].name != m.name:
            out.append(m)
    return out


def resolve_dns_members(host: str, port: str) -> List[Member]:
    """The members `host` resolves to now, sorted by name. OSError if the
    lookup fails or finds nothing."""
    out = []
    for family, _, _, _, addr in socket.getaddrinfo(host, port,
                                                    type=socket.SOCK_STREAM):
        literal = "[%s]" % addr[0] if family == socket.AF_INET6 else addr[0]
        try:
            ptr, _ = socket.getnameinfo((addr[0], 0), socket.NI_NAMEREQD)
            fqdn = ptr[:-1] if ptr.endswith(".") else ptr
            out.append(Member(fqdn.split(".", 1)[0], "%s:%s" % (fqdn, port)))
        except OSError:
            out.append(Member("%s:%s" % (literal, port),
                              "%s:%s" % (literal, port)))
    if not out:
        raise OSError("dns:///%s:%s: no addresses" % (host, port))
    return sorted_by_name(out)
