#include <catch2/catch.hpp>

#include "graft.h"

using namespace graft;

namespace {
struct Net : nn::Module {
  Net() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2));
    scale = register_parameter("scale", ones({1}));
    steps = register_buffer("steps", zeros({1}));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(fc1->forward(x).relu()) * scale; }
  std::shared_ptr<nn::Linear> fc1, fc2;
  Tensor scale, steps;
};

std::vector<std::string> keys(const nn::OrderedDict<Tensor>& d) { return d.keys(); }
}  // namespace

TEST_CASE("registration: parameters, buffers and children with dotted names") {
  Net net;
  CHECK(keys(net.named_parameters()) ==
        std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  CHECK(keys(net.named_parameters(false)) == std::vector<std::string>{"scale"});
  CHECK(net.parameters().size() == 5);
  CHECK(net.parameters(false).size() == 1);
  CHECK(keys(net.named_buffers()) == std::vector<std::string>{"steps"});
  CHECK(net.buffers().size() == 1);
  REQUIRE(net.children().size() == 2);
  CHECK(net.children()[0] == net.fc1);
  CHECK(net.named_children().keys() == std::vector<std::string>{"fc1", "fc2"});
  // Handles alias the registered tensors.
  CHECK(net.named_parameters()["fc1.weight"].is_same(net.fc1->weight));
  for (const auto& p : net.parameters()) {
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
  }
  CHECK_FALSE(net.steps.requires_grad());
}

TEST_CASE("register_parameter honours requires_grad and rejects duplicate names") {
  nn::Module m;
  Tensor frozen = m.register_parameter("frozen", zeros({2}), false);
  CHECK_FALSE(frozen.requires_grad());
  CHECK(m.parameters().size() == 1);
  CHECK_THROWS_WITH(m.register_parameter("frozen", zeros({2})), Catch::Contains("already registered"));
  CHECK_THROWS_WITH(m.register_buffer("frozen", zeros({2})), Catch::Contains("already registered"));
  CHECK_THROWS_WITH(m.register_module("a.b", std::make_shared<nn::ReLU>()), Catch::Contains("'.'"));
  CHECK_THROWS_WITH(m.forward(zeros({1})), Catch::Contains("not implemented"));
}

TEST_CASE("Sequential names children 0, 1, ...") {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(4, 8));
  seq->push_back(std::make_shared<nn::ReLU>());
  auto last = seq->push_back(std::make_shared<nn::Linear>(8, 2, false));
  CHECK(keys(seq->named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight"});
  CHECK(seq->named_modules().keys() == std::vector<std::string>{"0", "1", "2"});
  CHECK(seq->size() == 3);
  CHECK(seq->at<nn::Linear>(2) == last);
  CHECK_THROWS(seq->at<nn::Linear>(1));
  auto outer = nn::Sequential{seq, std::make_shared<nn::Tanh>()};
  CHECK(keys(outer.named_parameters()) == std::vector<std::string>{"0.0.weight", "0.0.bias", "0.2.weight"});
  CHECK(outer.named_modules().keys() == std::vector<std::string>{"0", "0.0", "0.1", "0.2", "1"});
}

TEST_CASE("train and eval propagate to every descendant") {
  auto inner = std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Dropout>(0.5)});
  nn::Sequential outer{inner, std::make_shared<nn::BatchNorm2d>(3)};
  CHECK(outer.is_training());
  outer.eval();
  CHECK_FALSE(outer.is_training());
  CHECK_FALSE(inner->is_training());
  CHECK_FALSE((*inner)[0]->is_training());
  CHECK_FALSE(outer[1]->is_training());
  outer.train();
  CHECK((*inner)[0]->is_training());
  outer.train(false);
  CHECK_FALSE(outer[1]->is_training());
}

