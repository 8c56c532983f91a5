#include "tools/train_job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <cstdlib>
#include <memory>
#include <thread>

#include "data/data_loader.h"
#include "graft.h"
#include "train/backward_graph.h"
#include "train/console_log.h"
#include "train/evaluate_each_epoch.h"
#include "train/loss_chart.h"
#include "train/memory_timeline.h"
#include "train/metrics_csv.h"
#include "train/op_profile.h"
#include "train/output_paths.h"
#include "train/progress_bar.h"
#include "train/run_checkpoint.h"
#include "train/run_state.h"
#include "train/iteration_log.h"
#include "train/validation_loss.h"
#include "data/char_corpus.h"
#include "models/gpt.h"
#include "train/save_weights.h"
#include "train/trainer.h"
#if GRAFT_HAVE_DIST
#include "dist/ddp_callback.h"
#include "dist/dist.h"
#include "dist/distributed_sampler.h"
#endif

namespace graft::tools {

namespace {

// Ranks other than 0 print nothing (their stdout goes nowhere) and write no files.
void quiet_other_ranks(TrainJob& job, const train::World& world) {
  if (world.rank == 0) return;
  if (std::freopen("/dev/null", "w", stdout) == nullptr) GRAFT_ERROR("train: cannot silence rank ", world.rank);
  job.save.clear();
  job.metrics.clear();
  job.plot.clear();
  job.graph.clear();
  job.memory_timeline.clear();
}

// This rank's share of the global batch; with mpirun --bind-to none each rank would start a thread
// per core, so the ranks of a node share the cores instead.
int64_t split_batch(const train::Recipe& r, const train::World& world) {
  if (world.size == 1) return r.batch_size;
  GRAFT_CHECK(r.batch_size % world.size == 0, "train: --batch-size ", r.batch_size,
              " is the global batch and must split evenly over ", world.size, " processes");
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int per_node = local ? std::max(1, std::atoi(local)) : world.size;
    set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / per_node));
  }
  return r.batch_size / world.size;
}

void place_device(TrainJob& job, const train::World& world) {
  GRAFT_CHECK(!job.recipe.device.is_cuda() || cuda_is_available(), "--device ", job.device_text,
              ": no CUDA device is available (graft was built without CUDA, or there is no GPU)");
#if GRAFT_HAVE_DIST
  // One GPU per rank: a bare "cuda" means this rank's local GPU (an explicit cuda:N is kept).
  if (world.size > 1 && job.recipe.device.is_cuda() && job.device_text == "cuda")
    job.recipe.device = Device(DeviceType::CUDA, dist::local_rank());
#endif
}

// The first n samples of a split (0: all of it).
Tensor first(const Tensor& t, int64_t n) { return n > 0 && n < t.size(0) ? t.slice(0, 0, n) : t; }

// Data-parallel: rank r takes samples r, r + size, ... of the epoch's shuffled order, the same
// order one process would use, so each step's ranks together see one process's batch.
data::DataLoader make_loader(const data::FashionMnist& set, const TrainJob& job, const train::World& world,
                             int64_t local_batch) {
  const train::Recipe& r = job.recipe;
  Tensor images = first(set.images(), job.train_samples), labels = first(set.labels(), job.train_samples);
#if GRAFT_HAVE_DIST
  if (world.size > 1)
    return data::DataLoader(images, labels, local_batch, dist::DistributedSampler(images.size(0), true, r.seed), false);
#endif
  return data::DataLoader(images, labels, r.batch_size, /*shuffle=*/true, /*drop_last=*/false, r.seed);
}

// The flags besides the recipe's that change a run's numbers: recorded in its checkpoints.
train::Recipe::Flags job_flags(const TrainJob& job) {
  train::Recipe::Flags f{{"--train-samples", std::to_string(job.train_samples)},
                         {"--test-samples", std::to_string(job.test_samples)}};
  // A language model's corpus: its vocabulary and windows are the run's (empty: the fortunes).
  if (job.recipe.model == models::Kind::Gpt) f.emplace_back("--data", job.data_given ? job.data : "");
  return f;
}

