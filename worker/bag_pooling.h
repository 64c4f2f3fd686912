// Pooling a bag of embedding rows into one model input, and its gradient:
// the arithmetic of a multi-valued feature (docs/EMBEDDINGS.md, "Bags").
//
// A bag is `bag` slots, each the index of a pulled row or -1 (no id: a
// shorter bag's padding, or a missing feature). Its pooled value is the sum
// of its rows, or with `mean` their mean; an id twice in a bag counts twice;
// an empty bag pools to zeros. AddBagGradient is PoolBag's transpose: for
// any rows and gradient g, <PoolBag(rows), g> = <rows, AddBagGradient(g)>.
#pragma once

#include <cstdint>

namespace pstrain {

// The slots of `slots[0, bag)` that hold a row.
int BagLength(const int32_t* slots, int bag);

// out[0, dim) = the pooled rows of the bag; row k is rows[k * dim, (k + 1) * dim).
void PoolBag(const int32_t* slots, int bag, bool mean, const float* rows, int dim, float* out);

// Adds `scale` times the pooled value's gradient `grad[0, dim)` onto the
// gradient of each of the bag's rows (row k at row_grads[k * dim]), divided
// by the bag's length with `mean`.
void AddBagGradient(const int32_t* slots, int bag, bool mean, const float* grad, float scale, int dim,
                    float* row_grads);

}  // namespace pstrain