TEST_CASE("state_dict holds parameters and buffers and round-trips") {
  manual_seed(1);
  nn::Sequential a{std::make_shared<nn::Conv2d>(2, 3, 3), std::make_shared<nn::BatchNorm2d>(3)};
  auto sd = a.state_dict();
  CHECK(sd.keys() == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                              "1.running_var", "1.num_batches_tracked"});
  // Change the running stats so buffers carry information.
  a.forward(randn({4, 2, 5, 5}));
  nn::Sequential b{std::make_shared<nn::Conv2d>(2, 3, 3), std::make_shared<nn::BatchNorm2d>(3)};
  Tensor bw = b.named_parameters()["0.weight"];
  int64_t v0 = bw.version();
  b.load_state_dict(a.state_dict());
  // Copied in place: same tensors, still leaves that require grad.
  CHECK(b.named_parameters()["0.weight"].is_same(bw));
  CHECK(bw.version() > v0);
  CHECK(bw.is_leaf());
  CHECK(bw.requires_grad());
  for (const auto& [k, v] : a.state_dict()) {
    INFO(k);
    CHECK(b.state_dict()[k].to(kFloat64).to_vector<double>() == v.to(kFloat64).to_vector<double>());
  }
  CHECK(b.state_dict()["1.num_batches_tracked"].item<int64_t>() == 1);
  a.eval();
  b.eval();
  Tensor x = randn({1, 2, 4, 4});
  CHECK(a.forward(x).to_vector<float>() == b.forward(x).to_vector<float>());
}

TEST_CASE("load_state_dict errors name missing, unexpected and mis-shaped keys") {
  auto make = [](int64_t out) {
    return std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(3, out)});
  };
  auto model = make(5);
  auto sd = model->state_dict();
  Tensor w_before = model->state_dict()["0.weight"].clone();

  SECTION("missing") {
    sd.erase("0.bias");
    CHECK_THROWS_WITH(model->load_state_dict(sd), Catch::Contains("load_state_dict: missing keys: 0.bias"));
    model->load_state_dict(sd, false);  // non-strict: fine
  }
  SECTION("unexpected") {
    sd.insert("fc.extra", zeros({1}));
    sd.insert("other", zeros({1}));
    CHECK_THROWS_WITH(model->load_state_dict(sd), Catch::Contains("unexpected keys: fc.extra, other"));
    model->load_state_dict(sd, false);
  }
  SECTION("size mismatch, also when not strict; nothing is copied") {
    sd.insert("0.weight", ones({5, 3}));
    sd.insert("0.bias", zeros({10}));
    CHECK_THROWS_WITH(model->load_state_dict(sd),
                      Catch::Contains("size mismatch for 0.bias: [10] in the checkpoint, [5] in the model"));
    CHECK_THROWS_WITH(model->load_state_dict(sd, false), Catch::Contains("size mismatch for 0.bias"));
    CHECK(model->state_dict()["0.weight"].to_vector<float>() == w_before.to_vector<float>());
  }
  SECTION("all at once") {
    sd.erase("0.weight");
    sd.insert("0.bias", zeros({10}));
    sd.insert("x", zeros({1}));
    CHECK_THROWS_WITH(model->load_state_dict(sd),
                      Catch::Contains("load_state_dict: missing keys: 0.weight; unexpected keys: x; "
                                      "size mismatch for 0.bias: [10] in the checkpoint, [5] in the model"));
  }
}

TEST_CASE("to(Device) and to(DType) keep parameters as leaves and update the handles") {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  (lin->forward(ones({1, 3})).sum()).backward();
  lin->to(kCPU);
  CHECK(lin->weight.device() == kCPU);
  CHECK(lin->weight.is_leaf());
  CHECK(lin->weight.requires_grad());
  CHECK(lin->weight.grad().defined());
  CHECK(lin->parameters()[0].is_same(lin->weight));

  lin->to(kFloat64);
  CHECK(lin->weight.dtype() == kFloat64);
  CHECK(lin->bias.dtype() == kFloat64);
  CHECK(lin->parameters()[0].is_same(lin->weight));
  CHECK(lin->weight.is_leaf());
  CHECK(lin->weight.requires_grad());
  CHECK(lin->forward(ones({1, 3}, dtype(kFloat64))).dtype() == kFloat64);

  nn::BatchNorm2d bn(2);
  bn.to(kFloat64);
  CHECK(bn.running_mean.dtype() == kFloat64);
  CHECK(bn.num_batches_tracked.dtype() == kInt64);
  CHECK(bn.named_buffers()["running_mean"].is_same(bn.running_mean));
  if (cuda_is_available()) {
    lin->to(kCUDA);
    CHECK(lin->weight.is_cuda());
    CHECK(lin->weight.is_leaf());
    CHECK(lin->parameters()[1].is_cuda());
  }
}

