#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "support/fixtures.h"
#include "support/process.h"
#include "support/temp_dir.h"

// Runs the real `graft train` and `graft eval` (path from GRAFT_EXE) on a tiny synthetic
// Fashion-MNIST-shaped data set written here, and checks what they print and write.
using namespace graft::test;

namespace {

// `[launcher] graft <args>`: its exit code and all it printed, stdout and stderr interleaved.
ProcessResult cli(const std::string& args, const std::string& launcher = "") {
  return run_process(launcher + graft_exe() + " " + args, {.merge_stderr = true});
}

// How often `what` occurs in `s`.
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (auto i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

// "epoch N: train loss L, test loss T, test accuracy A%" lines without the epoch time.
std::string epoch_lines(const std::string& s) {
  std::string r, line;
  std::istringstream in(s);
  while (std::getline(in, line))
    if (line.rfind("epoch ", 0) == 0 && line.find(": train loss") != std::string::npos)
      r += line.substr(0, line.rfind(", ")) + "\n";
  return r;
}

}  // namespace

TEST_CASE("graft train and graft eval run end to end on a tiny data set") {
  TempDir dir("train_smoke");
  const std::string d = dir.path();
  write_square_data_set(d, 640, 200);
  ProcessResult train = cli("train --data " + d + " --epochs 2 --batch-size 32 --lr 0.003 --metrics " + d +
                            "/m.csv --plot " + d + "/p.svg --save " + d + "/w.safetensors --graph " + d + "/g.dot");
  const std::string& out = train.out;
  INFO(out);
  CHECK(train.exit_code == 0);
  CHECK(out.find("epoch 1: train loss") != std::string::npos);
  CHECK(out.find("epoch 2: train loss") != std::string::npos);
  CHECK(out.find("test accuracy") != std::string::npos);
  CHECK(out.find("peak memory while training:") != std::string::npos);
  CHECK(out.find("above the data set and model") != std::string::npos);
  CHECK(std::filesystem::file_size(dir.file("w.safetensors")) > 784 * 256 * 4);
  const std::string csv = read_file(dir.file("m.csv"));
  CHECK(csv.substr(0, csv.find('\n')) == "kind,epoch,step,loss,test_loss,test_accuracy,samples_per_s,seconds");
  // The chart: one dashed boundary per epoch, a legend, round ticks (0 on both step and loss axes).
  const std::string chart = read_file(dir.file("p.svg"));
  CHECK(chart.rfind("<svg", 0) == 0);
  CHECK(count(chart, "class=\"epoch\"") == 2);
  CHECK(count(chart, ">epoch 2</text>") == 1);
  CHECK(count(chart, "class=\"legend\"") == 1);
  CHECK(count(chart, ">training loss (left)<") == 1);
  CHECK(count(chart, "text-anchor=\"end\">0</text>") == 1);     // the loss axis starts at a round 0
  CHECK(count(chart, "text-anchor=\"middle\">0</text>") == 1);  // so does the step axis
  CHECK(chart.find("100%</text>") != std::string::npos);
  CHECK(chart.find("</svg>") != std::string::npos);
  // --graph: the first step's backward graph, with the model's parameter names on its leaves.
  const std::string dot = read_file(dir.file("g.dot"));
  CHECK(dot.rfind("digraph graft_backward {", 0) == 0);
  CHECK(dot.find("1.weight [256, 784] float32") != std::string::npos);
  CHECK(dot.find("AccumulateGrad") != std::string::npos);
  CHECK(out.find("wrote the first step's backward graph") != std::string::npos);

  ProcessResult ev = cli("eval --data " + d + " --load " + d + "/w.safetensors");
  INFO(ev.out);
  CHECK(ev.exit_code == 0);
  CHECK(ev.out.find("confusion matrix") != std::string::npos);
  CHECK(ev.out.find("Ankle boot") != std::string::npos);
  CHECK(ev.out.find("T-shirt/top") != std::string::npos);  // not cut to ten characters

  // The same seed gives the same loss curve, also under --profile (a dispatch mode that only
  // times), which then prints the steps' per-op table.
  ProcessResult again = cli("train --data " + d + " --epochs 2 --batch-size 32 --lr 0.003 --profile");
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("ops of the training steps") != std::string::npos);
  CHECK(again.out.find("\nlinear ") != std::string::npos);
  CHECK(again.out.find("\n_fused_adam_ ") != std::string::npos);
  CHECK(again.out.find("(outside ops)") != std::string::npos);
  CHECK_FALSE(epoch_lines(out).empty());
  CHECK(epoch_lines(again.out) == epoch_lines(out));
}

