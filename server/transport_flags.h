// staggerd's transport-limit flags (--max_receive_message_bytes, ...), one
// per service::TransportLimits field, defaults from that struct (see
// server/service/server_setup.h for what each bounds and why).
#ifndef STAGGER_SERVER_TRANSPORT_FLAGS_H_
#define STAGGER_SERVER_TRANSPORT_FLAGS_H_

#include "server/service/server_setup.h"

namespace stagger {

// The flags' values, not validated (service::ValidateTransportLimits).
service::TransportLimits TransportLimitsFromFlags();

}  // namespace stagger

#endif  // STAGGER_SERVER_TRANSPORT_FLAGS_H_