TEST_CASE("Module::to keeps parameter identity: an optimizer built before to() keeps training the model") {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  Tensor w_before = lin->weight;
  optim::SGD opt(lin->parameters(), 0.5);
  (lin->forward(ones({1, 3})).sum()).backward();  // a grad and a (since freed) accumulator exist
  lin->to(kFloat64);
  // The same tensor (libtorch's set_data), now float64, with its grad converted along.
  CHECK(lin->weight.is_same(w_before));
  CHECK(w_before.dtype() == kFloat64);
  CHECK(opt.parameters()[0].is_same(lin->weight));
  CHECK(opt.parameters()[0].dtype() == kFloat64);
  CHECK(lin->weight.grad().dtype() == kFloat64);
  CHECK(lin->weight.is_leaf());
  CHECK(lin->weight.requires_grad());
  opt.zero_grad();
  Tensor before = lin->weight.detach().clone();
  (lin->forward(ones({1, 3}, dtype(kFloat64))).sum()).backward();
  REQUIRE(lin->weight.grad().defined());
  CHECK(lin->weight.grad().dtype() == kFloat64);
  opt.step();
  // The step moved the model's own weight: d(sum)/dw is 1 everywhere, so w -= 0.5.
  CHECK((lin->weight.detach() - (before - 0.5)).abs().max().item<double>() < 1e-12);
  if (cuda_is_available()) {
    lin->to(kCUDA);
    CHECK(opt.parameters()[0].is_cuda());
    CHECK(opt.parameters()[0].is_same(lin->weight));
  }
}

TEST_CASE("Tensor::set_data swaps the data and keeps identity and autograd state") {
  Tensor p = ones({2}).requires_grad_();
  Tensor alias = p;
  (p * 3).sum().backward();
  p.set_data(full({3}, 2.0, dtype(kFloat64)));
  CHECK(alias.sizes() == Shape{3});
  CHECK(alias.dtype() == kFloat64);
  CHECK(alias.requires_grad());
  CHECK(alias.grad().defined());  // kept as is, like libtorch
  // A new graph builds a new accumulator for the new metadata.
  alias.mutable_grad() = Tensor();
  (p * p).sum().backward();
  CHECK((p.grad() - 4.0).abs().max().item<double>() < 1e-12);
  // Non-leaves and integer data for a tensor that requires grad are refused.
  Tensor y = p * 2;
  CHECK_THROWS_WITH(y.set_data(ones({3})), Catch::Contains("set_data: only a leaf"));
  CHECK_THROWS_WITH(p.set_data(ones({3}, dtype(kInt64))), Catch::Contains("cannot take data of dtype"));
}

TEST_CASE("Module::zero_grad sets grads to none or zeroes them") {
  Net net;
  net.forward(ones({2, 4})).sum().backward();
  for (auto& p : net.parameters()) CHECK(p.grad().defined());
  net.zero_grad(false);
  for (auto& p : net.parameters()) {
    REQUIRE(p.grad().defined());
    for (float v : p.grad().to_vector<float>()) CHECK(v == 0.0f);
  }
  net.zero_grad();
  for (auto& p : net.parameters()) CHECK_FALSE(p.grad().defined());
}

namespace {

// A module with no code of its own around to(): it keeps member handles to what it registered.
struct Holder : nn::Module {
  Holder() {
    w = register_parameter("w", randn({2, 3, 2, 2}));
    stat = register_buffer("stat", zeros({3}));
    count = register_buffer("count", zeros({}, dtype(kInt64)));
  }
  Tensor w, stat, count;
};

// Each member handle is the very tensor registered under that name (parameter or buffer).
void check_members(const nn::Module& m, const std::vector<std::pair<std::string, Tensor>>& members) {
  auto params = m.named_parameters();
  auto buffers = m.named_buffers();
  for (const auto& [name, member] : members) {
    INFO(m.name() << " member " << name);
    const Tensor* registered = params.find(name);
    if (!registered) registered = buffers.find(name);
    REQUIRE(registered);
    CHECK(registered->is_same(member));
  }
}

}  // namespace

