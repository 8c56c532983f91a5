#include <catch2/catch.hpp>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

// Runs the real `graft train` and `graft eval` (path from GRAFT_EXE) on a tiny synthetic
// Fashion-MNIST-shaped data set written here, and checks what they print and write.
namespace {

std::string run(const std::string& cmd, int& status) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  status = pclose(p);
  return out;
}

void put_be32(std::vector<unsigned char>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<unsigned char>(x >> s));
}

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

// Class c draws a bright 7x7 square at a position that depends on c: learnable in a few steps.
void write_split(const std::string& dir, const std::string& prefix, int n) {
  std::vector<unsigned char> img, lab;
  put_be32(img, 0x803);
  put_be32(img, static_cast<uint32_t>(n));
  put_be32(img, 28);
  put_be32(img, 28);
  put_be32(lab, 0x801);
  put_be32(lab, static_cast<uint32_t>(n));
  for (int i = 0; i < n; ++i) {
    int c = i % 10;
    lab.push_back(static_cast<unsigned char>(c));
    int r0 = (c / 4) * 7 + 3, c0 = (c % 4) * 7;
    for (int r = 0; r < 28; ++r)
      for (int q = 0; q < 28; ++q) img.push_back(r >= r0 && r < r0 + 7 && q >= c0 && q < c0 + 7 ? 255 : (i * 7 + r * q) % 20);
  }
  write_gz(dir + "/" + prefix + "-images-idx3-ubyte.gz", img);
  write_gz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", lab);
}

}  // namespace

