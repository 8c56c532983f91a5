// Run checkpoints: the file (crash-safe write, checksum, every kind of damage refused by name),
// the run directory (keep K, fall back past a damaged newest file), the run state (a resumed
// Trainer ends bit for bit where the uninterrupted one ends), the loader's seek, the recipe
// check on resume, and the stop signals.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "graft.h"
#include "support/error_message.h"
#include "support/fixtures.h"

using namespace graft;
using train::Recipe;
using train::Trainer;
using train::TrainerState;
using graft::test::error_message;
using graft::test::read_file;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/graft_run_ckpt_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::map<std::string, Tensor> some_tensors() {
  manual_seed(3);
  return {{"model/w", randn({4, 5})}, {"model/b", arange(7, TensorOptions{}.dtype(kInt64))},
          {"optimizer/state.0.exp_avg", rand({3}).to(kBFloat16)}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("a checkpoint file reads back bit for bit, and is a safetensors file", "[run_checkpoint]") {
  TempDir dir;
  const std::string path = dir / "checkpoint-00000001.safetensors";
  const auto tensors = some_tensors();
  const std::string state = R"({"progress":{"step":1},"note":"x"})";
  const uint64_t bytes = train::write_checkpoint_file(path, tensors, state);
  CHECK(bytes == fs::file_size(path));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const auto back = train::read_checkpoint_file(path);
  CHECK(back.state == state);
  REQUIRE(back.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) CHECK(same_bits(back.tensors.at(name), t));
  std::map<std::string, std::string> meta;
  CHECK(nn::load_safetensors(path, meta).size() == 3);  // any safetensors reader opens it
  CHECK(meta.at("graft.format") == train::kCheckpointFormat);
  CHECK(meta.at("graft.crc32").size() == 8);
}

TEST_CASE("every kind of damage to a checkpoint is refused, naming the file and the damage", "[run_checkpoint]") {
  TempDir dir;
  const std::string path = dir / "checkpoint-00000002.safetensors";
  train::write_checkpoint_file(path, some_tensors(), R"({"a":1})");
  const std::string good = read_file(path);
  auto damaged = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    return error_message([&] { train::read_checkpoint_file(path); });
  };

  // A flipped bit in the data section, in the last byte, in the state text, in a tensor's shape.
  std::string b = good;
  b[b.size() - 30] ^= 0x10;  // inside the data section
  std::string msg = damaged(b);
  CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("checksum mismatch"));
  b = good;
  b.back() ^= 0x01;
  CHECK_THAT(damaged(b), Catch::Contains("checksum mismatch"));
  b = good;
  b[b.find("\"a\\\":1") + 5] = '2';  // the state's {"a":1} as escaped inside the header: now {"a":2}
  CHECK_THAT(damaged(b), Catch::Contains("checksum mismatch"));
  b = good;
  b[b.find("[4,5]") + 1] = '5';  // shape [5,5]: the table no longer matches its data either
  CHECK_THAT(damaged(b), Catch::Contains(path));

  // Truncated: mid-data, mid-header, and shorter than the length prefix.
  CHECK_THAT(damaged(good.substr(0, good.size() - 9)), Catch::Contains("truncated") && Catch::Contains(path));
  CHECK_THAT(damaged(good.substr(0, 30)), Catch::Contains("truncated"));
  CHECK_THAT(damaged(good.substr(0, 5)), Catch::Contains("truncated"));
  CHECK_THAT(damaged(""), Catch::Contains("truncated"));

  // A checksum field that does not match (someone edited it) or is missing.
  b = good;
  const size_t at = b.find("graft.crc32\":\"") + 14;
  b[at] = b[at] == '0' ? '1' : '0';
  CHECK_THAT(damaged(b), Catch::Contains("checksum mismatch"));
  b = good;
  b.replace(b.find("graft.crc32"), 11, "graft.crc99");
  CHECK_THAT(damaged(b), Catch::Contains("no \"graft.crc32\""));

  // A plain safetensors file (weights, not a run checkpoint).
  nn::save_safetensors({{"w", ones({2})}}, path);
  CHECK_THAT(error_message([&] { train::read_checkpoint_file(path); }), Catch::Contains("not a graft run checkpoint"));

  // Undamaged again: reads.
  write_bytes(path, good);
  CHECK(train::read_checkpoint_file(path).state == R"({"a":1})");
}

