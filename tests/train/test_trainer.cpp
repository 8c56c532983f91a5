#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "graft.h"
#include "train/trainer.h"

using namespace graft;
using train::Recipe;
using train::Trainer;
using train::TrainerState;

namespace {

// 64 images of 28x28 and their labels: the class is which of ten strips is brightest, so a few
// steps learn something. Fixed by seed 0.
struct TinySet {
  Tensor images, labels;
  TinySet() {
    manual_seed(0);
    labels = randint(0, 10, {64});
    images = rand({64, 1, 28, 28}) * 0.1;
    auto l = labels.to_vector<int64_t>();
    NoGradGuard ng;
    for (int64_t i = 0; i < 64; ++i) images.select(0, i).slice(1, l[i] * 2, l[i] * 2 + 2).fill_(1.0);
  }
};

Recipe tiny_recipe(int64_t epochs = 2) {
  Recipe r = Recipe::make({{"--epochs", std::to_string(epochs)}, {"--batch-size", "16"}, {"--lr", "0.01"}});
  return r;
}

std::shared_ptr<nn::Sequential> tiny_model() {
  manual_seed(1);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(784, 16));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(16, 10));
  return m;
}

std::vector<float> flat_parameters(nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    auto v = p.contiguous().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Records each hook with the state it saw.
struct Recorder : train::TrainerCallback {
  std::string tag;
  std::vector<std::string>* log;
  std::vector<std::string> problems;
  Recorder(std::string t, std::vector<std::string>* l) : tag(std::move(t)), log(l) {}
  void note(const std::string& what) { log->push_back(tag + what); }
  void on_train_begin(TrainerState& s) override {
    note("train_begin");
    if (!s.model || !s.forward || !s.optimizer || !s.loader || !s.world || s.global_step != 0) problems.push_back("begin");
  }
  void on_epoch_begin(TrainerState& s) override {
    note("epoch_begin " + std::to_string(s.epoch));
    if (s.step != 0 || s.steps_per_epoch != 4) problems.push_back("epoch_begin");
  }
  void on_step_begin(TrainerState& s) override {
    note("step_begin");
    if (s.loss.defined() || s.batch_samples != 16) problems.push_back("step_begin");
  }
  void on_before_backward(TrainerState& s) override {
    note("before_backward");
    if (!s.loss.defined() || !s.loss.grad_fn()) problems.push_back("before_backward");
  }
  void on_before_optimizer_step(TrainerState& s) override {
    note("before_optimizer_step");
    for (const Tensor& p : s.model->parameters())
      if (!p.grad().defined()) problems.push_back("no grad before the optimizer step");
  }
  void on_step_end(TrainerState& s) override {
    note("step_end " + std::to_string(s.epoch) + "/" + std::to_string(s.step) + "/" + std::to_string(s.global_step));
    if (!std::isfinite(s.step_loss) || s.epoch_samples != 16 * s.step || s.epoch_seconds <= 0)
      problems.push_back("step_end");
  }
  void on_epoch_steps_end(TrainerState&) override { note("epoch_steps_end"); }
  void on_epoch_end(TrainerState& s) override {
    note("epoch_end");
    if (s.train_samples != 64 || std::abs(s.train_loss - s.epoch_loss_sum / 64) > 1e-12) problems.push_back("epoch_end");
  }
  void on_train_end(TrainerState& s) override {
    note("train_end " + std::to_string(s.epochs_done));
    if (s.loss.defined()) problems.push_back("the last step's loss is still held");
  }
};

std::vector<std::string> expected_log(const std::string& tag, int epochs, int steps) {
  std::vector<std::string> e{tag + "train_begin"};
  int global = 0;
  for (int ep = 0; ep < epochs; ++ep) {
    e.push_back(tag + "epoch_begin " + std::to_string(ep));
    for (int st = 1; st <= steps; ++st) {
      e.push_back(tag + "step_begin");
      e.push_back(tag + "before_backward");
      e.push_back(tag + "before_optimizer_step");
      e.push_back(tag + "step_end " + std::to_string(ep) + "/" + std::to_string(st) + "/" + std::to_string(++global));
    }
    e.push_back(tag + "epoch_steps_end");
    e.push_back(tag + "epoch_end");
  }
  e.push_back(tag + "train_end " + std::to_string(epochs));
  return e;
}

}  // namespace

