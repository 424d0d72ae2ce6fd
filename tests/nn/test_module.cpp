// nn::Module: names, traversal, state dicts, modes, devices, parameter identity, printing.
#include <cmath>

#include "nn/activation.h"
#include "nn/containers.h"
#include "nn/linear.h"
#include "support/testing.h"

using namespace sl;

namespace {

// The same tree as the PyTorch model below; its names and repr were printed by torch 1.13:
//   class Block(nn.Module): fc = nn.Linear(4, 8); act = nn.GELU(approximate='tanh')
//   class Net(nn.Module): embed = nn.Linear(3, 4, bias=False)
//     blocks = nn.ModuleList([Block(), Block()])
//     head = nn.Sequential(nn.ReLU(), nn.Hardtanh(0., 20.), nn.Flatten(), nn.Linear(8, 2))
//     extra = nn.ModuleDict({'tanh': nn.Tanh(), 'id': nn.Identity()})
struct Block : nn::Module {
  Block() : Module("Block") {}
  std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 8));
  std::shared_ptr<nn::GELU> act = register_module("act", std::make_shared<nn::GELU>("tanh"));
  Tensor forward(const Tensor& x) override { return act->forward(fc->forward(x)); }
};

struct Net : nn::Module {
  Net() : Module("Net") {
    blocks->push_back(std::make_shared<Block>());
    blocks->push_back(std::make_shared<Block>());
  }
  std::shared_ptr<nn::Linear> embed =
      register_module("embed", std::make_shared<nn::Linear>(3, 4, false));
  std::shared_ptr<nn::ModuleList> blocks =
      register_module("blocks", std::make_shared<nn::ModuleList>());
  std::shared_ptr<nn::Sequential> head = register_module(
      "head", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                  std::make_shared<nn::ReLU>(), std::make_shared<nn::Hardtanh>(0.0, 20.0),
                  std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(8, 2)}));
  std::shared_ptr<nn::ModuleDict> extra = register_module(
      "extra",
      std::make_shared<nn::ModuleDict>(
          std::initializer_list<std::pair<std::string, std::shared_ptr<nn::Module>>>{
              {"tanh", std::make_shared<nn::Tanh>()}, {"id", std::make_shared<nn::Identity>()}}));
  Tensor forward(const Tensor& x) override {
    Tensor e = embed->forward(x);
    Tensor h = (*blocks)[0]->forward(e) + (*blocks)[1]->forward(e);
    return extra->get_submodule("tanh").forward(head->forward(h));
  }
};

std::vector<std::string> names(const nn::Module::NamedTensors& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("module names match PyTorch's") {
  Net net;
  CHECK(names(net.named_parameters()) ==
        std::vector<std::string>{"embed.weight", "blocks.0.fc.weight", "blocks.0.fc.bias",
                                 "blocks.1.fc.weight", "blocks.1.fc.bias", "head.3.weight",
                                 "head.3.bias"});
  std::vector<std::string> mods;
  for (const auto& [n, m] : net.named_modules()) mods.push_back(n);
  CHECK(mods == std::vector<std::string>{"", "embed", "blocks", "blocks.0", "blocks.0.fc",
                                         "blocks.0.act", "blocks.1", "blocks.1.fc", "blocks.1.act",
                                         "head", "head.0", "head.1", "head.2", "head.3", "extra",
                                         "extra.tanh", "extra.id"});
  CHECK(net.num_parameters() == 3 * 4 + 2 * (4 * 8 + 8) + 8 * 2 + 2);
  CHECK(net.get_parameter("blocks.1.fc.bias")
            .is_same(std::dynamic_pointer_cast<Block>((*net.blocks)[1])->fc->bias));
  SL_CHECK_THROWS(net.get_parameter("blocks.2.fc.bias"), IndexError, "has no child '2'");
  SL_CHECK_THROWS(net.get_parameter("embed.bias"), IndexError, "has no parameter 'bias'");
  Tensor y = net.forward(randn({5, 3}));
  CHECK(y.sizes() == Shape{5, 2});
}

TEST_CASE("module repr matches PyTorch's") {
  Net net;
  const char* expected = R"(Net(
  (embed): Linear(in_features=3, out_features=4, bias=False)
  (blocks): ModuleList(
    (0): Block(
      (fc): Linear(in_features=4, out_features=8, bias=True)
      (act): GELU(approximate='tanh')
    )
    (1): Block(
      (fc): Linear(in_features=4, out_features=8, bias=True)
      (act): GELU(approximate='tanh')
    )
  )
  (head): Sequential(
    (0): ReLU()
    (1): Hardtanh(min_val=0.0, max_val=20.0)
    (2): Flatten(start_dim=1, end_dim=-1)
    (3): Linear(in_features=8, out_features=2, bias=True)
  )
  (extra): ModuleDict(
    (tanh): Tanh()
    (id): Identity()
  )
))";
  CHECK(net.str() == expected);
}

