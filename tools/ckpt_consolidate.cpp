// ckpt_consolidate: turns a sharded checkpoint (any world size, any strategy) into one
// safetensors file of the full parameters and buffers, under the model's PyTorch names, for
// inference or for PyTorch:
//   ckpt_consolidate <checkpoint dir> <out.safetensors>
//   python3 -c "from safetensors.torch import load_file; sd = load_file('out.safetensors')"
#include <cstdio>
#include <exception>
#include <string>

#include "dist/checkpoint.h"
#include "nn/serialize/safetensors.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <sharded checkpoint dir> <out.safetensors>\n", argv[0]);
    return 2;
  }
  try {
    sl::serialize::Json m = sl::dist::read_sharded_manifest(argv[1]);
    sl::serialize::StateDict sd = sl::dist::consolidate_sharded_checkpoint(argv[1]);
    // "format": "pt" is what safetensors.torch.save_file writes; PyTorch loaders expect it.
    sl::serialize::save_safetensors(argv[2], sd, {{"format", "pt"}});
    int64_t bytes = 0;
    for (const auto& [name, t] : sd) bytes += static_cast<int64_t>(t.nbytes());
    std::printf("%s: %zu tensors, %lld bytes (saved by %lld ranks with %s) -> %s\n", argv[1],
                sd.size(), static_cast<long long>(bytes),
                static_cast<long long>(m.at("world_size").as_int()),
                m.at("strategy").as_string().c_str(), argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckpt_consolidate: %s\n", e.what());
    return 1;
  }
  return 0;
}
