// nn::save_safetensors / nn::load_safetensors (nn/serialize/module_safetensors.h): round trips
// (f32, f16, bf16 parameters, BatchNorm's running statistics and int64 counter), tied weights
// (Note [Tied weights in safetensors]), a file written by Hugging Face's save_pretrained
// (tests/fixtures/serialize/hf_bert_mlm, tools/gen_hf_bert_safetensors.py) loaded strictly into
// models::BertForMaskedLM and compared on its logits, and every error path, each leaving the
// module untouched.
#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "models/bert.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/serialize/module_safetensors.h"
#include "nn/serialize/safetensors.h"
#include "support/testing.h"

using namespace sl;

namespace {

/// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("sl_test_mst_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& n) const { return (path / n).string(); }
};

// f32 Linear, BatchNorm1d (running_mean/var f32, num_batches_tracked int64), an f16 and a bf16
// Linear.
struct Net : nn::Module {
  Net() : Module("Net") {}
  std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
  std::shared_ptr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(3));
  std::shared_ptr<nn::Linear> half = register_module(
      "half", std::make_shared<nn::Linear>(3, 2, true, TensorOptions{.dtype = DType::f16}));
  std::shared_ptr<nn::Linear> brain = register_module(
      "brain", std::make_shared<nn::Linear>(2, 5, true, TensorOptions{.dtype = DType::bf16}));
};

// Two Linears sharing one weight; "z" is registered first, "a" sorts first.
struct Tied : nn::Module {
  Tied() : Module("Tied") {
    a->weight = z->weight;
    a->parameter_slot("weight") = z->weight;
  }
  std::shared_ptr<nn::Linear> z = register_module("z", std::make_shared<nn::Linear>(3, 3));
  std::shared_ptr<nn::Linear> a = register_module("a", std::make_shared<nn::Linear>(3, 3));
};

// Every entry of m's state dict set from seed: floating ones to N(0, 1) rounded to their dtype,
// integer ones to seed.
void scramble(nn::Module& m, uint64_t seed) {
  Generator g(seed);
  NoGradGuard no_grad;
  for (const auto& [name, t] : m.state_dict()) {
    Tensor dst = t;
    if (t.is_floating_point()) {
      dst.copy_(randn(t.sizes(), {}, &g));
    } else {
      dst.fill_(static_cast<double>(seed));
    }
  }
}

// Bitwise equality of every entry (same dtype, same bytes) of two state dicts with the same keys.
void check_same_state(const nn::Module& a, const nn::Module& b) {
  const nn::StateDict sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.keys() == sb.keys());
  for (const auto& [name, t] : sa) {
    CAPTURE(name);
    const Tensor& u = sb.at(name);
    REQUIRE(t.dtype() == u.dtype());
    REQUIRE(t.sizes() == u.sizes());
    Tensor x = t.contiguous(), y = u.contiguous();
    CHECK(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0);
  }
}

// A deep copy of m's state (to show that a failed load changed nothing).
nn::StateDict snapshot(const nn::Module& m) {
  nn::StateDict out;
  for (const auto& [name, t] : m.state_dict()) out.insert(name, t.clone());
  return out;
}

void check_unchanged(const nn::Module& m, const nn::StateDict& before) {
  for (const auto& [name, t] : m.state_dict()) {
    CAPTURE(name);
    SL_CHECK_CLOSE(t, before.at(name), 0, 0);
  }
}

models::BertConfig tiny_bert() {  // TINY of tools/gen_hf_bert_safetensors.py
  models::BertConfig c;
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 24;
  c.max_position_embeddings = 16;
  c.type_vocab_size = 2;
  c.initializer_range = 0.2;
  return c;
}

std::string hf_fixture(const std::string& name) {
  return std::string(SL_SOURCE_DIR) + "/tests/fixtures/serialize/hf_bert_mlm/" + name;
}

std::string metadata_value(const serialize::Metadata& meta, const std::string& key) {
  for (const auto& [k, v] : meta) {
    if (k == key) return v;
  }
  return "<absent>";
}

}  // namespace

TEST_CASE("module safetensors: round trip of f32/f16/bf16 parameters and BatchNorm buffers") {
  TempDir dir;
  Net a, b;
  scramble(a, 1);
  scramble(b, 2);
  nn::save_safetensors(a, dir.file("net.safetensors"), {{"note", "round trip"}});
  // The file holds exactly the state dict, in the module's dtypes, plus our metadata.
  serialize::Metadata meta;
  serialize::StateDict file = serialize::load_safetensors(dir.file("net.safetensors"), &meta);
  std::vector<std::string> want = a.state_dict().keys(), got = file.keys();
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  CHECK(got == want);
  CHECK(file.at("half.weight").dtype() == DType::f16);
  CHECK(file.at("brain.bias").dtype() == DType::bf16);
  CHECK(file.at("bn.num_batches_tracked").dtype() == DType::i64);
  CHECK(meta == serialize::Metadata{{"note", "round trip"}});

  nn::LoadResult r = nn::load_safetensors(b, dir.file("net.safetensors"));
  CHECK(r.ok());
  check_same_state(a, b);  // bit for bit: nothing is converted on either side
  // In place (Note [Parameter identity]): the layer's member handle sees the loaded values.
  SL_CHECK_CLOSE(b.half->weight, a.half->weight, 0, 0);
}