// --resume: the run's newest usable checkpoint, its recipe (the given flags checked against it) and
// its other flags; what changes is printed.
train::LoadedCheckpoint resume_run(TrainJob& job, const train::World& world) {
  train::LoadedCheckpoint loaded = train::load_latest_checkpoint(job.resume, world.rank == 0 ? stderr : nullptr);
  const train::RunStateSummary run = train::summarize_run_state(loaded.state.state);
  std::vector<std::string> changes;
  job.recipe = train::resume_recipe(run, job.given, &changes);
  std::string conflicts;
  for (const auto& [flag, saved] : run.job) {
    if (flag == "--data") {
      if (job.data_given && job.data != saved)
        conflicts += (conflicts.empty() ? "" : ", ") + flag + " " + job.data + " (the run has " +
                     (saved.empty() ? std::string("the fortunes") : saved) + ")";
      job.data_given = !saved.empty();
      if (job.data_given) job.data = saved;
      continue;
    }
    int64_t* mine = flag == "--train-samples" ? &job.train_samples : flag == "--test-samples" ? &job.test_samples : nullptr;
    if (mine == nullptr) continue;
    if (*mine != 0 && std::to_string(*mine) != saved)
      conflicts += (conflicts.empty() ? "" : ", ") + flag + " " + std::to_string(*mine) + " (the run has " + saved + ")";
    *mine = std::stoll(saved);
  }
  GRAFT_CHECK(conflicts.empty(), "--resume: these flags differ from the run's: ", conflicts, ". Drop them");
  job.device_text = job.recipe.device.str();
  if (job.save_every < 0) job.save_every = run.save_every;
  std::printf("graft train: resuming %s from %s (epoch %lld, step %lld of %lld, global step %lld)\n",
              job.resume.c_str(), loaded.path.c_str(), static_cast<long long>(run.epoch + 1),
              static_cast<long long>(run.step), static_cast<long long>(run.steps_per_epoch),
              static_cast<long long>(run.global_step));
  for (const std::string& c : changes) std::printf("graft train: resumed with %s\n", c.c_str());
  return loaded;
}

// --run-dir / --resume / --save-every make sense together only in these ways.
void check_run_flags(TrainJob& job) {
  GRAFT_CHECK(job.resume.empty() || job.run_dir.empty() ||
                  std::filesystem::path(job.resume) == std::filesystem::path(job.run_dir),
              "--resume ", job.resume, " and --run-dir ", job.run_dir,
              " name different directories; a resumed run keeps saving where it was (give only --resume)");
  GRAFT_CHECK(job.save_every < 0 || !job.run_dir.empty() || !job.resume.empty(),
              "--save-every needs --run-dir DIR (or --resume DIR): there is nowhere to save to");
  if (!job.resume.empty()) {
    job.run_dir = job.resume;
    return;
  }
  if (job.run_dir.empty()) return;
  if (!std::filesystem::exists(job.run_dir)) {
    std::error_code ec;
    std::filesystem::create_directory(job.run_dir, ec);
    GRAFT_CHECK(!ec || std::filesystem::is_directory(job.run_dir), "--run-dir ", job.run_dir,
                ": cannot create it: ", ec.message());
  }
  const auto existing = train::list_checkpoints(job.run_dir);
  GRAFT_CHECK(existing.empty(), "--run-dir ", job.run_dir, " already holds a run's checkpoints (", existing.front(),
              "); continue that run with --resume ", job.run_dir, ", or give an empty directory");
}