TEST_CASE("graft train reports a missing data directory and bad flags") {
  ProcessResult r = cli("train --data /nonexistent/graft-data");
  CHECK(r.exit_code != 0);
  CHECK(r.out.find("apt-get install dataset-fashion-mnist") != std::string::npos);
  r = cli("train --model resnet");
  CHECK(r.exit_code == 2);
  r = cli("train --help");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--checkpoint") != std::string::npos);
  // Integer and real flags say what they want in words, not with a 309-digit bound.
  for (const char* bad : {"--epochs -1", "--epochs 0", "--batch-size 0", "--epochs 2.5", "--epochs x"}) {
    r = cli(std::string("train ") + bad);
    INFO(bad << ": " << r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("expected a whole number of at least 1") != std::string::npos);
    CHECK(r.out.size() < 200);
  }
  // An output the run could not write fails before the first step, naming the path.
  r = cli("train --save /nonexistent-graft-dir/w.safetensors");
  CHECK(r.exit_code != 0);
  CHECK(r.out.find("--save /nonexistent-graft-dir/w.safetensors: directory '/nonexistent-graft-dir' does not exist") !=
        std::string::npos);
  CHECK(r.out.find("epoch 1") == std::string::npos);
  r = cli("train --lr -0.1");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("expected a number above 0, got -0.1") != std::string::npos);
  r = cli("bench --repeat 0");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("expected a whole number of at least 1") != std::string::npos);
}

TEST_CASE("graft train --memory-budget trains with the plain run's numbers and draws the memory timeline") {
  TempDir dir("train_budget");
  const std::string d = dir.path(), common = "train --data " + d + " --epochs 1 --batch-size 32 --lr 0.003";
  write_square_data_set(d, 320, 100);
  ProcessResult plain = cli(common);
  REQUIRE(plain.exit_code == 0);
  ProcessResult budget = cli(common + " --memory-budget 4MiB --checkpoint none --memory-timeline " + d + "/mem.svg");
  INFO(budget.out);
  CHECK(budget.exit_code == 0);
  // The budget is the whole step's: the MLP's parameter gradients and Adam's state are most of it.
  CHECK(budget.out.find("memory budget plan: budget 4.00 MiB") != std::string::npos);
  CHECK(budget.out.find("the plans predicted at most") != std::string::npos);
  auto epoch_line = [](const std::string& s) {
    auto i = s.find("epoch 1: train loss");
    return i == std::string::npos ? std::string() : s.substr(i, s.find(", test accuracy", i) - i);
  };
  CHECK_FALSE(epoch_line(plain.out).empty());
  CHECK(epoch_line(budget.out) == epoch_line(plain.out));  // the same arithmetic, the same digits
  // The timeline: XML with one path per mode (plain, the budget plan), every element closed.
  const std::string svg = read_file(dir.file("mem.svg"));
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(count(svg, "<path ") == 2);
  CHECK(count(svg, "<svg") == 1);
  CHECK(count(svg, "</svg>") == 1);
  CHECK(count(svg, "<text") == count(svg, "</text>"));
  CHECK(svg.find("plain: peak") != std::string::npos);
  CHECK(svg.find("budget 4MiB: peak") != std::string::npos);
  // The budget the plan was made for, as a dashed line labelled with its size.
  CHECK(count(svg, "stroke-dasharray") == 1);
  CHECK(svg.find(">budget 4.0 MiB</text>") != std::string::npos);
  ProcessResult bad = cli(common + " --memory-budget lots");
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find("--memory-budget: cannot read 'lots' as a size") != std::string::npos);
}

TEST_CASE("graft train --model vit trains 2 epochs, per-block checkpointing gives the same digits, eval reloads it") {
  TempDir dir("train_vit");
  const std::string d = dir.path(), common = "train --model vit --data " + d + " --epochs 2 --batch-size 32";
  write_square_data_set(d, 256, 100);
  ProcessResult plain = cli(common + " --save " + d + "/vit.safetensors");
  INFO(plain.out);
  REQUIRE(plain.exit_code == 0);
  // The recipe fills what the command line leaves open.
  CHECK(plain.out.find("model vit, 2 epochs, batch 32, adamw lr 0.002, weight decay 0.05 (1 warmup epoch(s), then "
                       "cosine schedule)") != std::string::npos);
  CHECK(epoch_lines(plain.out).find("epoch 2: train loss") != std::string::npos);
  for (const char* mode : {" --checkpoint sqrt", " --checkpoint nested", " --memory-budget 5MiB"}) {
    ProcessResult ck = cli(common + mode);
    INFO(mode << "\n" << ck.out);
    CHECK(ck.exit_code == 0);
    CHECK(epoch_lines(ck.out) == epoch_lines(plain.out));  // per-block recomputation: the same arithmetic
    if (std::string(mode).find("budget") != std::string::npos) {
      // The whole run, planning included (no timeline here to plan outside the count): the peak
      // above the data set and model is within the budget.
      const auto at = ck.out.find(" MiB above the data set and model");
      REQUIRE(at != std::string::npos);
      const double mib = std::stod(ck.out.substr(ck.out.rfind(", ", at) + 2));
      CHECK(mib <= 5.0);
    }
  }
  ProcessResult ev = cli("eval --model vit --data " + d + " --load " + d + "/vit.safetensors");
  INFO(ev.out);
  CHECK(ev.exit_code == 0);
  // eval's test loss and accuracy are the last epoch's, to the printed digit
  auto field = [](const std::string& s, const std::string& key, char end) {
    auto i = s.rfind(key);
    return i == std::string::npos ? std::string() : s.substr(i + key.size(), s.find(end, i) - i - key.size());
  };
  CHECK_FALSE(field(ev.out, "test loss ", ',').empty());
  CHECK(field(ev.out, "test loss ", ',') == field(plain.out, "test loss ", ','));
  CHECK(field(ev.out, "test accuracy ", '%') == field(plain.out, "test accuracy ", '%'));
}

