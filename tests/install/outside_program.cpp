// Built outside the project against the installed headers and graft.pc, as a user would:
//   g++ -std=c++20 outside_program.cpp $(pkg-config --cflags --libs graft)
#include <graft/graft.h>

#include <iostream>

int main() {
  using namespace graft;
  Tensor a = arange(6, dtype(kFloat32)).view({2, 3});
  Tensor b = ones({3, 2});
  Tensor c = a.matmul(b);  // rows sum: [3, 3], [12, 12]
  std::cout << c << '\n';
  auto v = c.to_vector<float>();
  bool ok = v == std::vector<float>{3, 3, 12, 12};
  std::cout << (ok ? "outside program: ok" : "outside program: WRONG RESULT") << '\n';
  return ok ? 0 : 1;
}