TEST_CASE("module safetensors: a tied tensor is written once, under its byte-order-first name") {
  TempDir dir;
  Tied a, b;
  scramble(a, 3);
  scramble(b, 4);
  const auto groups = nn::tied_names(a.state_dict());
  REQUIRE(groups.size() == 1);
  CHECK(groups[0] == std::vector<std::string>{"z.weight", "a.weight"});  // state-dict order
  nn::save_safetensors(a, dir.file("tied.safetensors"));
  serialize::Metadata meta;
  serialize::StateDict file = serialize::load_safetensors(dir.file("tied.safetensors"), &meta);
  // safetensors.torch.save_model keeps sorted(names)[0] and records dropped -> kept.
  CHECK(file.contains("a.weight"));
  CHECK_FALSE(file.contains("z.weight"));
  CHECK(file.size() == 3);
  CHECK(meta == serialize::Metadata{{"z.weight", "a.weight"}});

  nn::LoadResult r = nn::load_safetensors(b, dir.file("tied.safetensors"));  // strict
  CHECK(r.ok());
  check_same_state(a, b);
  CHECK(b.z->weight.impl() == b.a->weight.impl());  // still one tensor

  // The caller's metadata wins over the alias note for the same key, as save_model.
  nn::save_safetensors(a, dir.file("tied2.safetensors"), {{"z.weight", "mine"}});
  serialize::load_safetensors(dir.file("tied2.safetensors"), &meta);
  CHECK(meta == serialize::Metadata{{"z.weight", "mine"}});

  // A file that holds both names (serialize::save_safetensors of the full state dict) loads when
  // they agree, and is refused when they differ.
  serialize::StateDict both = serialize::convert_state_dict<serialize::StateDict>(a.state_dict());
  serialize::save_safetensors(dir.file("both.safetensors"), both);
  scramble(b, 5);
  CHECK(nn::load_safetensors(b, dir.file("both.safetensors")).ok());
  check_same_state(a, b);
  both.set("z.weight", both.at("z.weight") + 1.0);
  serialize::save_safetensors(dir.file("differ.safetensors"), both);
  scramble(b, 6);
  const nn::StateDict before = snapshot(b);
  SL_CHECK_THROWS(
      nn::load_safetensors(b, dir.file("differ.safetensors")), ValueError,
      "holds 'z.weight' and 'a.weight', one tied tensor in Tied, with different values");
  check_unchanged(b, before);
}

TEST_CASE("module safetensors: BertForMaskedLM's tied decoder round trips strictly") {
  TempDir dir;
  models::BertForMaskedLM a(tiny_bert()), b(tiny_bert(), /*init_weights=*/false);
  nn::save_safetensors(a, dir.file("bert.safetensors"));
  serialize::Metadata meta;
  serialize::StateDict file = serialize::load_safetensors(dir.file("bert.safetensors"), &meta);
  CHECK(file.size() + 2 == a.state_dict().size());
  CHECK_FALSE(file.contains("cls.predictions.decoder.weight"));
  CHECK_FALSE(file.contains("cls.predictions.decoder.bias"));
  CHECK(metadata_value(meta, "cls.predictions.decoder.weight") ==
        "bert.embeddings.word_embeddings.weight");
  CHECK(metadata_value(meta, "cls.predictions.decoder.bias") == "cls.predictions.bias");
  nn::LoadResult r = nn::load_safetensors(b, dir.file("bert.safetensors"));
  CHECK(r.ok());
  check_same_state(a, b);
  CHECK(b.cls->predictions->decoder->weight.impl() ==
        b.bert->embeddings->word_embeddings->weight.impl());
}

TEST_CASE("module safetensors: Hugging Face's save_pretrained file loads strictly into BERT") {
  // model.safetensors lacks both decoder names (HF drops its _tied_weights_keys): their aliases
  // are present, so the strict load succeeds and reports nothing missing.
  models::BertForMaskedLM m(tiny_bert(), /*init_weights=*/false);
  nn::LoadResult r = nn::load_safetensors(m, hf_fixture("model.safetensors"));
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  m.eval();
  serialize::StateDict ex = serialize::load_safetensors(hf_fixture("expected.safetensors"));
  Tensor logits =
      m.forward(ex.at("in.input_ids"), ex.at("in.token_type_ids"), ex.at("in.attention_mask"));
  // float32 against HF's float32 forward: the same formulas accumulated in other orders through
  // two layers (see tests/models/test_bert.cpp's note: |ours - HF| <= 2e-6 on logits of O(1) to
  // O(5) there); rtol 1e-4 and atol 1e-5 as that test.
  SL_CHECK_CLOSE(logits, ex.at("out.logits"), 1e-4, 1e-5);
}