// In the order the hooks must run (trainer_callback.h): the timeline's steps before DDP wraps the
// forward; the profile stopped and the evaluation done before the lines, rows and chart that report it.
std::shared_ptr<train::RunCheckpoint> add_callbacks(train::Trainer& t, const TrainJob& job,
                                                    const data::FashionMnist& test, const train::World& world) {
  using namespace train;
  if (world.rank == 0) t.add_callback(std::make_shared<ProgressBar>());
  if (job.profile) t.add_callback(std::make_shared<OpProfile>());
  if (!job.memory_timeline.empty()) t.add_callback(std::make_shared<MemoryTimeline>(job.memory_timeline));
  t.add_callback(std::make_shared<EvaluateEachEpoch>(first(test.images(), job.test_samples),
                                                     first(test.labels(), job.test_samples),
                                                     data::FashionMnist::kNumClasses));
  t.add_callback(std::make_shared<ConsoleLog>());
  if (!job.graph.empty()) t.add_callback(std::make_shared<BackwardGraph>(job.graph));
  if (!job.metrics.empty()) t.add_callback(std::make_shared<MetricsCsv>(job.metrics));
#if GRAFT_HAVE_DIST
  t.add_callback(std::make_shared<dist::DDPCallback>(dist::DDPOptions{.poll_during_backward = job.ddp_poll}));
#endif
  if (!job.save.empty()) t.add_callback(std::make_shared<SaveWeights>(job.save));
  if (!job.plot.empty()) t.add_callback(std::make_shared<LossChart>(job.plot));
  if (job.run_dir.empty()) return nullptr;
  // Last, so a checkpoint holds what every other callback did up to it (run_checkpoint.h invariant 1).
  auto checkpoints = std::make_shared<RunCheckpoint>(RunCheckpointOptions{.dir = job.run_dir,
                                                                          .save_every = std::max<int64_t>(0, job.save_every),
                                                                          .job = job_flags(job),
                                                                          .write = world.rank == 0});
  t.add_callback(checkpoints);
  return checkpoints;
}

// graft train --model gpt: random windows of a text instead of Fashion-MNIST's epochs, the
// validation loss every --eval-every iterations, and the vocabulary saved with the weights.
int train_language_model(TrainJob& job, const train::World& world, int64_t local_batch,
                         const std::optional<train::LoadedCheckpoint>& resumed) {
  using namespace train;
  const Recipe& r = job.recipe;
  data::CharCorpus corpus = job.data_given ? data::load_text_file(job.data) : data::load_fortunes();
  const nn::GPTConfig config = models::gpt_config(corpus.vocab.size(), r.dropout);
  const int64_t T = config.block_size, V = config.vocab_size;
  // Rank r draws its windows from the seed's r-th stream: the ranks' windows together are one
  // iteration's batch, and a world of one draws what a single process does.
  const uint64_t stream = r.seed + static_cast<uint64_t>(world.rank) * 0x9E3779B97F4A7C15ULL;
  data::DataLoader loader = data::random_window_loader(corpus.train, T, local_batch, r.iters, stream, "training");
  const Device device = r.device;
  TrainerOptions options{.world = world};
  options.prepare_inputs = [device](const Tensor& ids) { return ids.to(device); };
  options.loss = [V](const Tensor& logits, const Tensor& targets) {
    return graft::cross_entropy(logits.reshape({-1, V}), targets.flatten());
  };
  Trainer t(models::make_model(models::Kind::Gpt, r.dropout, V), loader, r, std::move(options));
  if (world.rank == 0) {
    t.add_callback(std::make_shared<ValidationLoss>(
        corpus.val, ValidationLossOptions{.context = T, .every = r.eval_every, .seed = r.seed}));
    t.add_callback(std::make_shared<IterationLog>(T));
  }
  if (job.profile) t.add_callback(std::make_shared<OpProfile>());
  if (!job.metrics.empty()) t.add_callback(std::make_shared<MetricsCsv>(job.metrics));
#if GRAFT_HAVE_DIST
  t.add_callback(std::make_shared<dist::DDPCallback>(dist::DDPOptions{.poll_during_backward = job.ddp_poll}));
#endif
  if (!job.save.empty())
    t.add_callback(std::make_shared<SaveWeights>(job.save, stdout, models::gpt_metadata(config, corpus.vocab.to_text())));
  if (!job.plot.empty()) t.add_callback(std::make_shared<LossChart>(job.plot));
  std::shared_ptr<RunCheckpoint> checkpoints;
  if (!job.run_dir.empty()) {
    checkpoints = std::make_shared<RunCheckpoint>(RunCheckpointOptions{
        .dir = job.run_dir, .save_every = std::max<int64_t>(0, job.save_every), .job = job_flags(job),
        .write = world.rank == 0});
    t.add_callback(checkpoints);
  }
  if (world.size > 1)
    std::printf("graft train: data-parallel on %d processes (MPI), batch %lld per process\n", world.size,
                static_cast<long long>(local_batch));
  std::printf("graft train: corpus %s: %lld characters, vocabulary of %lld; %lld train, %lld validation\n",
              corpus.source.c_str(), static_cast<long long>(corpus.train.numel() + corpus.val.numel()),
              static_cast<long long>(V), static_cast<long long>(corpus.train.numel()),
              static_cast<long long>(corpus.val.numel()));
  std::printf("graft train: %s\n", t.recipe().describe().c_str());
  std::fflush(stdout);
  if (resumed) t.resume(resumed->state);
  t.fit();
  if (checkpoints && checkpoints->stop_signal() != 0) return StopSignals::exit_status(checkpoints->stop_signal());
  return 0;
}