TEST_CASE("Trainer calls every hook in order, with the state each hook promises") {
  TinySet data;
  data::DataLoader loader(data.images, data.labels, 16, true, false, 0);
  Trainer trainer(tiny_model(), loader, tiny_recipe());
  std::vector<std::string> log;
  auto rec = std::make_shared<Recorder>("", &log);
  trainer.add_callback(rec);
  trainer.fit();
  CHECK(log == expected_log("", 2, 4));
  CHECK(rec->problems.empty());
  CHECK(trainer.state().global_step == 8);
  CHECK(trainer.state().epochs_done == 2);
  CHECK_THROWS_WITH(trainer.fit(), Catch::Contains("already run"));
}

TEST_CASE("Trainer runs each hook on the callbacks in the order they were added") {
  TinySet data;
  data::DataLoader loader(data.images, data.labels, 16);
  Trainer trainer(tiny_model(), loader, tiny_recipe(1));
  std::vector<std::string> log;
  trainer.add_callback(std::make_shared<Recorder>("a:", &log));
  trainer.add_callback(std::make_shared<Recorder>("b:", &log));
  trainer.fit();
  auto a = expected_log("a:", 1, 4), b = expected_log("b:", 1, 4);
  std::vector<std::string> both;
  for (size_t i = 0; i < a.size(); ++i) {
    both.push_back(a[i]);
    both.push_back(b[i]);
  }
  CHECK(log == both);
}

TEST_CASE("Trainer's step is the hand-written loop: the same parameters, bit for bit") {
  TinySet data;
  Recipe recipe = tiny_recipe();
  auto by_hand = tiny_model();
  {
    optim::Adam opt(by_hand->parameters(), recipe.lr);
    data::DataLoader loader(data.images, data.labels, 16, true, false, recipe.seed);
    optim::CosineAnnealingLR sched(opt, 2 * loader.num_batches());
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      loader.set_epoch(epoch);
      while (auto b = loader.next()) {
        Tensor loss = cross_entropy((*by_hand)((b->images - 0.2860) * (1.0 / 0.3530)), b->labels);
        opt.zero_grad();
        loss.backward();
        opt.step();
        sched.step();
      }
    }
  }
  auto model = tiny_model();
  data::DataLoader loader(data.images, data.labels, 16, true, false, recipe.seed);
  Trainer trainer(model, loader, recipe);
  trainer.fit();
  CHECK(flat_parameters(*model) == flat_parameters(*by_hand));
  CHECK(trainer.optimizer().lr() == Approx(0.0).margin(1e-12));  // the cosine schedule ran to its end
}

TEST_CASE("Trainer under --precision bf16/fp16 is the hand-written autocast (and GradScaler) loop") {
  using train::Precision;
  for (Precision precision : {Precision::Bf16, Precision::Fp16}) {
    INFO(train::name(precision));
    TinySet data;
    Recipe recipe = tiny_recipe(1);
    recipe.precision = precision;
    const DType low = train::autocast_dtype(precision);
    auto by_hand = tiny_model();
    {
      optim::Adam opt(by_hand->parameters(), recipe.lr);
      optim::GradScaler scaler;
      data::DataLoader loader(data.images, data.labels, 16, true, false, recipe.seed);
      optim::CosineAnnealingLR sched(opt, loader.num_batches());
      while (auto b = loader.next()) {
        Tensor loss;
        {
          autocast::AutocastGuard mixed(kCPU, low);
          loss = cross_entropy((*by_hand)((b->images - 0.2860) * (1.0 / 0.3530)), b->labels);
        }
        opt.zero_grad();
        if (precision == Precision::Fp16) {
          scaler.scale(loss).backward();
          scaler.step(opt);
          scaler.update();
        } else {
          loss.backward();
          opt.step();
        }
        sched.step();
      }
    }
    auto model = tiny_model();
    data::DataLoader loader(data.images, data.labels, 16, true, false, recipe.seed);
    Trainer trainer(model, loader, recipe);
    CHECK((trainer.state().scaler != nullptr) == (precision == Precision::Fp16));
    trainer.fit();
    for (const Tensor& p : model->parameters()) CHECK(p.dtype() == kFloat32);  // parameters stay float32
    CHECK(flat_parameters(*model) == flat_parameters(*by_hand));
    CHECK(recipe.describe().find(std::string("precision ") + std::string(name(precision))) != std::string::npos);
  }
}

