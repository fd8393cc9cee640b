// Exposure: the first line staggerd prints, before anything starts: which
// interfaces each of its ports listens on, and with what security. An
// operator sees at a glance whether the coordinator is open to the network
// and whether callers must present a certificate. By default it reads:
//
//   serving gRPC on 127.0.0.1:50051 (loopback only), plaintext, no
//   authorization policy; metrics on 127.0.0.1:9464 (loopback only, plain
//   HTTP); no health port; no status page
//
// and with the secure overlay's flags (deploy/k8s/overlays/secure):
//
//   serving gRPC on 0.0.0.0:50051 (all interfaces), mutual TLS,
//   authorization policy /etc/stagger-authz/authz-policy.json; metrics on
//   0.0.0.0:9464 (all interfaces, plain HTTP); health on 0.0.0.0:8081 (all
//   interfaces, plaintext); no status page
//
// Words only, from the flags as given: port 0 shows as 0 (the "listening
// on" line, once serving, has the bound ports), and a flag a later step
// refuses is refused there. Pure function, thread-safe.
#ifndef STAGGER_SERVER_DAEMON_EXPOSURE_H_
#define STAGGER_SERVER_DAEMON_EXPOSURE_H_

#include <string>

#include "server/security/security_setup.h"

namespace stagger::daemon {

struct ExposureFlags {
  std::string address;          // --address
  std::string metrics_address;  // --metrics_address; empty: no metrics
  std::string health_address;   // --health_address; empty: none
  std::string status_address;   // --status_address; empty: none
  security::SecurityFlags security;
};

std::string ExposureLine(const ExposureFlags& flags);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_EXPOSURE_H_