TEST_CASE("graft train and graft eval run end to end on a tiny data set") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  auto dir = std::filesystem::temp_directory_path() / ("graft_train_smoke_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_split(dir.string(), "train", 640);
  write_split(dir.string(), "t10k", 200);
  std::string d = dir.string();
  int status = 0;
  std::string out = run(std::string(exe) + " train --data " + d + " --epochs 2 --batch-size 32 --lr 0.003 --metrics " + d +
                            "/m.csv --plot " + d + "/p.svg --save " + d + "/w.safetensors --graph " + d + "/g.dot",
                        status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("epoch 1: train loss") != std::string::npos);
  CHECK(out.find("epoch 2: train loss") != std::string::npos);
  CHECK(out.find("test accuracy") != std::string::npos);
  CHECK(out.find("peak memory while training:") != std::string::npos);
  CHECK(out.find("above the data set and model") != std::string::npos);
  CHECK(std::filesystem::file_size(dir / "w.safetensors") > 784 * 256 * 4);
  std::ifstream csv(dir / "m.csv");
  std::string header;
  std::getline(csv, header);
  CHECK(header == "kind,epoch,step,loss,test_loss,test_accuracy,samples_per_s,seconds");
  std::ifstream svg(dir / "p.svg");
  std::string first;
  std::getline(svg, first);
  CHECK(first.rfind("<svg", 0) == 0);
  // The chart: one dashed boundary per epoch, a legend, round ticks (0 on both step and loss axes).
  std::string chart = first + std::string((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  auto occurrences = [&](const std::string& needle) {
    int n = 0;
    for (size_t i = chart.find(needle); i != std::string::npos; i = chart.find(needle, i + 1)) ++n;
    return n;
  };
  CHECK(occurrences("class=\"epoch\"") == 2);
  CHECK(occurrences(">epoch 2</text>") == 1);
  CHECK(occurrences("class=\"legend\"") == 1);
  CHECK(occurrences(">training loss (left)<") == 1);
  CHECK(occurrences("text-anchor=\"end\">0</text>") == 1);     // the loss axis starts at a round 0
  CHECK(occurrences("text-anchor=\"middle\">0</text>") == 1);  // so does the step axis
  CHECK(chart.find("100%</text>") != std::string::npos);
  CHECK(chart.find("</svg>") != std::string::npos);
  // --graph: the first step's backward graph, with the model's parameter names on its leaves.
  std::ifstream dot_file(dir / "g.dot");
  std::string dot((std::istreambuf_iterator<char>(dot_file)), std::istreambuf_iterator<char>());
  CHECK(dot.rfind("digraph graft_backward {", 0) == 0);
  CHECK(dot.find("1.weight [256, 784] float32") != std::string::npos);
  CHECK(dot.find("AccumulateGrad") != std::string::npos);
  CHECK(out.find("wrote the first step's backward graph") != std::string::npos);

  std::string ev = run(std::string(exe) + " eval --data " + d + " --load " + d + "/w.safetensors", status);
  INFO(ev);
  CHECK(status == 0);
  CHECK(ev.find("confusion matrix") != std::string::npos);
  CHECK(ev.find("Ankle boot") != std::string::npos);
  CHECK(ev.find("T-shirt/top") != std::string::npos);  // not cut to ten characters

  // The same seed gives the same loss curve, also under --profile (a dispatch mode that only
  // times), which then prints the steps' per-op table.
  std::string again =
      run(std::string(exe) + " train --data " + d + " --epochs 2 --batch-size 32 --lr 0.003 --profile", status);
  CHECK(status == 0);
  CHECK(again.find("ops of the training steps") != std::string::npos);
  CHECK(again.find("\nlinear ") != std::string::npos);
  CHECK(again.find("\n_fused_adam_ ") != std::string::npos);
  CHECK(again.find("(outside ops)") != std::string::npos);
  // "epoch N: train loss L, test loss T, test accuracy A%" without the epoch time.
  auto epoch_lines = [](const std::string& s) {
    std::string r, line;
    std::istringstream in(s);
    while (std::getline(in, line))
      if (line.rfind("epoch ", 0) == 0 && line.find(": train loss") != std::string::npos)
        r += line.substr(0, line.rfind(", ")) + "\n";
    return r;
  };
  CHECK_FALSE(epoch_lines(out).empty());
  CHECK(epoch_lines(again) == epoch_lines(out));
  std::filesystem::remove_all(dir);
}

TEST_CASE("graft train reports a missing data directory and bad flags") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  int status = 0;
  std::string out = run(std::string(exe) + " train --data /nonexistent/graft-data", status);
  CHECK(status != 0);
  CHECK(out.find("apt-get install dataset-fashion-mnist") != std::string::npos);
  out = run(std::string(exe) + " train --model resnet", status);
  CHECK(WEXITSTATUS(status) == 2);
  out = run(std::string(exe) + " train --help", status);
  CHECK(status == 0);
  CHECK(out.find("--checkpoint") != std::string::npos);
  // Integer and real flags say what they want in words, not with a 309-digit bound.
  for (const char* bad : {"--epochs -1", "--epochs 0", "--batch-size 0", "--epochs 2.5", "--epochs x"}) {
    out = run(std::string(exe) + " train " + bad, status);
    INFO(bad << ": " << out);
    CHECK(WEXITSTATUS(status) == 2);
    CHECK(out.find("expected a whole number of at least 1") != std::string::npos);
    CHECK(out.size() < 200);
  }
  out = run(std::string(exe) + " train --lr -0.1", status);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out.find("expected a number above 0, got -0.1") != std::string::npos);
  out = run(std::string(exe) + " bench --repeat 0", status);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out.find("expected a whole number of at least 1") != std::string::npos);
}

