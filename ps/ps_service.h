// PsService: adapts a PsShard to the transport's Handler (frames <-> calls).
// Decodes the header named by each method of proto/ps.proto; a header that
// does not parse, or an unknown method, is answered with an error and changes
// nothing.
#pragma once

#include "common/transport/transport.h"
#include "ps/shard/shard.h"

namespace pstrain {

class PsService : public Handler {
 public:
  explicit PsService(PsShard* shard) : shard_(shard) {}
  void Handle(std::string_view method, IncomingFrame request, Responder respond) override;

 private:
  PsShard* shard_;
};

}  // namespace pstrain
