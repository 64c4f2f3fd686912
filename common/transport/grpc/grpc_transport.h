// GrpcTransport ("grpc"): frames over gRPC unary calls on HTTP/2.
//
// Requests and responses travel as grpc::ByteBuffer: one slice with the
// varint-prefixed header, then one slice per payload chunk pointing at the
// sender's memory (no copy; the chunk's owner is released when gRPC is done
// with the slice). Received payload is read straight from gRPC's slices.
// Methods are served generically as "/pstrain.ParameterServer/<Method>".
#pragma once

#include "common/transport/transport.h"

namespace pstrain {

std::unique_ptr<Transport> CreateGrpcTransport(const TransportOptions& options);

}  // namespace pstrain