TEST_CASE("Trainer: callbacks that only read, and checkpointing, leave every digit alone") {
  TinySet data;
  auto train_with = [&](Recipe recipe, bool with_callbacks) {
    auto model = tiny_model();
    data::DataLoader loader(data.images, data.labels, 16, true, false, 0);
    Trainer trainer(model, loader, recipe);
    std::FILE* sink = std::tmpfile();
    if (with_callbacks) {
      trainer.add_callback(std::make_shared<train::ProgressBar>(sink, true, 1));
      trainer.add_callback(std::make_shared<train::OpProfile>(sink));
      trainer.add_callback(std::make_shared<train::EvaluateEachEpoch>(data.images, data.labels, 10, 32));
      trainer.add_callback(std::make_shared<train::ConsoleLog>(sink));
    }
    trainer.fit();
    std::fclose(sink);
    return flat_parameters(*model);
  };
  const auto plain = train_with(tiny_recipe(), false);
  CHECK(train_with(tiny_recipe(), true) == plain);
  Recipe sqrt = tiny_recipe();
  sqrt.checkpoint = train::Checkpointing::Sqrt;
  CHECK(train_with(sqrt, false) == plain);
  Recipe nested = tiny_recipe();
  nested.checkpoint = train::Checkpointing::Nested;
  nested.save_on_cpu = true;
  CHECK(train_with(nested, false) == plain);
}

TEST_CASE("Trainer stops after the step in which a callback sets stop, and after max_steps") {
  TinySet data;
  struct StopAt : train::TrainerCallback {
    int64_t at;
    explicit StopAt(int64_t a) : at(a) {}
    void on_step_end(TrainerState& s) override { s.stop = s.global_step == at; }
  };
  data::DataLoader loader(data.images, data.labels, 16);
  Trainer trainer(tiny_model(), loader, tiny_recipe(3));
  std::vector<std::string> log;
  trainer.add_callback(std::make_shared<StopAt>(6));
  trainer.add_callback(std::make_shared<Recorder>("", &log));
  trainer.fit();
  CHECK(trainer.state().global_step == 6);
  CHECK(trainer.state().epochs_done == 2);  // the stopped epoch still ends
  CHECK(log.back() == "train_end 2");
  CHECK(std::count(log.begin(), log.end(), "epoch_end") == 2);

  data::DataLoader loader2(data.images, data.labels, 16);
  Trainer capped(tiny_model(), loader2, tiny_recipe(3), {.max_steps = 5});
  capped.fit();
  CHECK(capped.state().global_step == 5);
  CHECK(capped.state().epochs_done == 2);
  CHECK(capped.optimizer().lr() == Approx(0.0).margin(1e-12));  // the schedule spans the 5 steps run
}

TEST_CASE("Trainer takes the optimizer and scheduler it is given, else builds the recipe's") {
  TinySet data;
  auto model = tiny_model();
  data::DataLoader loader(data.images, data.labels, 16);
  auto sgd = std::make_unique<optim::SGD>(model->parameters(), 0.5);
  auto step = std::make_unique<optim::StepLR>(*sgd, 2, 0.5);
  optim::Optimizer* given = sgd.get();
  Trainer trainer(model, loader, tiny_recipe(1), {.optimizer = std::move(sgd), .scheduler = std::move(step)});
  CHECK(&trainer.optimizer() == given);
  trainer.fit();
  CHECK(trainer.optimizer().lr() == Approx(0.5 * 0.25));  // 4 steps of StepLR(2, 0.5)

  Recipe r = tiny_recipe(1);
  r.optimizer = train::OptimizerKind::AdamW;
  r.schedule = train::Schedule::None;
  data::DataLoader loader2(data.images, data.labels, 16);
  Trainer built(tiny_model(), loader2, r);
  auto* adamw = dynamic_cast<optim::AdamW*>(&built.optimizer());
  REQUIRE(adamw != nullptr);
  CHECK(adamw->weight_decay == 1e-2);  // unset: AdamW's own
  CHECK(built.scheduler() == nullptr);
}

