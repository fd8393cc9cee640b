// Members: which coordinator replicas a client talks to and the stable
// name of each (what keys are hashed over), parsed from a target exactly as
// the C++ client's client/internal/target_parser.cc, with its error messages:
//
//   unix:/path/agent.sock         one member: a stagger-agent's socket
//   host:port                     one member (named by the whole target)
//   a:port,b:port,...             a static list; each entry is named by
//   name=host:port,...              its explicit `name=`, else the first
//                                   label of a DNS host ("stagger-0.svc:1"
//                                   is "stagger-0"), else the whole entry
//                                   (an IP literal or localhost). Names
//                                   must differ.
//   dns:///host:port              every A/AAAA address of host, each named
//                                 by the first label of its PTR name (its
//                                 target is then that name:port), else by
//                                 its address; re-resolved periodically.
//
// parseMembers is pure; resolveDnsMembers asks the system resolver.
import { promises as dns } from "node:dns";
import { isIPv4 } from "node:net";

import { bytewiseLess } from "./rendezvous";

export interface Member {
  name: string; // stable; what keys are hashed over
  target: string; // the gRPC target of its channel
}

// A static list, or a DNS name to resolve (dnsHost non-empty).
export interface MemberSpec {
  members: Member[];
  dnsHost: string;
  dnsPort: string;
}

// (host, port) -> members. An error (rejection) keeps the members last seen.
export type MemberResolver = (host: string, port: string) => Promise<Member[]>;

const DNS_SCHEME = "dns:///";

// "host:port" -> host ("[::1]:5" -> "[::1]"); "" if there is no port.
function hostOf(hostport: string): string {
  const colon = hostport.lastIndexOf(":");
  if (colon < 0 || colon + 1 === hostport.length) return "";
  return hostport.slice(0, colon);
}

function isAddressLiteral(host: string): boolean {
  return host.startsWith("[") || host === "localhost" || isIPv4(host);
}

// absl::StripAsciiWhitespace: space, \t, \n, \v, \f, \r.
function strip(s: string): string {
  return s.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, "");
}

function parseEntry(entry: string, i: number): Member {
  let name = "";
  let target = entry;
  const eq = entry.indexOf("=");
  if (eq >= 0) {
    name = strip(entry.slice(0, eq));
    target = strip(entry.slice(eq + 1));
    if (name === "") {
      throw new Error(`target: entry ${i + 1} ("${entry}"): empty name before '='`);
    }
  }
  const host = hostOf(target);
  if (host === "" && !target.includes(":")) {
    throw new Error(`target: entry ${i + 1} ("${entry}"): expected host:port`);
  }
  if (name === "") {
    name = host === "" || isAddressLiteral(host) ? target : host.split(".")[0]!;
  }
  return { name, target };
}

// Throws an Error whose message is the C++ client's for a bad target.
export function parseMembers(target: string): MemberSpec {
  target = strip(target);
  if (target === "") throw new Error("target: must not be empty");
  if (target.startsWith(DNS_SCHEME)) {
    const rest = target.slice(DNS_SCHEME.length);
    const host = hostOf(rest);
    if (host === "" || rest.includes(",")) {
      throw new Error(`target: dns:/// takes one host:port, got "${rest}"`);
    }
    return { members: [], dnsHost: host, dnsPort: rest.slice(host.length + 1) };
  }
  const entries = target.split(",");
  const names = new Set<string>();
  const members: Member[] = [];
  entries.forEach((raw, i) => {
    const entry = strip(raw);
    if (entry === "") throw new Error(`target: entry ${i + 1} is empty`);
    const m = entries.length === 1 ? { name: entry, target: entry } : parseEntry(entry, i);
    if (names.has(m.name)) {
      throw new Error(
        `target: entry ${i + 1} ("${entry}"): the name "${m.name}" is taken by another entry; name it (name=host:port)`,
      );
    }
    names.add(m.name);
    members.push(m);
  });
  return { members, dnsHost: "", dnsPort: "" };
}

// Sorted by name (bytewise), keeping the first of each name.
export function sortedByName(members: readonly Member[]): Member[] {
  const sorted = [...members].sort((a, b) =>
    a.name === b.name ? 0 : bytewiseLess(a.name, b.name) ? -1 : 1,
  );
  return sorted.filter((m, i) => i === 0 || m.name !== sorted[i - 1]!.name);
}

// The members `host` resolves to now, each named by its PTR name's first
// label (target "fqdn:port") or by its address ("10.0.0.5:port").
export async function resolveDnsMembers(host: string, port: string): Promise<Member[]> {
  const where = `${DNS_SCHEME}${host}:${port}`;
  let addresses: { address: string; family: number }[];
  try {
    addresses = await dns.lookup(host, { all: true });
  } catch (e) {
    throw new Error(`${where}: ${(e as Error).message}`);
  }
  if (addresses.length === 0) throw new Error(`${where}: no addresses`);
  const members = await Promise.all(
    addresses.map(async ({ address, family }): Promise<Member> => {
      try {
        const [ptr] = await dns.reverse(address);
        if (ptr !== undefined && ptr !== "") {
          const fqdn = ptr.replace(/\.$/, "");
          return { name: fqdn.split(".")[0]!, target: `${fqdn}:${port}` };
        }
      } catch {
        // no PTR name: named by the address below
      }
      const literal = family === 6 ? `[${address}]` : address;
      return { name: `${literal}:${port}`, target: `${literal}:${port}` };
    }),
  );
  return sortedByName(members);
}
