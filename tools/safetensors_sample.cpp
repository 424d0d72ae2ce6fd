// Writes sample files with Shardlight's writers, for tools/check_safetensors.py to load with
// Python's safetensors:
//   <dir>/all_dtypes.safetensors  the tensors of tests/fixtures/serialize/all_dtypes (formulas in
//                                 tools/gen_safetensors_fixtures.py), metadata {"format": "pt"}
//   <dir>/views.safetensors       a transposed view and a slice, written contiguously
//   <dir>/checkpoint/             a training checkpoint (model, optimizer after 2 AdamW steps,
//                                 scheduler, trainer sections)
//
//   build/tools/safetensors_sample <dir>
#include <cstdio>
#include <string>

#include <shardlight/shardlight.h>

using namespace sl;
using namespace sl::serialize;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  StateDict sd;
  sd.insert("f32", arange(6).to(DType::f32).view({2, 3}).mul(0.5).sub(1.0));
  sd.insert("f64", arange(4).to(DType::f64).div(3.0));
  sd.insert("f16", arange(5).to(DType::f16).mul(0.25));
  sd.insert("bf16", arange(5).to(DType::bf16).sub(2.0));
  sd.insert("i64", arange(3).mul(static_cast<int64_t>(1000000000000)));
  sd.insert("i32", arange(4).to(DType::i32).neg());
  sd.insert("bool", tensor({int64_t{1}, int64_t{0}, int64_t{1}}).to(DType::b8));
  sd.insert("scalar", scalar_tensor(3.5));
  sd.insert("empty", zeros({0, 3}));
  sd.insert(
      "\xc3\xbcn\xc3\xaf"
      "c\xc3\xb6"
      "d\xc3\xa9/weight",
      ones({2}));
  save_safetensors(dir + "/all_dtypes.safetensors", sd, {{"format", "pt"}});

  Tensor base = arange(12).to(DType::f32).view({3, 4});
  save_safetensors(dir + "/views.safetensors",
                   StateDict{{"transposed", base.t()}, {"row1", base.select(0, 1)}});

  Tensor w = arange(6).to(DType::f32).view({2, 3}).div(10.0).requires_grad_(true);
  optim::AdamW opt({w}, {.lr = 0.1});
  optim::CosineAnnealingLR sched(opt, 10);
  for (int s = 0; s < 2; ++s) {
    w.set_grad(ones({2, 3}));
    opt.step();
    sched.step();
  }
  Checkpoint c;
  c.section(kModelSection).tensors.insert("w", w.detach());
  c.set(kOptimizerSection, opt.state_dict());
  c.set(kSchedulerSection, sched.state_dict());
  c.set_step(2);
  c.set_rng(default_generator().state());
  c.set_data_position(Json::object({{"epoch", 0}, {"batch", 2}}));
  save_checkpoint(dir + "/checkpoint", c);
  std::printf("wrote %s/{all_dtypes,views}.safetensors and %s/checkpoint\n", dir.c_str(),
              dir.c_str());
  return 0;
}
