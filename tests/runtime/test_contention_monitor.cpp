#include <catch2/catch.hpp>

#include "graft.h"

using namespace graft;

// Whether the monitor reduces threads depends on other processes and on timing, which tests never
// check (graft bench --contended measures it). These pin its switches and its bounds.

TEST_CASE("the contention policy is Adapt by default and can be fixed and restored") {
  ContentionPolicy before = contention_policy();
  set_contention_policy(ContentionPolicy::Fixed);
  CHECK(contention_policy() == ContentionPolicy::Fixed);
  CHECK_FALSE(contention_state().single_threaded);
  CHECK(get_num_threads() >= 1);
  set_contention_policy(ContentionPolicy::Adapt);
  CHECK(contention_policy() == ContentionPolicy::Adapt);
  set_contention_policy(before);
}

TEST_CASE("the op thread count never exceeds set_num_threads and ops stay correct while monitored") {
  int before = get_num_threads();
  set_num_threads(1);
  CHECK(get_num_threads() == 1);
  set_contention_policy(ContentionPolicy::Adapt);
  // Enough dispatched ops to run the monitor's checks many times.
  Tensor a = ones({70000}), s;
  for (int i = 0; i < 2000; ++i) s = (a + a).sum();
  CHECK(s.item<float>() == 140000.0f);
  CHECK(get_num_threads() == 1);
  auto st = contention_state();
  CHECK(st.wait_fraction >= 0);
  CHECK(st.wait_fraction <= 1.5);  // a window's wait over its wall time (scheduler rounding aside)
  set_num_threads(before);
  CHECK(get_num_threads() <= before);
}
