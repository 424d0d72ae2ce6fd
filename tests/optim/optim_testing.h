// Helpers shared by the optimizer tests.
#pragma once

#include "support/testing.h"

namespace sl::testing {

/// A Section through an in-memory safetensors file and JSON text, as a checkpoint stores it.
inline serialize::Section through_file(const serialize::Section& s) {
  serialize::Section out;
  out.tensors = serialize::deserialize_safetensors(serialize::serialize_safetensors(s.tensors));
  out.meta = serialize::Json::parse(s.meta.dump());
  return out;
}

}  // namespace sl::testing