TEST_CASE("Trainer reduces the epoch's loss through the World and gives every callback the evaluation") {
  TinySet data;
  data::DataLoader loader(data.images, data.labels, 16);
  // Rank 0 of 2, as if the other rank saw the same numbers: train sums double; evaluation takes
  // every other sample here, so its sums come to the whole set.
  train::World world{.rank = 0, .size = 2, .sum_in_place = [](std::vector<double>& v) {
                       for (double& x : v) x *= 2;
                     }};
  Trainer trainer(tiny_model(), loader, tiny_recipe(1), {.world = world});
  trainer.add_callback(std::make_shared<train::EvaluateEachEpoch>(data.images, data.labels, 10, 20));
  struct Check : train::TrainerCallback {
    bool saw = false;
    void on_epoch_end(TrainerState& s) override {
      saw = s.fresh_eval() != nullptr && s.train_samples == 128 && s.eval->samples == 64 &&
            s.eval->confusion.size() == 100 && std::abs(s.train_loss - s.epoch_loss_sum / 64) < 1e-12;
    }
  };
  auto check = std::make_shared<Check>();
  trainer.add_callback(check);
  trainer.fit();
  CHECK(check->saw);
}

TEST_CASE("Trainer's writers: the CSV rows, the epoch lines and the chart") {
  TinySet data;
  auto dir = std::filesystem::temp_directory_path() / ("graft_trainer_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  data::DataLoader loader(data.images, data.labels, 16);
  Trainer trainer(tiny_model(), loader, tiny_recipe(2));
  std::FILE* out = std::tmpfile();
  trainer.add_callback(std::make_shared<train::EvaluateEachEpoch>(data.images, data.labels));
  trainer.add_callback(std::make_shared<train::ConsoleLog>(out));
  trainer.add_callback(std::make_shared<train::MetricsCsv>((dir / "m.csv").string()));
  trainer.add_callback(std::make_shared<train::LossChart>((dir / "c.svg").string()));
  trainer.add_callback(std::make_shared<train::SaveWeights>((dir / "w.safetensors").string(), out));
  trainer.fit();
  std::rewind(out);
  std::string printed;
  for (int c; (c = std::fgetc(out)) != EOF;) printed += static_cast<char>(c);
  std::fclose(out);
  CHECK(printed.find("epoch 1: train loss ") != std::string::npos);
  CHECK(printed.find(", test accuracy ") != std::string::npos);
  CHECK(printed.find("peak memory while training: ") != std::string::npos);
  CHECK(printed.find("saved " + (dir / "w.safetensors").string()) != std::string::npos);
  std::ifstream csv(dir / "m.csv");
  std::vector<std::string> rows;
  for (std::string line; std::getline(csv, line);) rows.push_back(line);
  REQUIRE(rows.size() == 1 + 8 + 2);
  CHECK(rows[0] == "kind,epoch,step,loss,test_loss,test_accuracy,samples_per_s,seconds");
  CHECK(rows[4].rfind("step,1,4,", 0) == 0);
  CHECK(rows[5].rfind("epoch,1,4,", 0) == 0);
  CHECK(std::count(rows[5].begin(), rows[5].end(), ',') == 7);
  std::ifstream svg(dir / "c.svg");
  std::string chart((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(chart.rfind("<svg", 0) == 0);
  CHECK(chart.find(">epoch 2</text>") != std::string::npos);
  auto reloaded = tiny_model();
  nn::load(*reloaded, (dir / "w.safetensors").string());
  CHECK(flat_parameters(*reloaded) == flat_parameters(*trainer.state().model));
  std::filesystem::remove_all(dir);
}

TEST_CASE("Trainer refuses what it cannot run, naming it") {
  TinySet data;
  data::DataLoader loader(data.images, data.labels, 16);
  Recipe bad = tiny_recipe();
  bad.epochs = 0;
  CHECK_THROWS_WITH(Trainer(tiny_model(), loader, bad), "train: --epochs must be at least 1, got 0");
  Recipe ck = tiny_recipe();
  ck.checkpoint = train::Checkpointing::Sqrt;
  std::shared_ptr<nn::Module> no_stages = std::make_shared<nn::Linear>(784, 10);
  CHECK_THROWS_WITH(Trainer(no_stages, loader, ck), Catch::Contains("need a model with stages"));
  auto model = tiny_model();
  optim::SGD other(model->parameters(), 0.1);
  CHECK_THROWS_WITH(Trainer(model, loader, tiny_recipe(), {.scheduler = std::make_unique<optim::StepLR>(other, 1)}),
                    Catch::Contains("a scheduler was given without its optimizer"));
  Trainer t(tiny_model(), loader, tiny_recipe());
  CHECK_THROWS_WITH(t.add_callback(nullptr), Catch::Contains("null callback"));
}
