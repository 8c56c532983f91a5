// data::CharVocabulary, CharCorpus and the random-window loader a character-level GPT trains on.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "graft.h"
#include "support/temp_dir.h"

using namespace graft;
using Catch::Matchers::Contains;

TEST_CASE("CharVocabulary: sorted code points, UTF-8 both ways, unknown characters named", "[corpus]") {
  data::CharVocabulary v(data::utf8_decode("héllo wörld\n", "test"));
  CHECK(v.size() == 10);  // h é l o ' ' w ö r d \n
  CHECK(v.decode(v.encode("wörld")) == "wörld");
  CHECK(v.encode("\n")[0] == 0);  // the smallest code point first
  CHECK(data::CharVocabulary::from_text(v.to_text()).chars() == v.chars());
  CHECK_THROWS_WITH(v.encode("hollx", "--prompt"), Contains("--prompt") && Contains("'x' (U+0078)") &&
                                                       Contains("position 4") && Contains("vocabulary of 10"));
  CHECK_THROWS_WITH(v.encode("\t"), Contains("U+0009"));
  CHECK_THROWS_WITH(data::utf8_decode("ab\xC3", "f.txt"), Contains("f.txt") && Contains("invalid UTF-8 at byte 2"));
  CHECK_THROWS_WITH(data::utf8_decode("\xC0\x80", "f.txt"), Contains("invalid UTF-8"));  // overlong
  CHECK_THROWS_WITH(data::CharVocabulary::from_text("ba"), Contains("distinct characters in order"));
}

TEST_CASE("CharCorpus: split by position, windows shifted by one", "[corpus]") {
  std::string text;
  for (int i = 0; i < 100; ++i) text += static_cast<char>('a' + i % 26);
  data::CharCorpus c = data::make_char_corpus(text, "generated");
  CHECK(c.vocab.size() == 26);
  CHECK(c.train.numel() == 90);
  CHECK(c.val.numel() == 10);
  CHECK(c.val[0].item<int64_t>() == 90 % 26);
  data::Batch b = data::text_windows(c.train, graft::tensor(std::vector<int64_t>{0, 5}, {2}, TensorOptions{}.dtype(kInt64)), 4);
  CHECK(b.images.sizes() == Shape{2, 4});
  CHECK(b.images[1][0].item<int64_t>() == 5);
  CHECK(b.labels[1][3].item<int64_t>() == 9);
  CHECK_THROWS_WITH(data::make_char_corpus("", "empty.txt"), Contains("empty.txt") && Contains("empty"));
  CHECK_THROWS_WITH(data::random_window_loader(c.val, 64, 12, 10, 0, "validation"),
                    Contains("validation split has 10 characters") && Contains("65"));
}

TEST_CASE("random_window_loader: uniform draws, replayed by epoch and resumed by seek", "[corpus]") {
  std::string text(1000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 7);
  data::CharCorpus c = data::make_char_corpus(text, "generated");
  data::DataLoader a = data::random_window_loader(c.train, 8, 4, 50, 3, "training");
  CHECK(a.num_batches() == 50);
  std::set<int64_t> starts(a.order().begin(), a.order().end());
  CHECK(starts.size() > 150);  // 200 draws from 892 starts
  CHECK(*starts.rbegin() <= 900 - 9);
  a.next();
  a.next();
  auto third = a.next();
  data::DataLoader b = data::random_window_loader(c.train, 8, 4, 50, 3, "training");
  b.seek(0, 8);
  auto resumed = b.next();
  CHECK((third->images - resumed->images).abs().max().item<int64_t>() == 0);
  CHECK((third->labels - resumed->labels).abs().max().item<int64_t>() == 0);
  data::DataLoader other_seed = data::random_window_loader(c.train, 8, 4, 50, 4, "training");
  CHECK(other_seed.order() != a.order());
}

TEST_CASE("load_fortunes: Debian's fortunes, printable ASCII and newlines", "[corpus]") {
  if (!std::filesystem::is_directory(data::kFortunesDir)) {
    WARN("skipping: " << data::kFortunesDir << " is not installed (apt-get install fortunes fortunes-min)");
    return;
  }
  data::CharCorpus c = data::load_fortunes();
  const int64_t n = c.train.numel() + c.val.numel();
  CHECK(c.vocab.size() == 96);
  CHECK(n > 2'000'000);
  CHECK(c.train.numel() == n * 9 / 10);
  CHECK_THROWS_WITH(data::load_fortunes("/nonexistent/fortunes"), Contains("apt-get install fortunes"));
}

TEST_CASE("load_text_file: any UTF-8 text, whole", "[corpus]") {
  test::TempDir dir;
  const std::string path = dir.file("t.txt");
  std::ofstream(path) << "naïve café\tx\n";
  data::CharCorpus c = data::load_text_file(path);
  CHECK(c.vocab.contains(U'ï'));
  CHECK(c.vocab.contains(U'\t'));
  CHECK_THROWS_WITH(data::load_text_file(dir.file("missing.txt")), Contains("missing.txt"));
}
