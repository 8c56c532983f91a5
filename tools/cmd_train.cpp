// `graft train`: its flags (the recipe's fields, then what to write) and the call that runs them.
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>

#include "tools/cli_validators.h"
#include "tools/commands.h"
#include "tools/dist_launch.h"
#include "tools/train_job.h"
#include "train/recipe.h"

namespace graft::tools {

namespace {

struct TrainFlags {
  std::map<std::string, std::string> values;  // a recipe field's text, by flag
  std::map<std::string, bool> switches;       // a recipe switch, by flag
  TrainJob job;
  int nproc = 1;
};

// Every recipe field is a flag; its help and its checks come from the Recipe.
void add_recipe_flags(CLI::App& cmd, TrainFlags& f) {
  for (const train::RecipeField& field : train::Recipe::fields()) {
    if (field.is_switch) {
      std::string names = field.flag + (field.negation.empty() ? "" : ",!" + field.negation);
      cmd.add_flag(names, f.switches[field.flag], field.help);
    } else {
      cmd.add_option(field.flag, f.values[field.flag], field.help)
          ->type_name(field.type_name)
          ->check(recipe_value(field.flag));
    }
  }
}

void add_output_flags(CLI::App& cmd, TrainFlags& f) {
  TrainJob& j = f.job;
  cmd.add_option("--memory-timeline", j.memory_timeline,
                 "Write an SVG of the memory allocated during one step: plain, the --checkpoint mode and the "
                 "--memory-budget plan on one chart");
  cmd.add_flag("--profile", j.profile,
               "Print a per-op table (calls, total ms, mean us, share of the time) of the training steps");
  cmd.add_option("--save", j.save, "Write the trained weights (safetensors)");
  cmd.add_option("--metrics", j.metrics, "Write per-step and per-epoch metrics as CSV");
  cmd.add_option("--plot", j.plot, "Write an SVG chart of loss and accuracy");
  cmd.add_option("--graph", j.graph, "Write the first step's backward graph as Graphviz DOT (dot -Tsvg to draw it)");
  cmd.add_flag("--ddp-poll,!--no-ddp-poll", j.ddp_poll,
               "Data-parallel: poll the in-flight all-reduces during backward (on by default; off measures the "
               "wait Open MPI's missing progress thread causes)");
  cmd.add_option("--nproc", f.nproc,
                 "Train data-parallel on N processes: runs this command under mpirun -np N (--batch-size stays "
                 "the global batch)")
      ->check(whole_number_at_least(1));
  cmd.add_option("--run-dir", j.run_dir,
                 "Keep the run resumable: write crash-safe checkpoints into this directory (created if missing; "
                 "its parent must exist) at each epoch's end, every --save-every steps, and on SIGINT/SIGTERM "
                 "(then exit 130/143). The last 2 are kept");
  cmd.add_option("--save-every", j.save_every, "With --run-dir or --resume: also checkpoint every N steps")
      ->check(whole_number_at_least(1));
  cmd.add_option("--resume", j.resume,
                 "Continue the run in this run directory from its newest usable checkpoint, with its recipe "
                 "(only --epochs may change; other recipe flags must match), saving there as it goes");
  cmd.add_option("--train-samples", j.train_samples, "Train on the first N training images only (default all)")
      ->check(whole_number_at_least(1));
  cmd.add_option("--test-samples", j.test_samples, "Evaluate on the first N test images only (default all)")
      ->check(whole_number_at_least(1));
  cmd.add_option("--data", j.data,
                 "Fashion-MNIST directory (IDX .gz files); for --model gpt a UTF-8 text file (default: the fortunes "
                 "in /usr/share/games/fortunes)")
      ->capture_default_str();
}

// The flags the command line gave, as Recipe::make takes them (a flag not given keeps its model's default).
train::Recipe::Flags given_recipe_flags(const CLI::App& cmd, const TrainFlags& f) {
  train::Recipe::Flags given;
  for (const train::RecipeField& field : train::Recipe::fields()) {
    if (cmd.count(field.flag) == 0) continue;
    given.emplace_back(field.flag, field.is_switch ? (f.switches.at(field.flag) ? "true" : "false")
                                                   : f.values.at(field.flag));
  }
  return given;
}

}  // namespace

Command add_train_command(CLI::App& app, int argc, char** argv) {
  auto* cmd = app.add_subcommand("train", "Train a model on Fashion-MNIST, or the character-level GPT on a text");
  auto flags = std::make_shared<TrainFlags>();
  add_recipe_flags(*cmd, *flags);
  add_output_flags(*cmd, *flags);
  return {cmd, [cmd, flags, argc, argv] {
            TrainJob job = flags->job;
            job.given = given_recipe_flags(*cmd, *flags);
            // A resumed run's recipe comes from its checkpoint (run_train); a new one from the flags.
            if (job.resume.empty()) job.recipe = train::Recipe::make(job.given);
            if (cmd->count("--device") > 0) job.device_text = flags->values.at("--device");
            job.data_given = cmd->count("--data") > 0;
            if (flags->nproc > 1 && !launched_by_mpirun()) return relaunch_under_mpirun(flags->nproc, argc, argv);
            return run_train(job);
          }};
}

}  // namespace graft::tools
