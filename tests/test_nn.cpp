// nn: the Module registry (names, counts, children), train/eval, to(), zero_grad, and each
// layer's forward against the op it wraps, with its parameters and their gradients.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> names;
  for (const auto& n : named) names.push_back(n.first);
  return names;
}

// A module with a parameter, a buffer and a child, as a user writes one.
class Block : public nn::Module {
 public:
  Block() {
    register_parameter("scale", scale, ones({3}));
    register_buffer("steps", steps, zeros({1}));
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x * scale); }
  std::string name() const override { return "Block"; }
  Tensor scale, steps;
  std::shared_ptr<nn::Linear> fc;
};

}  // namespace

TEST_CASE("nn::Module: parameters and buffers by dotted name, in registration order, and counted") {
  manual_seed(1000);
  nn::Sequential model;
  model.push_back(std::make_shared<Block>());
  model.push_back(std::make_shared<nn::GELU>());
  model.push_back(std::make_shared<nn::Linear>(2, 4, /*bias=*/false));
  CHECK(names_of(model.named_parameters()) ==
        std::vector<std::string>{"0.scale", "0.fc.weight", "0.fc.bias", "2.weight"});
  CHECK(names_of(model.named_parameters(/*recurse=*/false)).empty());
  CHECK(names_of(model.named_buffers()) == std::vector<std::string>{"0.steps"});
  CHECK(model.num_parameters() == 3 + 6 + 2 + 8);
  CHECK(model.size() == 3);
  for (const Tensor& p : model.parameters()) {
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
  }
  for (const auto& [name, b] : model.named_buffers()) CHECK(!b.requires_grad());
}

TEST_CASE("nn::Module: a parameter's gradient reaches the module's member; zero_grad forgets it") {
  manual_seed(1001);
  Block block;
  const Tensor x = randn({5, 3});
  block.forward(x).sum().backward();
  REQUIRE(block.scale.grad().defined());
  REQUIRE(block.fc->weight.grad().defined());
  // The parameters listed are the members themselves: the same gradient.
  CHECK(block.named_parameters()[0].second.grad().defined());
  block.zero_grad();
  for (const Tensor& p : block.parameters()) CHECK(!p.grad().defined());
}

TEST_CASE("nn::Module: to(dtype) replaces the members with new leaves; forward uses them") {
  manual_seed(1002);
  Block block;
  const Tensor x = randn({2, 3}, kFloat64);
  const Tensor before = block.forward(x.to(kFloat32));
  block.to(kFloat64);
  for (const auto& [name, p] : block.named_parameters()) {
    CAPTURE(name);
    CHECK(p.dtype() == kFloat64);
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
  }
  CHECK(block.fc->weight.dtype() == kFloat64);
  CHECK(block.steps.dtype() == kFloat64);
  const Tensor after = block.forward(x);
  CHECK(after.dtype() == kFloat64);
  CHECK_ALLCLOSE(after.to(kFloat32), before, 1e-5, 1e-6);
  after.sum().backward();
  CHECK(block.fc->weight.grad().dtype() == kFloat64);
  CHECK_THROWS_CONTAINING(block.to(kInt64), "Block.to: parameters are floating, got int64");
}

TEST_CASE("nn::Module: train() and eval() reach the children; Dropout drops only in training") {
  manual_seed(1003);
  nn::Sequential model;
  const auto drop = model.push_back(std::make_shared<nn::Dropout>(0.5));
  const Tensor x = randn({1000});
  CHECK(drop->is_training());
  CHECK(eq(model.forward(x), 0.0).any().item<bool>());
  model.eval();
  CHECK(!drop->is_training());
  CHECK(equal(model.forward(x), x));
  model.train();
  CHECK(drop->is_training());
}