TEST_CASE("Module::to converts parameters, buffers and gradients in place: every handle to them sees the new data") {
  Holder m;
  (m.w * m.w).sum().backward();
  Tensor w = m.w, stat = m.stat, count = m.count, grad = m.w.grad();  // handles kept outside the module
  m.to(kFloat64);
  CHECK(w.dtype() == kFloat64);
  CHECK(stat.dtype() == kFloat64);
  CHECK(count.dtype() == kInt64);  // integral buffers keep their dtype
  // PyTorch's Module._apply converts .grad too, in place (param.grad.data = fn(param.grad)).
  CHECK(grad.dtype() == kFloat64);
  CHECK(m.w.grad().is_same(grad));
  check_members(m, {{"w", w}, {"stat", stat}, {"count", count}});
  CHECK(w.is_leaf());
  CHECK(w.requires_grad());

  m.to(MemoryFormat::ChannelsLast);
  CHECK(w.is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(grad.is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(m.w.grad().is_same(grad));
  check_members(m, {{"w", w}, {"stat", stat}, {"count", count}});

  // A buffer carries on as the module's state: an in-place update through the member is the
  // registered buffer's, and so the state dict's.
  {
    NoGradGuard ng;
    m.stat.add_(1);
  }
  CHECK(m.state_dict()["stat"].is_same(stat));
  CHECK(m.state_dict()["stat"].to_vector<double>() == std::vector<double>{1, 1, 1});

  // A gradient with history (backward with create_graph) has no data to swap; it is converted
  // and replaced, without its history.
  m.w.mutable_grad() = Tensor();
  (m.w * m.w).sum().backward({}, std::nullopt, /*create_graph=*/true);
  REQUIRE(m.w.grad().grad_fn() != nullptr);
  m.to(kFloat32);
  CHECK(m.w.grad().dtype() == kFloat32);
  CHECK(m.w.grad().grad_fn() == nullptr);
  CHECK(w.dtype() == kFloat32);
}

TEST_CASE("Module::to keeps a tensor shared by two modules shared, buffers included") {
  auto a = std::make_shared<Holder>();
  auto b = std::make_shared<nn::Module>();
  Tensor tied_w = b->register_parameter("w", a->w);
  Tensor tied_stat = b->register_buffer("stat", a->stat);
  nn::Sequential both;
  both.push_back(a);
  both.push_back(b);
  both.to(kFloat64);
  CHECK(tied_w.is_same(a->w));
  CHECK(tied_stat.is_same(a->stat));
  CHECK(a->stat.dtype() == kFloat64);
  CHECK(both.named_buffers()["1.stat"].is_same(a->stat));
}

TEST_CASE("a buffer or parameter registered as a view of another tensor is stored as a tensor of its own that to() converts") {
  Tensor big = zeros({4, 3});
  nn::Module m;
  Tensor row = m.register_buffer("row", big.select(0, 1));
  Tensor cols = m.register_parameter("cols", big.slice(1, 0, 2));
  m.to(kFloat64);
  CHECK(row.dtype() == kFloat64);
  CHECK(cols.dtype() == kFloat64);
  CHECK(m.named_buffers()["row"].is_same(row));
  CHECK(m.named_parameters()["cols"].is_same(cols));
  CHECK(big.dtype() == kFloat32);  // the tensor it was a view of is not the module's
}

namespace {

// One of each module that keeps handles to its tensors in members.
struct Zoo : nn::Module {
  Zoo() {
    conv = register_module("conv", std::make_shared<nn::Conv2d>(2, 2, nn::Size2(3), nn::Size2(1), nn::Size2(1)));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(2));
    emb = register_module("emb", std::make_shared<nn::Embedding>(5, 4));
    pos = register_module("pos", std::make_shared<nn::PositionalEmbedding>(3, 4));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(Shape{4}));
    lin = register_module("lin", std::make_shared<nn::Linear>(4, 1));
    vit = register_module("vit", std::make_shared<nn::VisionTransformer>(nn::VisionTransformerOptions{
                                     .image_size = 8, .in_channels = 2, .patch_size = 4, .num_classes = 1,
                                     .dim = 8, .depth = 2, .heads = 2, .mlp_dim = 16}));
  }
  // images [N, 2, 8, 8], tokens [N, 3] -> [N]
  Tensor forward2(const Tensor& images, const Tensor& tokens) {
    Tensor a = (*bn)((*conv)(images)).relu();
    Tensor b = (*lin)((*ln)((*pos)((*emb)(tokens)))).sum({1, 2});
    return (*vit)(a).sum({1}) + b;
  }
  void check_all_members() const {
    check_members(*conv, {{"weight", conv->weight}, {"bias", conv->bias}});
    check_members(*bn, {{"weight", bn->weight}, {"bias", bn->bias}, {"running_mean", bn->running_mean},
                        {"running_var", bn->running_var}, {"num_batches_tracked", bn->num_batches_tracked}});
    check_members(*emb, {{"weight", emb->weight}});
    check_members(*pos, {{"weight", pos->weight}});
    check_members(*ln, {{"weight", ln->weight}, {"bias", ln->bias}});
    check_members(*lin, {{"weight", lin->weight}, {"bias", lin->bias}});
    check_members(*vit, {{"cls_token", vit->cls_token}});
    for (const auto& layer : vit->encoder->layers)
      check_members(*layer->self_attn, {{"in_proj_weight", layer->self_attn->in_proj_weight},
                                        {"in_proj_bias", layer->self_attn->in_proj_bias}});
  }
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::PositionalEmbedding> pos;
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::Linear> lin;
  std::shared_ptr<nn::VisionTransformer> vit;
};

double max_diff(const Tensor& a, const Tensor& b) { return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>(); }

}  // namespace