TEST_CASE("graft bench --memory-timeline names the workloads that have a timeline when none matches") {
  TempDir dir("bench_timeline");
  ProcessResult r = cli("bench --filter '^engine$' --repeat 1 --memory-timeline " + dir.file("none.svg"));
  CHECK(r.exit_code != 0);
  CHECK(r.out.find("no workload matched by --filter '^engine$' has a memory timeline") != std::string::npos);
  CHECK(r.out.find("deep_mlp_budget") != std::string::npos);
  CHECK(!std::filesystem::exists(dir.file("none.svg")));
}

// Data-parallel `graft train` (GRAFT_MPIRUN is set by meson when dist/ is built): two ranks on
// the global batch land on one process's numbers, print once, save once, and a rank that fails
// ends the job instead of leaving the other waiting.
TEST_CASE("mpirun -np 2 graft train matches one process; --nproc launches it; a failing rank ends the job") {
  const char* mpirun = std::getenv("GRAFT_MPIRUN");
  if (mpirun == nullptr) {
    WARN("graft was built without dist/ (no MPI): data-parallel training is not built, nothing to check");
    return;
  }
  TempDir dir("train_dist");
  const std::string d = dir.path(), common = "train --data " + d + " --epochs 2 --batch-size 32 --lr 0.003";
  write_square_data_set(d, 640, 200);
  const std::string launcher = std::string(mpirun) + " -np 2 --bind-to none --allow-run-as-root ";
  auto number = [](const std::string& s, const std::string& key) {
    auto i = s.rfind(key);
    return i == std::string::npos ? -1.0 : std::atof(s.c_str() + i + key.size());
  };
  ProcessResult one = cli(common);
  INFO(one.out);
  REQUIRE(one.exit_code == 0);
  ProcessResult two = cli(common + " --save " + d + "/w.safetensors --metrics " + d + "/m.csv", launcher);
  INFO(two.out);
  REQUIRE(two.exit_code == 0);
  CHECK(count(two.out, "graft train: model mlp") == 1);  // only rank 0 prints
  CHECK(two.out.find("data-parallel on 2 processes (MPI), batch 16 per process") != std::string::npos);
  CHECK(two.out.find("of it launched before backward ended") != std::string::npos);
  // The same global batches, averaged gradients: one process's loss and accuracy, up to rounding.
  CHECK(number(two.out, "epoch 2: train loss ") == Approx(number(one.out, "epoch 2: train loss ")).margin(5e-3));
  CHECK(number(two.out, "test loss ") == Approx(number(one.out, "test loss ")).margin(5e-3));
  CHECK(number(two.out, "test accuracy ") == Approx(number(one.out, "test accuracy ")).margin(1.0));
  CHECK(std::filesystem::exists(dir.file("w.safetensors")));
  CHECK(count(read_file(dir.file("m.csv")), "kind,epoch") == 1);  // one writer
  ProcessResult ev = cli("eval --data " + d + " --load " + d + "/w.safetensors");
  INFO(ev.out);
  CHECK(ev.exit_code == 0);
  CHECK(number(ev.out, "test accuracy ") == number(two.out, "test accuracy "));  // sharded evaluation sums to the whole
  // --nproc runs the same job through mpirun itself.
  ProcessResult launched = cli(common + " --nproc 2");
  INFO(launched.out);
  CHECK(launched.exit_code == 0);
  CHECK(number(launched.out, "test loss ") == number(two.out, "test loss "));
  // A bad global batch fails on every rank, and the job ends with an error instead of hanging.
  ProcessResult bad = cli("train --data " + d + " --epochs 1 --batch-size 33", launcher);
  INFO(bad.out);
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find("must split evenly over 2 processes") != std::string::npos);
}
