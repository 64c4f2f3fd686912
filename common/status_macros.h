// Status propagation helpers shared by every module.
//
//   PSTRAIN_RETURN_IF_ERROR(DoThing());
//   PSTRAIN_ASSIGN_OR_RETURN(auto value, ComputeValue());
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PSTRAIN_CONCAT_INNER(a, b) a##b
#define PSTRAIN_CONCAT(a, b) PSTRAIN_CONCAT_INNER(a, b)

#define PSTRAIN_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status pstrain_status_ = (expr);           \
    if (!pstrain_status_.ok()) return pstrain_status_; \
  } while (0)

#define PSTRAIN_ASSIGN_OR_RETURN(lhs, expr) \
  PSTRAIN_ASSIGN_OR_RETURN_IMPL(PSTRAIN_CONCAT(pstrain_statusor_, __LINE__), lhs, expr)

#define PSTRAIN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