TEST_CASE("after to(kFloat64) and to(ChannelsLast) every module's members are its registered tensors and training moves what forward reads") {
  manual_seed(0);
  auto zoo = std::make_shared<Zoo>();
  auto stages = zoo->vit->stages();  // shares the ViT's tensors; made before to()
  std::vector<Tensor> before_to = zoo->parameters();
  optim::AdamW opt(zoo->parameters(), 1e-2);  // built before to()
  zoo->to(kFloat64);
  zoo->to(MemoryFormat::ChannelsLast);
  zoo->check_all_members();
  std::vector<Tensor> after_to = zoo->parameters();
  REQUIRE(after_to.size() == before_to.size());
  for (size_t i = 0; i < after_to.size(); ++i) {
    CHECK(after_to[i].is_same(before_to[i]));
    CHECK(after_to[i].dtype() == kFloat64);
    CHECK(opt.parameters()[i].is_same(after_to[i]));
  }
  CHECK(zoo->conv->weight.is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(zoo->vit->patch_embed->proj->weight.is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(zoo->bn->running_mean.dtype() == kFloat64);
  CHECK(zoo->bn->num_batches_tracked.dtype() == kInt64);

  Tensor images = randn({2, 2, 8, 8}, dtype(kFloat64)).contiguous(MemoryFormat::ChannelsLast);
  Tensor tokens = tensor({0, 1, 2, 4, 3, 0}, dtype(kInt64)).view({2, 3});
  // The ViT's stages, made before to(), compute with the converted tensors.
  zoo->eval();
  Tensor feats = ((*zoo->bn)((*zoo->conv)(images))).relu();
  CHECK(max_diff((*stages)(feats), zoo->vit->forward(feats)) < 1e-12);
  zoo->train();

  std::vector<Tensor> values;
  for (const Tensor& p : zoo->parameters()) values.push_back(p.detach().clone());
  Tensor out = zoo->forward2(images, tokens);
  CHECK(out.dtype() == kFloat64);
  out.sum().backward();
  opt.step();
  // Every parameter forward read got a float64 gradient and was moved by the optimizer.
  std::vector<Tensor> now = zoo->parameters();
  for (size_t i = 0; i < now.size(); ++i) {
    INFO(zoo->named_parameters().keys()[i]);
    REQUIRE(now[i].grad().defined());
    CHECK(now[i].grad().dtype() == kFloat64);
    CHECK(max_diff(now[i], values[i]) > 0);
  }
  // BatchNorm's statistics went into the registered buffers.
  CHECK(zoo->bn->num_batches_tracked.item<int64_t>() == 1);
  CHECK(zoo->named_buffers()["bn.running_mean"].is_same(zoo->bn->running_mean));
  CHECK(zoo->bn->running_mean.abs().max().item<double>() > 0);

  // The state dict holds the members; loading a float32 model's state keeps dtype, layout and identity.
  nn::StateDict sd = zoo->state_dict();
  CHECK(sd["vit.cls_token"].is_same(zoo->vit->cls_token));
  CHECK(sd["bn.running_var"].is_same(zoo->bn->running_var));
  Zoo fresh;
  zoo->load_state_dict(fresh.state_dict());
  zoo->check_all_members();
  CHECK(zoo->conv->weight.dtype() == kFloat64);
  CHECK(zoo->conv->weight.is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(max_diff(zoo->conv->weight, fresh.conv->weight) == 0);
  CHECK(max_diff(zoo->bn->running_mean, fresh.bn->running_mean) == 0);
  // ...and a float32 model loads the float64 one's state.
  fresh.load_state_dict(sd);
  CHECK(max_diff(fresh.vit->cls_token, zoo->vit->cls_token) == 0);
}