TEST_CASE("nn layers: each forward is its op on the module's parameters") {
  manual_seed(1004);
  const Tensor x = randn({4, 6});
  {
    nn::Linear fc(6, 3);
    CHECK(fc.weight.sizes() == Shape{3, 6});
    CHECK(fc.bias.sizes() == Shape{3});
    const double bound = 1.0 / std::sqrt(6.0);
    CHECK(le(abs(fc.weight), bound).all().item<bool>());
    CHECK(le(abs(fc.bias), bound).all().item<bool>());
    CHECK(equal(fc.forward(x), linear(x, fc.weight, fc.bias)));
    nn::Linear no_bias(6, 3, false);
    CHECK(!no_bias.bias.defined());
    CHECK(no_bias.num_parameters() == 18);
  }
  {
    nn::LayerNorm norm({6});
    CHECK(equal(norm.weight, ones({6})));
    CHECK(equal(norm.bias, zeros({6})));
    CHECK(equal(norm.forward(x), layer_norm(x, {6}, norm.weight, norm.bias)));
    nn::LayerNorm plain({6}, 1e-5, /*elementwise_affine=*/false);
    CHECK(plain.num_parameters() == 0);
    CHECK(equal(plain.forward(x), layer_norm(x, {6})));
  }
  {
    nn::RMSNorm norm({6});
    CHECK(equal(norm.forward(x), rms_norm(x, {6}, norm.weight)));
  }
  {
    nn::Embedding table(10, 4, /*padding_idx=*/-1);
    CHECK(table.padding_idx == 9);
    CHECK(equal(table.weight.select(0, 9), zeros({4})));
    const Tensor ids = from_vector<int64_t>({1, 9, 3, 1}, {2, 2});
    const Tensor y = table.forward(ids);
    CHECK(y.sizes() == Shape{2, 2, 4});
    CHECK(equal(y, embedding(table.weight, ids, 9)));
  }
  {
    nn::MLP block(6, 10, GeluApproximation::Tanh);
    CHECK(names_of(block.named_parameters()) ==
          std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
    CHECK(block.num_parameters() == 6 * 10 + 10 + 10 * 6 + 6);
    const Tensor hidden = gelu(linear(x, block.fc1->weight, block.fc1->bias), GeluApproximation::Tanh);
    CHECK(equal(block.forward(x), linear(hidden, block.fc2->weight, block.fc2->bias)));
  }
  {
    nn::GELU tanh_gelu(GeluApproximation::Tanh);
    CHECK(equal(tanh_gelu.forward(x), gelu(x, GeluApproximation::Tanh)));
  }
}

// Registers "weight" twice: the second is an error.
class TwiceNamed : public nn::Module {
 public:
  TwiceNamed() {
    register_parameter("weight", a, ones({1}));
    register_buffer("weight", b, ones({1}));
  }
  std::string name() const override { return "TwiceNamed"; }
  Tensor a, b;
};

TEST_CASE("nn: bad arguments are errors naming the module") {
  CHECK_THROWS_CONTAINING(TwiceNamed(), "TwiceNamed: the name \"weight\" is already registered");
  CHECK_THROWS_CONTAINING(nn::Linear(0, 3), "Linear: in_features and out_features must be positive");
  CHECK_THROWS_CONTAINING(nn::Dropout(1.0), "Dropout: p must be in [0, 1), got 1");
  CHECK_THROWS_CONTAINING(nn::Embedding(4, 2, 4), "Embedding: padding_idx 4 is out of range for 4 embeddings");
  nn::GELU gelu_module;
  CHECK(gelu_module.num_parameters() == 0);
  nn::Module bare;
  CHECK_THROWS_CONTAINING(bare.forward(randn({2})), "Module has no forward of one tensor");
}

TEST_CASE("safetensors: a round trip keeps names, dtypes, shapes and values, and the file's bytes") {
  manual_seed(1005);
  const nn::NamedTensors tensors = {{"a.weight", randn({3, 5})},
                                    {"b", randn({2}, kFloat64)},
                                    {"half", randn({4, 1}).to(kBFloat16)},
                                    {"f16", randn({3}).to(kFloat16)},
                                    {"ids", from_vector<int64_t>({7, -1, 3}, {3})},
                                    {"mask", from_vector<double>({1, 0}, {2}).to(kBool)},
                                    {"empty", zeros({0, 3})},
                                    {"scalar", full({}, 2.5)}};
  const std::string path = "test_nn_roundtrip.safetensors", again = "test_nn_roundtrip_again.safetensors";
  nn::save_safetensors(tensors, path);
  const nn::NamedTensors loaded = nn::load_safetensors(path);
  REQUIRE(loaded.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(tensors[i].first);
    CHECK(loaded[i].first == tensors[i].first);
    CHECK(loaded[i].second.dtype() == tensors[i].second.dtype());
    CHECK(loaded[i].second.sizes() == tensors[i].second.sizes());
    CHECK(equal(loaded[i].second, tensors[i].second));
  }
  nn::save_safetensors(loaded, again);
  auto bytes = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string first = bytes(path);
  CHECK(first == bytes(again));
  // The layout: 8 bytes of header length, the JSON header padded to 8, then the data.
  uint64_t length = 0;
  std::memcpy(&length, first.data(), 8);
  CHECK(length % 8 == 0);
  CHECK(first.substr(8, 13) == "{\"a.weight\":{");
  CHECK(first.size() == 8 + length + (15 * 4 + 2 * 8 + 4 * 2 + 3 * 2 + 3 * 8 + 2 * 1 + 0 + 4));
  std::remove(path.c_str());
  std::remove(again.c_str());
}

TEST_CASE("nn::save and nn::load: a module's parameters and buffers by name, into the members") {
  manual_seed(1006);
  const std::string path = "test_nn_module.safetensors";
  Block saved;
  nn::save(saved, path);
  Block restored;
  CHECK(!equal(restored.fc->weight, saved.fc->weight));
  nn::load(restored, path);
  for (size_t i = 0; i < 3; ++i) CHECK(equal(restored.parameters()[i], saved.parameters()[i]));
  CHECK(restored.fc->weight.requires_grad());
  CHECK(restored.fc->weight.is_leaf());
  nn::Linear other(4, 2);
  CHECK_THROWS_CONTAINING(nn::load(other, path), "has no tensor named \"weight\"");
  nn::save_safetensors({{"fc.weight", zeros({5, 3})}, {"fc.bias", zeros({2})}, {"scale", zeros({3})},
                        {"steps", zeros({1})}},
                       path);
  CHECK_THROWS_CONTAINING(nn::load(restored, path), "\"fc.weight\" has shape [5, 3]");
  std::remove(path.c_str());
  CHECK_THROWS_CONTAINING(nn::load_safetensors("no_such_file.safetensors"), "safetensors: cannot open");
}