TEST_CASE("a failed save names the directory and leaves neither a .tmp nor a damaged checkpoint",
          "[run_checkpoint]") {
  TempDir dir;
  const std::string path = dir / "checkpoint-00000003.safetensors";
  train::write_checkpoint_file(path, some_tensors(), R"({"v":"old"})");
  const std::string before = read_file(path);

  // A full disk: the file-size limit makes write() fail part-way (ENOSPC's effect, as root too).
  std::map<std::string, Tensor> big{{"x", zeros({1 << 16})}};
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  const std::string msg = error_message([&] { train::write_checkpoint_file(path, big, R"({"v":"new"})"); });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  CHECK_THAT(msg, Catch::Contains("cannot save in directory '" + dir.path.string() + "'"));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK(read_file(path) == before);

  // A directory that is gone.
  const std::string gone = dir / "gone/checkpoint-00000004.safetensors";
  CHECK_THAT(error_message([&] { train::write_checkpoint_file(gone, some_tensors(), "{}"); }),
             Catch::Contains("cannot save in directory '" + dir.path.string() + "/gone'"));
}

TEST_CASE("the test hook kills a save between its write and its rename", "[run_checkpoint]") {
  TempDir dir;
  const std::string path = dir / "checkpoint-00000005.safetensors";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("GRAFT_TEST_KILL_BEFORE_RENAME", "1", 1);
    try {
      train::write_checkpoint_file(path, some_tensors(), "{}");
    } catch (...) {
    }
    _exit(0);  // not reached when the hook fires
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK_FALSE(fs::exists(path));  // never under its final name
  CHECK(fs::exists(path + ".tmp"));
}

TEST_CASE("a run directory falls back past a damaged newest checkpoint, and says so", "[run_checkpoint]") {
  TempDir dir;
  const std::string older = train::checkpoint_path(dir.path.string(), 10);
  const std::string newer = train::checkpoint_path(dir.path.string(), 20);
  CHECK(older == dir / "checkpoint-00000010.safetensors");
  train::write_checkpoint_file(older, some_tensors(), R"({"recipe":[],"job":[],"world_size":1,"save_every":0,
    "progress":{"epoch":0,"step":10,"global_step":10,"steps_per_epoch":40,"epoch_over":false}})");
  train::write_checkpoint_file(newer, some_tensors(), R"({"recipe":[],"job":[],"world_size":1,"save_every":0,
    "progress":{"epoch":0,"step":20,"global_step":20,"steps_per_epoch":40,"epoch_over":false}})");
  CHECK(train::list_checkpoints(dir.path.string()) == std::vector<std::string>{newer, older});
  CHECK(train::load_latest_checkpoint(dir.path.string(), nullptr).path == newer);

  std::string b = read_file(newer);
  b[b.size() - 3] ^= 0x40;
  write_bytes(newer, b);
  char* text = nullptr;
  size_t len = 0;
  std::FILE* log = open_memstream(&text, &len);
  const auto loaded = train::load_latest_checkpoint(dir.path.string(), log);
  std::fclose(log);
  const std::string logged(text, len);
  free(text);
  CHECK(loaded.path == older);
  REQUIRE(loaded.rejected.size() == 1);
  CHECK_THAT(loaded.rejected[0], Catch::Contains(newer) && Catch::Contains("checksum mismatch"));
  CHECK_THAT(logged, Catch::Contains("falling back to the previous checkpoint, " + older));

  write_bytes(older, read_file(older).substr(0, 100));
  const std::string msg = error_message([&] { train::load_latest_checkpoint(dir.path.string(), nullptr); });
  CHECK_THAT(msg, Catch::Contains("no usable checkpoint") && Catch::Contains(newer) && Catch::Contains(older) &&
                      Catch::Contains("truncated"));
  fs::remove(older);
  fs::remove(newer);
  CHECK_THAT(error_message([&] { train::load_latest_checkpoint(dir.path.string(), nullptr); }),
             Catch::Contains("holds no checkpoint"));
}

