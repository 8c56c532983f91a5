// Unpack prefetch (API.md "Memory budget", autograd/unpack_prefetch.h): the engine starts the
// unpack hooks of the next K nodes on a background thread. Gradients are bit-identical to prefetch
// off, each unpack corresponds to exactly one hook call, user hooks never leave the engine thread,
// errors arrive unchanged, and a backward waits for what it started.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "graft.h"
#include "support/temp_dir.h"

using namespace graft;
using namespace graft::autograd;

namespace {

using graft::test::TempDir;

// Sets the lookahead for one test and turns prefetch off again at the end.
struct Lookahead {
  explicit Lookahead(int k) { set_unpack_prefetch(k); }
  ~Lookahead() { set_unpack_prefetch(0); }
};

// A chain of 12 layers with a side branch, so the ready queue sometimes holds two nodes.
struct Chain {
  std::vector<Tensor> ws;
  Tensor side;
  Chain() {
    manual_seed(11);
    for (int i = 0; i < 12; ++i) ws.push_back((randn({24, 24}) * 0.3).requires_grad_());
    side = randn({24, 24}).requires_grad_();
  }
  Tensor loss(const Tensor& x) const {
    Tensor h = x;
    Tensor branch;
    for (size_t i = 0; i < ws.size(); ++i) {
      h = tanh(mm(h, ws[i]));
      if (i == 5) branch = sigmoid(mm(h, side));
    }
    return (h * 2.0).sum() + (branch * branch).sum();
  }
  std::vector<Tensor> params() const {
    std::vector<Tensor> p = ws;
    p.push_back(side);
    return p;
  }
  template <class Scope>
  std::vector<Tensor> grads(const Tensor& x, Scope&& make_scope) {
    Tensor l;
    {
      auto scope = make_scope();
      l = loss(x);
    }
    return grad({l}, params());
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<float>() == b.to_vector<float>();
}

void require_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(same_bits(a[i], b[i]));
}

// A prefetchable hook pair that counts its calls and the threads its unpacks ran on.
struct CountingHooks {
  std::atomic<int> packs{0}, unpacks{0};
  std::mutex mu;
  std::set<std::thread::id> unpack_threads;
  std::unique_ptr<SavedTensorsHooks> scope(bool prefetchable) {
    return std::make_unique<SavedTensorsHooks>(
        [this](const Tensor& t) -> Packed {
          ++packs;
          return t.clone();
        },
        [this](const Packed& p) -> Tensor {
          ++unpacks;
          std::lock_guard<std::mutex> lock(mu);
          unpack_threads.insert(std::this_thread::get_id());
          return std::any_cast<const Tensor&>(p);
        },
        /*check_unpacked_metadata=*/true, "counting", prefetchable);
  }
};

}  // namespace

TEST_CASE("prefetch: gradients are bit-identical to prefetch off for SaveOnDisk and SaveOnCpu, at every lookahead") {
  Chain net;
  manual_seed(3);
  Tensor x = randn({16, 24});
  std::vector<Tensor> plain = grad({net.loss(x)}, net.params());
  TempDir dir;
  for (int k : {0, 1, 2, 5, 64}) {
    Lookahead on(k);
    require_identical(plain, net.grads(x, [&] { return std::make_unique<SaveOnDisk>(dir.path(), 0); }));
    REQUIRE(dir.entries() == 0);
    require_identical(plain, net.grads(x, [&] { return std::make_unique<SaveOnCpu>(); }));
  }
}

TEST_CASE("prefetch: each unpack is exactly one hook call, and prefetchable hooks run ahead on another thread") {
  Chain net;
  Tensor x = randn({16, 24});
  std::vector<Tensor> plain = grad({net.loss(x)}, net.params());
  Lookahead on(2);
  CountingHooks hooks;
  require_identical(plain, net.grads(x, [&] { return hooks.scope(/*prefetchable=*/true); }));
  REQUIRE(hooks.packs > 20);
  REQUIRE(hooks.unpacks == hooks.packs.load());
  // The root's node saved nothing; every other node's tensors were prefetched.
  REQUIRE(hooks.unpack_threads.size() == 1);
  REQUIRE(*hooks.unpack_threads.begin() != std::this_thread::get_id());
}

TEST_CASE("prefetch: a user's hook that is not prefetchable never leaves the engine thread") {
  Chain net;
  Tensor x = randn({16, 24});
  Lookahead on(4);
  CountingHooks hooks;
  net.grads(x, [&] { return hooks.scope(/*prefetchable=*/false); });
  REQUIRE(hooks.unpacks == hooks.packs.load());
  REQUIRE(hooks.unpack_threads == std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST_CASE("prefetch: retain_graph unpacks once per backward; grad() on a part of the graph prefetches only what runs") {
  Chain net;
  Tensor x = randn({16, 24});
  Lookahead on(3);
  CountingHooks hooks;
  Tensor l;
  {
    auto s = hooks.scope(true);
    l = net.loss(x);
  }
  int saved = hooks.packs;
  std::vector<Tensor> g1 = grad({l}, net.params(), {}, /*retain_graph=*/true);
  REQUIRE(hooks.unpacks == saved);
  std::vector<Tensor> g2 = grad({l}, net.params(), {}, /*retain_graph=*/true);
  REQUIRE(hooks.unpacks == 2 * saved);
  require_identical(g1, g2);
  // Only the side branch's path: the layers after 5 and the branch run, the first layers do not.
  int before = hooks.unpacks;
  Tensor g_side = grad({l}, {net.side}, {}, /*retain_graph=*/true)[0];
  REQUIRE(same_bits(g_side, g1.back()));
  int partial = hooks.unpacks - before;
  REQUIRE(partial > 0);
  REQUIRE(partial < saved);
  {
    Lookahead off(0);
    int b = hooks.unpacks;
    grad({l}, {net.side}, {}, /*retain_graph=*/true);
    REQUIRE(hooks.unpacks - b == partial);  // the same unpacks as without prefetch
  }
}

TEST_CASE("prefetch: an unpack error reaches backward unchanged and leaves nothing behind") {
  Chain net;
  Tensor x = randn({16, 24});
  TempDir dir;
  Lookahead on(2);
  std::atomic<int> calls{0};
  Tensor l;
  {
    SavedTensorsHooks hooks([](const Tensor& t) -> Packed { return t; },
                            [&calls](const Packed& p) -> Tensor {
                              if (++calls == 4) throw Error("the fourth unpack failed");
                              return std::any_cast<const Tensor&>(p);
                            },
                            true, "failing", /*prefetchable=*/true);
    l = net.loss(x);
  }
  REQUIRE_THROWS_WITH(l.backward(), Catch::Contains("the fourth unpack failed"));
  // A disk-backed graph that dies with prefetches in flight removes its files.
  {
    Tensor l2;
    {
      SaveOnDisk disk(dir.path(), 0);
      l2 = net.loss(x);
    }
    Tensor g = grad({l2}, {net.ws[11]})[0];
    REQUIRE(g.defined());
  }
  REQUIRE(dir.entries() == 0);
}

TEST_CASE("prefetch: the lookahead is checked") {
  REQUIRE_THROWS_WITH(set_unpack_prefetch(-1), Catch::Contains("set_unpack_prefetch") && Catch::Contains("-1"));
  set_unpack_prefetch(3);
  REQUIRE(unpack_prefetch() == 3);
  set_unpack_prefetch(0);
  REQUIRE(unpack_prefetch() == 0);
}
