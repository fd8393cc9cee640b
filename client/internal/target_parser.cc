#include "client/internal/target_parser.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stagger::client {
namespace {

constexpr absl::string_view kDnsScheme = "dns:///";

// "host:port" -> host ("[::1]:5" -> "[::1]"); empty if there is no port.
absl::string_view HostOf(absl::string_view hostport) {
  const size_t colon = hostport.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == hostport.size()) {
    return {};
  }
  return hostport.substr(0, colon);
}

bool IsAddressLiteral(absl::string_view host) {
  if (absl::StartsWith(host, "[")) return true;  // [v6]
  if (host == "localhost") return true;
  in_addr v4;
  return inet_pton(AF_INET, std::string(host).c_str(), &v4) == 1;
}

// The name an entry without `name=` gets (see the header).
std::string DefaultName(absl::string_view entry, absl::string_view host) {
  if (host.empty() || IsAddressLiteral(host)) return std::string(entry);
  return std::string(host.substr(0, host.find('.')));
}

absl::StatusOr<Member> ParseEntry(absl::string_view entry, size_t i) {
  Member m;
  absl::string_view target = entry;
  const size_t eq = entry.find('=');
  if (eq != absl::string_view::npos) {
    m.name = std::string(absl::StripAsciiWhitespace(entry.substr(0, eq)));
    target = absl::StripAsciiWhitespace(entry.substr(eq + 1));
    if (m.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("target: entry ", i + 1, " (\"", entry,
                       "\"): empty name before '='"));
    }
  }
  const absl::string_view host = HostOf(target);
  if (host.empty() && !absl::StrContains(target, ":")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target: entry ", i + 1, " (\"", entry, "\"): expected host:port"));
  }
  if (m.name.empty()) m.name = DefaultName(target, host);
  m.target = std::string(target);
  return m;
}

// A socket address as a target host ("10.0.0.5", "[fd00::5]").
std::string AddressLiteral(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr,
              buf, sizeof(buf));
    return absl::StrCat("[", buf, "]");
  }
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf,
            sizeof(buf));
  return buf;
}

}  // namespace

absl::StatusOr<MemberSpec> ParseMembers(absl::string_view target) {
  MemberSpec spec;
  target = absl::StripAsciiWhitespace(target);
  if (target.empty()) {
    return absl::InvalidArgumentError("target: must not be empty");
  }
  if (absl::ConsumePrefix(&target, kDnsScheme)) {
    const absl::string_view host = HostOf(target);
    if (host.empty() || absl::StrContains(target, ",")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target: dns:/// takes one host:port, got \"", target, "\""));
    }
    spec.dns_host = std::string(host);
    spec.dns_port = std::string(target.substr(host.size() + 1));
    return spec;
  }
  std::vector<absl::string_view> entries = absl::StrSplit(target, ',');
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    const absl::string_view entry = absl::StripAsciiWhitespace(entries[i]);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("target: entry ", i + 1, " is empty"));
    }
    absl::StatusOr<Member> m = entries.size() == 1
                                   ? Member{std::string(entry),
                                            std::string(entry)}
                                   : ParseEntry(entry, i);
    if (!m.ok()) return m.status();
    if (!names.insert(m->name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target: entry ", i + 1, " (\"", entry, "\"): the name \"", m->name,
          "\" is taken by another entry; name it (name=host:port)"));
    }
    spec.members.push_back(*std::move(m));
  }
  return spec;
}

absl::StatusOr<std::vector<Member>> ResolveDnsMembers(absl::string_view host,
                                                      absl::string_view port) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string h(host), p(port);
  if (int rc = getaddrinfo(h.c_str(), p.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("dns:///", host, ":", port, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(found, freeaddrinfo);
  std::vector<Member> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char ptr[NI_MAXHOST] = {};
    Member m;
    if (getnameinfo(a->ai_addr, a->ai_addrlen, ptr, sizeof(ptr), nullptr, 0,
                    NI_NAMEREQD) == 0) {
      const absl::string_view fqdn = absl::StripSuffix(ptr, ".");
      m.name = std::string(fqdn.substr(0, fqdn.find('.')));
      m.target = absl::StrCat(fqdn, ":", port);
    } else {
      m.target = absl::StrCat(AddressLiteral(a->ai_addr), ":", port);
      m.name = m.target;
    }
    out.push_back(std::move(m));
  }
  if (out.empty()) {
    return absl::UnavailableError(
        absl::StrCat("dns:///", host, ":", port, ": no addresses"));
  }
  return SortedByName(std::move(out));
}

std::vector<Member> SortedByName(std::vector<Member> members) {
  std::stable_sort(members.begin(), members.end(),
                   [](const Member& a, const Member& b) { return a.name < b.name; });
  members.erase(std::unique(members.begin(), members.end(),
                            [](const Member& a, const Member& b) {
                              return a.name == b.name;
                            }),
                members.end());
  return members;
}

}  // namespace stagger::client
