// The method names client and service share (common/ps_rpc.h) are exactly
// the ParameterServer service's in proto/ps.proto.
#include "common/ps_rpc.h"

#include <set>
#include <string>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"

namespace pstrain {
namespace {

TEST(PsRpcTest, MethodNamesAreTheServiceInPsProto) {
  const google::protobuf::ServiceDescriptor* service =
      PullRequest::descriptor()->file()->FindServiceByName("ParameterServer");
  ASSERT_NE(service, nullptr);
  std::set<std::string> in_proto, in_header;
  for (int i = 0; i < service->method_count(); ++i) in_proto.insert(service->method(i)->name());
  for (std::string_view name : ps_rpc::kAll) in_header.insert(std::string(name));
  EXPECT_EQ(in_header, in_proto);
}

}  // namespace
}  // namespace pstrain