TEST_CASE("py_float formats like Python's repr") {
  // Expected strings printed by Python 3.11's repr().
  CHECK(nn::repr::py_float(0.1) == "0.1");
  CHECK(nn::repr::py_float(1e-5) == "1e-05");
  CHECK(nn::repr::py_float(20.0) == "20.0");
  CHECK(nn::repr::py_float(100.0) == "100.0");
  CHECK(nn::repr::py_float(1e-12) == "1e-12");
  CHECK(nn::repr::py_float(1e16) == "1e+16");
  CHECK(nn::repr::py_float(123456.789) == "123456.789");
  CHECK(nn::repr::py_float(0.0001) == "0.0001");
  CHECK(nn::repr::py_float(2.5e-7) == "2.5e-07");
  CHECK(nn::repr::py_float(-3.0) == "-3.0");
  CHECK(nn::repr::py_float(1.5e15) == "1500000000000000.0");
  CHECK(nn::repr::py_tuple({3}) == "(3,)");
  CHECK(nn::repr::py_tuple({3, 3}) == "(3, 3)");
}

TEST_CASE("registration errors") {
  nn::Module m("M");
  m.register_parameter("w", zeros({2}));
  SL_CHECK_THROWS(m.register_parameter("w", zeros({2})), ValueError,
                  "attribute 'w' already exists");
  SL_CHECK_THROWS(m.register_buffer("w", zeros({2})), ValueError, "attribute 'w' already exists");
  SL_CHECK_THROWS(m.register_parameter("a.b", zeros({2})), ValueError, "must not contain '.'");
  SL_CHECK_THROWS(m.register_parameter("", zeros({2})), ValueError, "must not be empty");
  SL_CHECK_THROWS(m.register_parameter("i", zeros({2}, {.dtype = DType::i64})), DTypeError,
                  "must be floating point");
  SL_CHECK_THROWS(m.register_module("c", std::shared_ptr<nn::Module>()), ValueError, "is null");
  SL_CHECK_THROWS(m.forward(zeros({1})), ValueError, "M: this module has no one-tensor forward");
  CHECK(m.get_parameter("w").requires_grad());
}

TEST_CASE("tied parameters are listed once but saved under every name") {
  nn::Module m("Tied");
  auto a = m.register_module("a", std::make_shared<nn::Linear>(3, 3, false));
  auto b = m.register_module("b", std::make_shared<nn::Linear>(3, 3, false));
  b->parameter_slot("weight") = a->weight;  // as `b.weight = a.weight` in PyTorch
  CHECK(names(m.named_parameters()) == std::vector<std::string>{"a.weight"});
  CHECK(m.state_dict().keys() == std::vector<std::string>{"a.weight", "b.weight"});
  CHECK(m.num_parameters() == 9);
}

TEST_CASE("state_dict holds parameters and persistent buffers") {
  nn::Module m("M");
  m.register_parameter("w", ones({2, 2}));
  m.register_buffer("running", zeros({2}));
  m.register_buffer("scratch", zeros({3}), /*persistent=*/false);
  m.register_parameter("absent", Tensor());
  auto c = m.register_module("child", std::make_shared<nn::Linear>(2, 1));
  nn::StateDict sd = m.state_dict();
  CHECK(sd.keys() == std::vector<std::string>{"w", "running", "child.weight", "child.bias"});
  CHECK(names(m.named_buffers()) == std::vector<std::string>{"running", "scratch"});
  // Entries share memory with the module and do not require grad.
  CHECK(sd.at("w").is_same_storage(m.get_parameter("w")));
  CHECK_FALSE(sd.at("w").requires_grad());
  SL_CHECK_THROWS(sd.at("nope"), IndexError, "no key 'nope'");
}

