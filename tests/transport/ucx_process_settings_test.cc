// The settings the ucx transport puts into the process's environment before
// UCX reads them (common/transport/ucx/process_settings.h). They are set once
// per process, so every case runs in a child process of its own.
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/transport/ucx/process_settings.h"
#include "gtest/gtest.h"

namespace pstrain::ucx {
namespace {

using ::testing::ExitedWithCode;

// The environment's `name`, or "(unset)".
std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "(unset)" : value;
}

// Exits 0 when `name` is `want` after SetProcessDefaults, else 1 saying what it was.
void ExitZeroIfEqual(const char* name, const std::string& want) {
  if (Env(name) == want) std::exit(0);
  fprintf(stderr, "%s is %s, not %s\n", name, Env(name).c_str(), want.c_str());
  std::exit(1);
}

TEST(UcxProcessSettingsTest, TcpSegmentsOfAQuarterMebibyteWhenTheUserSetNeither) {
  EXPECT_STREQ(kTcpSegmentSize, "256k");
  for (const char* name : {"UCX_TCP_TX_SEG_SIZE", "UCX_TCP_RX_SEG_SIZE"}) {
    EXPECT_EXIT(
        {
          unsetenv("UCX_TCP_TX_SEG_SIZE");
          unsetenv("UCX_TCP_RX_SEG_SIZE");
          SetProcessDefaults();
          ExitZeroIfEqual(name, kTcpSegmentSize);
        },
        ExitedWithCode(0), "")
        << name;
  }
}

TEST(UcxProcessSettingsTest, AUsersTcpSegmentSizeIsKeptAndTheOtherLeftToUcx) {
  // The user's size, and UCX's own for the other (8 KiB sends, 64 KiB
  // receives): a default of 256 KiB could exceed the user's receive segment.
  struct Case {
    const char* set;
    const char* value;
    const char* other;
  };
  for (const Case& c : {Case{"UCX_TCP_RX_SEG_SIZE", "32k", "UCX_TCP_TX_SEG_SIZE"},
                        Case{"UCX_TCP_TX_SEG_SIZE", "16k", "UCX_TCP_RX_SEG_SIZE"}}) {
    EXPECT_EXIT(
        {
          setenv(c.set, c.value, 1);
          unsetenv(c.other);
          SetProcessDefaults();
          if (Env(c.set) != c.value) std::exit(1);
          ExitZeroIfEqual(c.other, "(unset)");
        },
        ExitedWithCode(0), "")
        << c.set << "=" << c.value;
  }
}

// A child's exit code: UCX could not start with UCX_TLS=tcp.
constexpr int kNoTcp = 3;

// UCX accepts the defaults: a tcp worker is made with them. A send segment
// larger than the receive one is refused at the same point, so this also
// shows that UCX reads them there.
TEST(UcxProcessSettingsTest, UcxMakesATcpWorkerWithTheDefaults) {
  auto make_tcp_worker = [] {
    setenv("UCX_TLS", "tcp", 1);
    ucp_config_t* config = nullptr;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) std::exit(2);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM;
    ucp_context_h context = nullptr;
    const ucs_status_t init = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (init != UCS_OK) std::exit(kNoTcp);
    ucp_worker_params_t worker_params{};
    ucp_worker_h worker = nullptr;
    const ucs_status_t made = ucp_worker_create(context, &worker_params, &worker);
    if (made == UCS_OK) ucp_worker_destroy(worker);
    ucp_cleanup(context);
    std::exit(made == UCS_OK ? 0 : 1);
  };
  // A machine without a usable interface (not even loopback up) has no tcp
  // transport to make a worker on.
  const pid_t probe = fork();
  if (probe == 0) make_tcp_worker();
  int status = 0;
  ASSERT_EQ(waitpid(probe, &status, 0), probe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kNoTcp) {
    GTEST_SKIP() << "UCX finds no tcp device here (no network interface up, not even loopback)";
  }
  EXPECT_EXIT(
      {
        unsetenv("UCX_TCP_TX_SEG_SIZE");
        unsetenv("UCX_TCP_RX_SEG_SIZE");
        SetProcessDefaults();
        make_tcp_worker();
      },
      ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("UCX_TCP_TX_SEG_SIZE", "512k", 1);
        SetProcessDefaults();  // leaves the receive segment at UCX's 64 KiB
        make_tcp_worker();
      },
      ExitedWithCode(1), "");
}

}  // namespace
}  // namespace pstrain::ucx