int train_on(TrainJob job, const train::World& world) {
  quiet_other_ranks(job, world);
  // Before any data is read or step taken: a bad output path must not cost the run (rank 0 only;
  // the others write nothing).
  train::check_output_paths({{"--save", job.save},
                             {"--metrics", job.metrics},
                             {"--plot", job.plot},
                             {"--graph", job.graph},
                             {"--memory-timeline", job.memory_timeline}});
  if (!job.run_dir.empty()) train::check_output_path("--run-dir", job.run_dir, /*directory_ok=*/true);
  check_run_flags(job);
  std::optional<train::LoadedCheckpoint> resumed;
  if (!job.resume.empty()) resumed = resume_run(job, world);
  const int64_t local_batch = split_batch(job.recipe, world);
  manual_seed(job.recipe.seed);
  place_device(job, world);
  if (job.recipe.model == models::Kind::Gpt) {
    GRAFT_CHECK(job.graph.empty() && job.memory_timeline.empty() && job.train_samples == 0 && job.test_samples == 0,
                "graft train --model gpt: --graph, --memory-timeline, --train-samples and --test-samples are for the "
                "image models");
    return train_language_model(job, world, local_batch, resumed);
  }
  data::FashionMnist train_set(job.data, true), test_set(job.data, false);
  data::DataLoader loader = make_loader(train_set, job, world, local_batch);
  train::Trainer trainer(models::make_model(job.recipe.model, job.recipe.dropout), loader, job.recipe, {.world = world});
  auto checkpoints = add_callbacks(trainer, job, test_set, world);
  if (world.size > 1)
    std::printf("graft train: data-parallel on %d processes (MPI), batch %lld per process\n", world.size,
                static_cast<long long>(local_batch));
  std::printf("graft train: %s\n", trainer.recipe().describe().c_str());
  if (resumed) trainer.resume(resumed->state);
  trainer.fit();
  if (checkpoints && checkpoints->stop_signal() != 0) return train::StopSignals::exit_status(checkpoints->stop_signal());
  return 0;
}

}  // namespace

int run_train(const TrainJob& job) {
#if GRAFT_HAVE_DIST
  train::World world;
  if (dist::launched_by_mpi()) {
    dist::init();
    world = dist::training_world();
  }
  try {
    return train_on(job, world);
  } catch (const std::exception& e) {
    if (world.size == 1) throw;
    // A rank that stops must take the others with it: they would wait in the next all-reduce.
    std::fprintf(stderr, "graft: error on rank %d of %d: %s\n", world.rank, world.size, e.what());
    std::fflush(stderr);
    dist::abort(1);
  }
#else
  return train_on(job, train::World{});
#endif
}

}  // namespace graft::tools