TEST_CASE("DataLoader::seek enters an epoch mid-way with the batches the loader would have given", "[run_checkpoint]") {
  manual_seed(0);
  Tensor images = arange(50, TensorOptions{}.dtype(kFloat32)).reshape({50, 1}), labels = arange(50);
  data::DataLoader a(images, labels, 8, true, false, 7);
  a.set_epoch(2);
  std::vector<std::vector<int64_t>> seen;
  for (int i = 0; i < 7; ++i) seen.push_back(a.next()->labels.to_vector<int64_t>());
  data::DataLoader b(images, labels, 8, true, false, 7);
  b.seek(2, 24);
  CHECK(b.epoch() == 2);
  CHECK(b.position() == 24);
  for (int i = 3; i < 7; ++i) CHECK(b.next()->labels.to_vector<int64_t>() == seen[static_cast<size_t>(i)]);
  CHECK_FALSE(b.next().has_value());
  CHECK_THAT(error_message([&] { b.seek(3, 51); }), Catch::Contains("past the end of epoch 3"));
  CHECK(b.epoch() == 2);  // a refused seek leaves the loader where it was
  CHECK(b.position() == 50);
}

TEST_CASE("resume_recipe keeps the run's recipe, takes a new --epochs and lists every conflicting flag",
          "[run_checkpoint]") {
  train::RunStateSummary run;
  run.recipe = Recipe::make({{"--model", "vit"}, {"--epochs", "3"}, {"--lr", "0.0012345678901234"}}).to_flags();
  CHECK(Recipe::make(run.recipe).lr == 0.0012345678901234);  // to_flags is exact
  std::vector<std::string> changes;
  Recipe r = train::resume_recipe(run, {{"--epochs", "5"}, {"--model", "vit"}, {"--lr", "0.0012345678901234"}},
                                  &changes);
  CHECK(r.epochs == 5);
  CHECK(r.model == models::Kind::Vit);
  CHECK(r.warmup_epochs == 1);  // the run's, not recomputed
  REQUIRE(changes.size() == 1);
  CHECK_THAT(changes[0], Catch::Contains("--epochs 5 (the run was started with 3)"));
  const std::string msg = error_message([&] {
    train::resume_recipe(run, {{"--lr", "0.5"}, {"--model", "mlp"}, {"--seed", "0"}}, nullptr);
  });
  CHECK_THAT(msg, Catch::Contains("--lr 0.5 (the run has 0.0012345678901234") &&
                      Catch::Contains("--model mlp (the run has vit)") && !Catch::Contains("--seed"));
}

namespace {

struct TinySet {
  Tensor images, labels;
  TinySet() {
    manual_seed(0);
    labels = randint(0, 10, {72});
    images = rand({72, 1, 28, 28});
  }
};

std::shared_ptr<nn::Sequential> dropout_model() {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(784, 32));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Dropout>(0.3));
  m->push_back(std::make_shared<nn::Linear>(32, 10));
  return m;
}

// Stops the run after `at` steps as a signal would: the epoch does not end.
struct StopAt : train::TrainerCallback {
  int64_t at;
  explicit StopAt(int64_t a) : at(a) {}
  void on_step_end(TrainerState& s) override {
    if (s.global_step == at) s.stop = s.interrupted = true;
  }
};

// Every step's loss, and each epoch's train loss.
struct Losses : train::TrainerCallback {
  std::vector<double> steps, epochs;
  void on_step_end(TrainerState& s) override { steps.push_back(s.step_loss); }
  void on_epoch_end(TrainerState& s) override { epochs.push_back(s.train_loss); }
  std::string state_key() const override { return "losses"; }
  std::string save_state() override { return std::to_string(steps.size()); }
  void load_state(const std::string& t) override { steps.assign(std::stoul(t), 0.0); }
};

struct Run {
  std::vector<Tensor> params;
  std::vector<double> step_losses, epoch_losses;
  int64_t saves = 0;
};