TEST_CASE("load_state_dict copies by name and reports problems") {
  manual_seed(1);
  Net a, b;
  nn::StateDict sd = a.state_dict();
  nn::LoadResult r = b.load_state_dict(sd);
  CHECK(r.ok());
  for (const auto& [name, t] : a.state_dict()) SL_CHECK_CLOSE(b.state_dict().at(name), t, 0, 0);
  // The copy is a copy: changing a does not change b.
  {
    NoGradGuard ng;
    a.embed->weight.fill_(7.0);
  }
  CHECK(b.embed->weight.max().item<double>() < 7.0);

  nn::StateDict bad;
  for (const auto& [name, t] : sd) {
    if (name == "head.3.bias") continue;  // missing
    bad.insert(name, t);
  }
  bad.insert("head.9.weight", zeros({1}));  // unexpected
  SL_CHECK_THROWS(b.load_state_dict(bad), ValueError, "missing keys: \"head.3.bias\"");
  SL_CHECK_THROWS(b.load_state_dict(bad), ValueError, "unexpected keys: \"head.9.weight\"");
  // Strict failure copies nothing.
  Tensor before = b.blocks->at<Block>(0)->fc->weight.clone();
  Tensor fresh_src = bad.at("blocks.0.fc.weight");
  {
    NoGradGuard ng;
    fresh_src.fill_(3.0);
  }
  CHECK_THROWS_AS(b.load_state_dict(bad), ValueError);
  SL_CHECK_CLOSE(b.blocks->at<Block>(0)->fc->weight, before, 0, 0);

  // A shape mismatch throws strict or not (PyTorch raises "size mismatch" in both modes), names
  // every mismatched key with both shapes, and copies nothing.
  nn::StateDict misfit;
  for (const auto& [name, t] : bad) {
    misfit.insert(name, name == "embed.weight" ? zeros({4, 4}) : t);
  }
  misfit.set("head.3.weight", zeros({2}));
  for (bool strict : {true, false}) {
    CAPTURE(strict);
    SL_CHECK_THROWS(b.load_state_dict(misfit, strict), ShapeError,
                    "embed.weight: checkpoint [4, 4] vs model [4, 3]");
    SL_CHECK_THROWS(b.load_state_dict(misfit, strict), ShapeError,
                    "head.3.weight: checkpoint [2] vs model [2, 8]");
    SL_CHECK_CLOSE(b.blocks->at<Block>(0)->fc->weight, before, 0, 0);
  }

  // Non-strict: copies what both sides have, reports the rest.
  nn::LoadResult r2 = b.load_state_dict(bad, /*strict=*/false);
  CHECK(r2.missing_keys == std::vector<std::string>{"head.3.bias"});
  CHECK(r2.unexpected_keys == std::vector<std::string>{"head.9.weight"});
  CHECK(b.blocks->at<Block>(0)->fc->weight.min().item<double>() == 3.0);
  CHECK(r2.str() == "missing keys: \"head.3.bias\"\nunexpected keys: \"head.9.weight\"\n");
}

TEST_CASE("load_state_dict converts dtype") {
  nn::Linear a(2, 3), b(2, 3);
  nn::StateDict sd;
  for (const auto& [k, v] : a.state_dict()) sd.insert(k, v.to(DType::f64));
  CHECK(b.load_state_dict(sd).ok());
  CHECK(b.weight.dtype() == DType::f32);
  SL_CHECK_CLOSE(b.weight, a.weight, 0, 0);
}

TEST_CASE("train/eval reach every module") {
  Net net;
  net.eval();
  for (const auto& [n, m] : net.named_modules()) CHECK_FALSE(m->is_training());
  net.train();
  for (const auto& [n, m] : net.named_modules()) CHECK(m->is_training());
}

TEST_CASE("apply visits children before the parent") {
  Net net;
  std::vector<std::string> order;
  net.head->apply([&](nn::Module& m) { order.push_back(m.type_name()); });
  CHECK(order == std::vector<std::string>{"ReLU", "Hardtanh", "Flatten", "Linear", "Sequential"});
}

TEST_CASE("to(dtype) keeps parameter identity and converts gradients") {
  nn::Linear lin(3, 2);
  Tensor w = lin.weight;
  lin.forward(ones({1, 3})).sum().backward();
  REQUIRE(w.grad().defined());
  Tensor w_before = w.detach().to(DType::f64, true);
  lin.to(DType::f64);
  CHECK(w.dtype() == DType::f64);  // the handle we kept sees the change
  CHECK(w.grad().dtype() == DType::f64);
  CHECK(w.requires_grad());
  SL_CHECK_CLOSE(w, w_before, 0, 0);
  // It still trains: a new backward accumulates into the same .grad.
  lin.zero_grad();
  CHECK_FALSE(w.grad().defined());
  lin.forward(ones({1, 3}, {.dtype = DType::f64})).sum().backward();
  CHECK(w.grad().dtype() == DType::f64);
  SL_CHECK_THROWS(lin.to(DType::i64), DTypeError, "only floating dtypes");
}