TEST_CASE("module safetensors: error paths name the key, the file and both sides") {
  TempDir dir;
  Net a, b;
  scramble(a, 7);
  scramble(b, 8);
  const std::string good = dir.file("good.safetensors");
  nn::save_safetensors(a, good);
  const nn::StateDict before = snapshot(b);
  const serialize::StateDict full =
      serialize::convert_state_dict<serialize::StateDict>(a.state_dict());

  // A missing file and a corrupt one: IOError naming the file.
  SL_CHECK_THROWS(nn::load_safetensors(b, dir.file("absent.safetensors")), IOError,
                  "absent.safetensors");
  {
    std::ofstream(dir.file("garbage.safetensors"), std::ios::binary) << "not a safetensors file";
    SL_CHECK_THROWS(nn::load_safetensors(b, dir.file("garbage.safetensors")), IOError,
                    "garbage.safetensors");
    // A valid file cut short inside its data section: the header's offsets no longer fit.
    const auto size = std::filesystem::file_size(good);
    std::filesystem::copy_file(good, dir.file("cut.safetensors"));
    std::filesystem::resize_file(dir.file("cut.safetensors"), size - 4);
    SL_CHECK_THROWS(nn::load_safetensors(b, dir.file("cut.safetensors")), IOError,
                    "cut.safetensors");
  }

  // A shape mismatch after keys that would load: ShapeError naming both shapes, strict or not.
  {
    serialize::StateDict sd = full;
    sd.set("brain.weight", zeros({5, 3}, {.dtype = DType::bf16}));
    serialize::save_safetensors(dir.file("shape.safetensors"), sd);
    for (bool strict : {true, false}) {
      SL_CHECK_THROWS(nn::load_safetensors(b, dir.file("shape.safetensors"), strict), ShapeError,
                      "'brain.weight': the file has [5, 3], the model [5, 2]");
      SL_CHECK_THROWS(nn::load_safetensors(b, dir.file("shape.safetensors"), strict), ShapeError,
                      "shape.safetensors does not fit Net");
    }
  }
  // A dtype mismatch: DTypeError naming both dtypes; LoadDType::convert converts instead.
  {
    serialize::StateDict sd = full;
    sd.set("half.weight", full.at("half.weight").to(DType::f32));
    serialize::save_safetensors(dir.file("dtype.safetensors"), sd);
    SL_CHECK_THROWS(nn::load_safetensors(b, dir.file("dtype.safetensors")), DTypeError,
                    "'half.weight': the file has float32, the model float16");
    check_unchanged(b, before);
    Net c;
    CHECK(
        nn::load_safetensors(c, dir.file("dtype.safetensors"), true, nn::LoadDType::convert).ok());
    check_same_state(a, c);  // f16 -> f32 -> f16 is exact
  }
  // A truly missing tensor: strict names it; not strict loads the rest and reports it.
  {
    serialize::StateDict sd = full;
    sd.erase("bn.running_var");
    serialize::save_safetensors(dir.file("missing.safetensors"), sd);
    SL_CHECK_THROWS(nn::load_safetensors(b, dir.file("missing.safetensors")), ValueError,
                    "missing keys: \"bn.running_var\"");
    check_unchanged(b, before);
    Net c;
    scramble(c, 9);
    const Tensor var_before = c.bn->running_var.clone();
    nn::LoadResult r = nn::load_safetensors(c, dir.file("missing.safetensors"), false);
    CHECK(r.missing_keys == std::vector<std::string>{"bn.running_var"});
    CHECK(r.unexpected_keys.empty());
    SL_CHECK_CLOSE(c.fc->weight, a.fc->weight, 0, 0);
    SL_CHECK_CLOSE(c.bn->running_var, var_before, 0, 0);
  }
  // An unexpected tensor: strict names it; not strict reports it.
  {
    serialize::StateDict sd = full;
    sd.insert("extra.weight", ones({2}));
    serialize::save_safetensors(dir.file("extra.safetensors"), sd);
    SL_CHECK_THROWS(nn::load_safetensors(b, dir.file("extra.safetensors")), ValueError,
                    "unexpected keys: \"extra.weight\"");
    Net c;
    nn::LoadResult r = nn::load_safetensors(c, dir.file("extra.safetensors"), false);
    CHECK(r.unexpected_keys == std::vector<std::string>{"extra.weight"});
    check_same_state(a, c);
  }
  check_unchanged(b, before);
  // A name missing from a tied group is only forgiven when another name of it is present.
  {
    Tied t;
    serialize::StateDict sd = serialize::convert_state_dict<serialize::StateDict>(t.state_dict());
    sd.erase("z.weight");
    sd.erase("a.weight");
    serialize::save_safetensors(dir.file("tied_missing.safetensors"), sd);
    SL_CHECK_THROWS(nn::load_safetensors(t, dir.file("tied_missing.safetensors")), ValueError,
                    "missing keys: \"z.weight\", \"a.weight\"");
  }
}