TEST_CASE("graft train --memory-budget trains with the plain run's numbers and draws the memory timeline") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  auto dir = std::filesystem::temp_directory_path() / ("graft_train_budget_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_split(dir.string(), "train", 320);
  write_split(dir.string(), "t10k", 100);
  std::string d = dir.string(), common = " train --data " + d + " --epochs 1 --batch-size 32 --lr 0.003";
  int status = 0;
  std::string plain = run(std::string(exe) + common, status);
  REQUIRE(status == 0);
  std::string budget = run(std::string(exe) + common + " --memory-budget 1MiB --checkpoint none --memory-timeline " + d +
                               "/mem.svg",
                           status);
  INFO(budget);
  CHECK(status == 0);
  CHECK(budget.find("memory budget plan: budget 1.00 MiB") != std::string::npos);
  CHECK(budget.find("the plans predicted at most") != std::string::npos);
  auto epoch_line = [](const std::string& s) {
    auto i = s.find("epoch 1: train loss");
    return i == std::string::npos ? std::string() : s.substr(i, s.find(", test accuracy", i) - i);
  };
  CHECK_FALSE(epoch_line(plain).empty());
  CHECK(epoch_line(budget) == epoch_line(plain));  // the same arithmetic, the same digits
  // The timeline: XML with one path per mode (plain, the budget plan), every element closed.
  std::ifstream f(dir / "mem.svg");
  std::string svg((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(svg.rfind("<?xml", 0) == 0);
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t i = svg.find(needle); i != std::string::npos; i = svg.find(needle, i + 1)) ++n;
    return n;
  };
  CHECK(count("<path ") == 2);
  CHECK(count("<svg") == 1);
  CHECK(count("</svg>") == 1);
  CHECK(count("<text") == count("</text>"));
  CHECK(svg.find("plain: peak") != std::string::npos);
  CHECK(svg.find("budget 1MiB: peak") != std::string::npos);
  std::string bad = run(std::string(exe) + common + " --memory-budget lots", status);
  CHECK(status != 0);
  CHECK(bad.find("--memory-budget: cannot read 'lots' as a size") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("graft train --model vit trains 2 epochs, per-block checkpointing gives the same digits, eval reloads it") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  auto dir = std::filesystem::temp_directory_path() / ("graft_train_vit_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_split(dir.string(), "train", 256);
  write_split(dir.string(), "t10k", 100);
  std::string d = dir.string(), common = " train --model vit --data " + d + " --epochs 2 --batch-size 32";
  auto epoch_lines = [](const std::string& s) {
    std::string r, line;
    std::istringstream in(s);
    while (std::getline(in, line))
      if (line.rfind("epoch ", 0) == 0 && line.find(": train loss") != std::string::npos)
        r += line.substr(0, line.rfind(", ")) + "\n";
    return r;
  };
  int status = 0;
  std::string plain = run(std::string(exe) + common + " --save " + d + "/vit.safetensors", status);
  INFO(plain);
  REQUIRE(status == 0);
  // The recipe fills what the command line leaves open.
  CHECK(plain.find("model vit, 2 epochs, batch 32, adamw lr 0.002, weight decay 0.05 (1 warmup epoch(s), then cosine "
                   "schedule)") != std::string::npos);
  CHECK(epoch_lines(plain).find("epoch 2: train loss") != std::string::npos);
  for (const char* mode : {" --checkpoint sqrt", " --checkpoint nested", " --memory-budget 4MiB"}) {
    std::string ck = run(std::string(exe) + common + mode, status);
    INFO(mode << "\n" << ck);
    CHECK(status == 0);
    CHECK(epoch_lines(ck) == epoch_lines(plain));  // per-block recomputation: the same arithmetic
  }
  std::string ev = run(std::string(exe) + " eval --model vit --data " + d + " --load " + d + "/vit.safetensors", status);
  INFO(ev);
  CHECK(status == 0);
  // eval's test loss and accuracy are the last epoch's, to the printed digit
  auto field = [](const std::string& s, const std::string& key, char end) {
    auto i = s.rfind(key);
    return i == std::string::npos ? std::string() : s.substr(i + key.size(), s.find(end, i) - i - key.size());
  };
  CHECK_FALSE(field(ev, "test loss ", ',').empty());
  CHECK(field(ev, "test loss ", ',') == field(plain, "test loss ", ','));
  CHECK(field(ev, "test accuracy ", '%') == field(plain, "test accuracy ", '%'));
  std::filesystem::remove_all(dir);
}

TEST_CASE("graft bench --memory-timeline names the workloads that have a timeline when none matches") {
  const char* exe = std::getenv("GRAFT_EXE");
  REQUIRE(exe != nullptr);
  int status = 0;
  std::string out = run(std::string(exe) + " bench --filter '^engine$' --repeat 1 --memory-timeline /tmp/graft-none.svg", status);
  CHECK(status != 0);
  CHECK(out.find("no workload matched by --filter '^engine$' has a memory timeline") != std::string::npos);
  CHECK(out.find("deep_mlp_budget") != std::string::npos);
  CHECK(!std::filesystem::exists("/tmp/graft-none.svg"));
}

// Data-parallel `graft train` (GRAFT_MPIRUN is set by meson when dist/ is built): two ranks on
// the global batch land on one process's numbers, print once, save once, and a rank that fails
// ends the job instead of leaving the other waiting.
TEST_CASE("mpirun -np 2 graft train matches one process; --nproc launches it; a failing rank ends the job") {
  const char* exe = std::getenv("GRAFT_EXE");
  const char* mpirun = std::getenv("GRAFT_MPIRUN");
  REQUIRE(exe != nullptr);
  if (mpirun == nullptr) {
    WARN("graft was built without dist/ (no MPI): data-parallel training is not built, nothing to check");
    return;
  }
  auto dir = std::filesystem::temp_directory_path() / ("graft_train_dist_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_split(dir.string(), "train", 640);
  write_split(dir.string(), "t10k", 200);
  std::string d = dir.string(), common = " train --data " + d + " --epochs 2 --batch-size 32 --lr 0.003";
  std::string launcher = std::string(mpirun) + " -np 2 --bind-to none --allow-run-as-root ";
  auto number = [](const std::string& s, const std::string& key) {
    auto i = s.rfind(key);
    return i == std::string::npos ? -1.0 : std::atof(s.c_str() + i + key.size());
  };
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (auto i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
    return n;
  };
  int status = 0;
  std::string one = run(std::string(exe) + common, status);
  INFO(one);
  REQUIRE(status == 0);
  std::string two = run(launcher + exe + common + " --save " + d + "/w.safetensors --metrics " + d + "/m.csv", status);
  INFO(two);
  REQUIRE(status == 0);
  CHECK(count(two, "graft train: model mlp") == 1);  // only rank 0 prints
  CHECK(two.find("data-parallel on 2 processes (MPI), batch 16 per process") != std::string::npos);
  CHECK(two.find("of it launched before backward ended") != std::string::npos);
  // The same global batches, averaged gradients: one process's loss and accuracy, up to rounding.
  CHECK(number(two, "epoch 2: train loss ") == Approx(number(one, "epoch 2: train loss ")).margin(5e-3));
  CHECK(number(two, "test loss ") == Approx(number(one, "test loss ")).margin(5e-3));
  CHECK(number(two, "test accuracy ") == Approx(number(one, "test accuracy ")).margin(1.0));
  CHECK(std::filesystem::exists(dir / "w.safetensors"));
  std::ifstream csv(dir / "m.csv");
  std::string all((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  CHECK(count(all, "kind,epoch") == 1);  // one writer
  std::string ev = run(std::string(exe) + " eval --data " + d + " --load " + d + "/w.safetensors", status);
  INFO(ev);
  CHECK(status == 0);
  CHECK(number(ev, "test accuracy ") == number(two, "test accuracy "));  // sharded evaluation sums to the whole
  // --nproc runs the same job through mpirun itself.
  std::string launched = run(std::string(exe) + common + " --nproc 2", status);
  INFO(launched);
  CHECK(status == 0);
  CHECK(number(launched, "test loss ") == number(two, "test loss "));
  // A bad global batch fails on every rank, and the job ends with an error instead of hanging.
  std::string bad = run(launcher + exe + " train --data " + d + " --epochs 1 --batch-size 33", status);
  INFO(bad);
  CHECK(status != 0);
  CHECK(bad.find("must split evenly over 2 processes") != std::string::npos);
  std::filesystem::remove_all(dir);
}