TEST_CASE("zero_grad without set_to_none zeroes in place") {
  nn::Linear lin(3, 2);
  lin.forward(ones({4, 3})).sum().backward();
  Tensor g = lin.bias.grad();
  lin.zero_grad(/*set_to_none=*/false);
  CHECK(lin.bias.grad().is_same(g));
  CHECK(g.abs().sum().item<double>() == 0.0);
}

TEST_CASE("set_parameter_data re-points parameters at a flat buffer") {
  // What a distributed wrapper does: one flat buffer, parameters become views of it.
  manual_seed(3);
  Net net;
  auto params = net.named_parameters();
  int64_t total = net.num_parameters();
  Tensor flat = zeros({total});
  Tensor w_handle = net.embed->weight;  // a handle user code holds
  Tensor expected_out;
  {
    Tensor x = randn({2, 3});
    expected_out = net.forward(x).detach();
    int64_t off = 0;
    for (const auto& [name, p] : params) {
      Tensor view = flat.narrow(0, off, p.numel()).view(p.sizes());
      {
        NoGradGuard ng;
        view.copy_(p);
      }
      net.set_parameter_data(name, view);
      off += p.numel();
    }
    SL_CHECK_CLOSE(net.forward(x), expected_out, 0, 0);
  }
  CHECK(w_handle.is_same_storage(flat));
  CHECK(net.embed->weight.is_same(w_handle));
  // Writing the flat buffer changes the parameters.
  {
    NoGradGuard ng;
    flat.fill_(0.5);
  }
  CHECK(w_handle.min().item<double>() == 0.5);
  // Gradients still reach the (same) leaf, and hooks registered before the swap stay attached.
  int fired = 0;
  w_handle.register_post_accumulate_grad_hook([&](const Tensor&) { ++fired; });
  net.forward(randn({2, 3})).sum().backward();
  CHECK(fired == 1);
  CHECK(w_handle.grad().sizes() == Shape{4, 3});
  SL_CHECK_THROWS(net.set_parameter_data("embed.weight", zeros({3, 4})), ShapeError,
                  "'embed.weight' has shape [4, 3] but the new data has shape [3, 4]");
}

TEST_CASE("Linear: shapes, default init bounds, errors") {
  manual_seed(0);
  nn::Linear lin(20, 7);
  CHECK(lin.weight.sizes() == Shape{7, 20});
  // kaiming_uniform(a=sqrt(5)) on fan_in 20 gives bound 1/sqrt(20); so does the bias.
  double bound = 1.0 / std::sqrt(20.0);
  CHECK(lin.weight.abs().max().item<double>() <= bound);
  CHECK(lin.bias.abs().max().item<double>() <= bound);
  CHECK(lin.weight.abs().max().item<double>() > 0.8 * bound);  // actually spread over the range
  Tensor x = randn({2, 5, 20});
  CHECK(lin.forward(x).sizes() == Shape{2, 5, 7});
  SL_CHECK_THROWS(lin.forward(randn({2, 19})), ShapeError,
                  "Linear: expected an input whose last dim is in_features=20, got shape [2, 19]");
  SL_CHECK_THROWS(nn::Linear(0, 3), ValueError, "must be positive");
}

TEST_CASE("Sequential and ModuleList indexing") {
  nn::Sequential s{std::make_shared<nn::ReLU>(), std::make_shared<nn::Tanh>()};
  CHECK(s.size() == 2);
  CHECK(s[1]->type_name() == "Tanh");
  SL_CHECK_THROWS(s[2], IndexError, "index 2 out of range for 2 modules");
  SL_CHECK_THROWS(s.at<nn::Linear>(0), ValueError, "child 0 is a ReLU");
  Tensor x = tensor({-1.0f, 2.0f});
  SL_CHECK_CLOSE(s.forward(x), tensor({0.0f, std::tanh(2.0f)}), 1e-6, 0);
  nn::ModuleDict d;
  d.insert("a", std::make_shared<nn::ReLU>());
  SL_CHECK_THROWS(d.insert("a", std::make_shared<nn::ReLU>()), ValueError, "already exists");
  SL_CHECK_THROWS(d["b"], IndexError, "no key 'b'");
  CHECK(d.contains("a"));
}
