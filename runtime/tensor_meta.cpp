#include "runtime/tensor_meta.h"

#include "runtime/error.h"

namespace graft {

std::string TensorMeta::str() const { return detail::str_cat(shape_str(shape), " ", dtype, " ", device); }

}  // namespace graft