// Trains 3 epochs of 5 steps (72 samples, batch 16: the last batch is 8) with dropout, Adam and a
// cosine schedule; with `stop_at` it stops there and a second trainer resumes from the directory.
Run train_tiny(const std::string& dir, int64_t stop_at, const std::string& precision) {
  TinySet set;
  const Recipe recipe = Recipe::make({{"--epochs", "3"}, {"--batch-size", "16"}, {"--lr", "0.01"},
                                      {"--precision", precision}, {"--seed", "5"}});
  Run out;
  auto build = [&](data::DataLoader& loader) {
    manual_seed(recipe.seed);
    return std::make_unique<Trainer>(models::Model(dropout_model()), loader, recipe);
  };
  auto add = [&](Trainer& t, Losses& losses, int64_t stop) {
    t.add_callback(std::shared_ptr<Losses>(&losses, [](Losses*) {}));
    if (stop > 0) t.add_callback(std::make_shared<StopAt>(stop));
    auto cp = std::make_shared<train::RunCheckpoint>(
        train::RunCheckpointOptions{.dir = dir, .save_every = 2, .watch_signals = false, .out = nullptr});
    t.add_callback(cp);
    return cp;
  };
  data::DataLoader loader(set.images, set.labels, 16, true, false, recipe.seed);
  Losses losses;
  auto first = build(loader);
  auto cp = add(*first, losses, stop_at);
  first->fit();
  out.saves = cp->saves();
  if (stop_at > 0) {
    manual_seed(12345);  // the resumed run must not depend on the global generator's state before it
    data::DataLoader loader2(set.images, set.labels, 16, true, false, recipe.seed);
    auto second = build(loader2);
    Losses resumed;
    add(*second, resumed, 0);
    second->resume(train::load_latest_checkpoint(dir, nullptr).state);
    CHECK(second->state().global_step == stop_at);
    second->fit();
    for (size_t i = losses.steps.size(); i < resumed.steps.size(); ++i) losses.steps.push_back(resumed.steps[i]);
    losses.epochs.insert(losses.epochs.end(), resumed.epochs.begin(), resumed.epochs.end());
    for (const Tensor& p : second->state().model->parameters()) out.params.push_back(p.clone());
  } else {
    for (const Tensor& p : first->state().model->parameters()) out.params.push_back(p.clone());
  }
  out.step_losses = losses.steps;
  out.epoch_losses = losses.epochs;
  return out;
}

}  // namespace

TEST_CASE("a trainer resumed from a run checkpoint ends bit for bit where the uninterrupted run ends",
          "[run_checkpoint]") {
  for (const std::string precision : {"fp32", "fp16"}) {
    TempDir full_dir;
    const Run full = train_tiny(full_dir.path.string(), 0, precision);
    CHECK(full.step_losses.size() == 15);
    CHECK(full.saves == 3 + 6);  // each epoch's end, and steps 2, 4, 6, 8, 12, 14 (10 ends an epoch)
    CHECK(train::list_checkpoints(full_dir.path.string()).size() == 2);  // keep = 2
    for (int64_t stop : {1, 4, 5, 7, 14}) {
      DYNAMIC_SECTION(precision << " stopped after step " << stop) {
        TempDir dir;
        const Run resumed = train_tiny(dir.path.string(), stop, precision);
        REQUIRE(resumed.params.size() == full.params.size());
        for (size_t i = 0; i < full.params.size(); ++i) CHECK(same_bits(resumed.params[i], full.params[i]));
        CHECK(resumed.epoch_losses == full.epoch_losses);  // exact: the epoch's running sum was saved
        for (size_t i = static_cast<size_t>(stop); i < full.step_losses.size(); ++i)
          CHECK(resumed.step_losses[i] == full.step_losses[i]);
      }
    }
  }
}

TEST_CASE("stop signals: the first is recorded, a second SIGINT exits at once with 130", "[run_checkpoint]") {
  auto child = [](const std::function<void()>& body) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      body();
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  };
  CHECK(child([] {
          train::StopSignals s;
          std::raise(SIGTERM);
          if (train::StopSignals::received() != SIGTERM) _exit(3);
          std::raise(SIGTERM);  // a second SIGTERM is only recorded
          if (train::StopSignals::received() != SIGTERM) _exit(4);
        }) == 0);
  CHECK(child([] {
          train::StopSignals s;
          std::raise(SIGINT);
          if (train::StopSignals::received() != SIGINT) _exit(3);
          std::raise(SIGINT);
          _exit(5);  // not reached
        }) == 130);
  CHECK(child([] {
          std::signal(SIGTERM, SIG_DFL);  // not the test runner's handler
          { train::StopSignals s; }
          std::raise(SIGTERM);  // the default handler was put back: SIGTERM kills again
          _exit(6);
        }) == 1000 + SIGTERM);
  CHECK(train::StopSignals::exit_status(SIGINT) == 130);
  CHECK(train::StopSignals::exit_status(SIGTERM) == 143);
}
