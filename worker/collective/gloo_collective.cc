// Gloo implementation of Collective: TCP transport, rendezvous through the
// chief's key-value store, Gloo's ring all-reduce, broadcast and barrier.
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/compression/compression.h"
#include "common/status_macros.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "worker/collective/collective.h"
#include "worker/collective/gloo_store.h"
#include "worker/collective/kv_store.h"

namespace pstrain {
namespace {

std::chrono::milliseconds ToMillis(absl::Duration d) {
  // Gloo treats 0 as "no timeout": never hand it one.
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

std::string ShortDuration(absl::Duration d) {
  return absl::FormatDuration(absl::Milliseconds(absl::ToInt64Milliseconds(d)));
}

// Gloo reports a timeout as "Timed out waiting ...ms for recv/send ...".
absl::StatusCode CodeForGlooError(const std::string& what) {
  return absl::StrContains(what, "Timed out") || absl::StrContains(what, "timed out") ||
                 absl::StrContains(what, "Timeout") || absl::StrContains(what, "timeout")
             ? absl::StatusCode::kDeadlineExceeded
             : absl::StatusCode::kUnavailable;
}

absl::Status CheckDType(WireDType dtype) {
  if (WireDTypeSize(dtype) == 0) return absl::InvalidArgumentError(absl::StrCat("unknown element type ", dtype));
  return absl::OkStatus();
}

class GlooCollective : public Collective {
 public:
  GlooCollective(const CollectiveOptions& options, std::shared_ptr<gloo::transport::Device> device,
                 std::shared_ptr<gloo::rendezvous::Context> context)
      : rank_(options.rank),
        size_(options.size),
        prefix_(options.prefix),
        timeout_(options.timeout),
        device_(std::move(device)),
        context_(std::move(context)) {}

  ~GlooCollective() override {
    // Pairs close before the device's event loop stops.
    context_.reset();
    device_.reset();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSumTyped(void* data, size_t count, WireDType dtype) override {
    if (count == 0) return absl::OkStatus();
    if (data == nullptr) return absl::InvalidArgumentError("AllReduceSum: data is null");
    PSTRAIN_RETURN_IF_ERROR(CheckDType(dtype));
    return Run(absl::StrCat("all-reduce of ", count, " ", WireDTypeElements(dtype)), [&](uint32_t tag) {
      gloo::AllreduceOptions opts(context_);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      if (dtype == DT_FLOAT32) {
        opts.setOutput(static_cast<float*>(data), count);
        opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      } else {
        opts.setOutput(static_cast<uint16_t*>(data), count);
        opts.setReduceFunction(
            [dtype](void* sum, const void* a, const void* b, size_t n) { AddEncoded(dtype, a, b, n, sum); });
      }
      opts.setTag(tag);
      opts.setTimeout(ToMillis(timeout_));
      gloo::allreduce(opts);
    });
  }

  absl::Status BroadcastTyped(void* data, size_t count, WireDType dtype, int root) override {
    if (root < 0 || root >= size_) {
      return absl::InvalidArgumentError(absl::StrCat("Broadcast: root ", root, " out of range [0, ", size_, ")"));
    }
    if (count == 0) return absl::OkStatus();
    if (data == nullptr) return absl::InvalidArgumentError("Broadcast: data is null");
    PSTRAIN_RETURN_IF_ERROR(CheckDType(dtype));
    return Run(absl::StrCat("broadcast of ", count, " ", WireDTypeElements(dtype), " from rank ", root),
               [&](uint32_t tag) {
                 gloo::BroadcastOptions opts(context_);
                 // The root sends from its output buffer.
                 if (dtype == DT_FLOAT32) {
                   opts.setOutput(static_cast<float*>(data), count);
                 } else {
                   opts.setOutput(static_cast<uint16_t*>(data), count);
                 }
                 opts.setRoot(root);
                 opts.setTag(tag);
                 opts.setTimeout(ToMillis(timeout_));
                 gloo::broadcast(opts);
               });
  }

  absl::Status Barrier() override {
    return Run("barrier", [&](uint32_t tag) {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(ToMillis(timeout_));
      gloo::barrier(opts);
    });
  }

 private:
  // Runs one operation under the lock with a fresh tag, turning Gloo's
  // exceptions into a Status that also breaks the communicator.
  template <typename Op>
  absl::Status Run(const std::string& what, Op op) {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("gloo communicator \"", prefix_, "\" (rank ", rank_, " of ",
                                                        size_, ") is broken by an earlier error: ", broken_.message()));
    }
    if (size_ == 1) return absl::OkStatus();  // nothing to exchange
    const uint32_t tag = next_tag_++;
    try {
      op(tag);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      const std::string message = e.what();
      broken_ = absl::Status(
          CodeForGlooError(message),
          absl::StrCat("gloo ", what, " failed on rank ", rank_, " of ", size_, " (communicator \"", prefix_,
                       "\", timeout ", ShortDuration(timeout_), "; a peer died, stopped participating or ",
                       "called a different operation): ", message));
      return broken_;
    }
  }

  const int rank_;
  const int size_;
  const std::string prefix_;
  const absl::Duration timeout_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  absl::Mutex mu_;  // one operation at a time
  uint32_t next_tag_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(const CollectiveOptions& options) {
  if (options.size < 1) return absl::InvalidArgumentError(absl::StrCat("gloo: size ", options.size, " < 1"));
  if (options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: rank ", options.rank, " out of range [0, ", options.size, ")"));
  }
  if (options.store == nullptr) return absl::InvalidArgumentError("gloo: no rendezvous store");
  if (options.host.empty()) {
    return absl::InvalidArgumentError("gloo: host is empty (the address or interface this rank's peers reach it on)");
  }
  if (options.prefix.empty()) return absl::InvalidArgumentError("gloo: rendezvous prefix is empty");
  if (options.timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("gloo: timeout must be > 0");
  const absl::Duration connect_timeout =
      options.connect_timeout > absl::ZeroDuration() ? options.connect_timeout : options.timeout;
  const std::string who = absl::StrCat("rank ", options.rank, " of ", options.size, " (rendezvous \"", options.prefix,
                                       "\", host ", options.host, ")");

  gloo::transport::tcp::attr attr;
  if (if_nametoindex(options.host.c_str()) != 0) {
    attr.iface = options.host;
  } else {
    // Gloo (this version) reads getaddrinfo's result list even when the
    // lookup failed and crashes on an unresolvable name: resolve it first.
    struct addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* found = nullptr;
    const int rv = getaddrinfo(options.host.c_str(), nullptr, &hints, &found);
    if (rv != 0 || found == nullptr) {
      return absl::UnavailableError(absl::StrCat("gloo: cannot resolve host \"", options.host, "\" for ", who, ": ",
                                                 rv != 0 ? gai_strerror(rv) : "no addresses"));
    }
    freeaddrinfo(found);
    attr.hostname = options.host;
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("gloo: cannot listen on ", options.host, " for ", who, ": ", e.what()));
  }

  auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
  // Bounds the store waits and the TCP connects of the rendezvous.
  context->setTimeout(ToMillis(connect_timeout));
  GlooKvStore store(options.store, options.prefix, connect_timeout, absl::Now() + connect_timeout);
  try {
    context->connectFullMesh(store, device);
  } catch (const std::exception& e) {
    absl::Status cause = store.last_error();
    if (cause.ok()) cause = absl::Status(CodeForGlooError(e.what()), e.what());
    return absl::Status(cause.code(), absl::StrCat("gloo: ", who, " could not connect to its peers within ",
                                                   ShortDuration(connect_timeout), ": ", cause.message()));
  }
  context->setTimeout(ToMillis(options.timeout));
  return std::unique_ptr<Collective>(new GlooCollective(options, std::move(device), std::move(context)));
}

namespace {

const bool kRegistered = CollectiveRegistry().Register(
    "gloo", {.host_buffers = true, .needs_store = true, .launched_by_mpirun = false, .create = CreateGlooCollective});

}  // namespace
}  // namespace pstrain
