#include "data/char_corpus.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autograd/functional.h"
#include "ops/ops.h"
#include "runtime/error.h"

namespace graft::data {
namespace fs = std::filesystem;
namespace {

std::string read_file(const fs::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  GRAFT_CHECK(in.good(), what, ": cannot open '", path.string(), "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string describe_char(char32_t c) {
  char code[16];
  std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
  if (c == '\n') return std::string("'\\n' (") + code + ")";
  if (c < 32 || c == 127) return code;
  return "'" + utf8_encode(c) + "' (" + code + ")";
}

}  // namespace

std::vector<char32_t> utf8_decode(std::string_view s, std::string_view what) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    GRAFT_CHECK(len > 0 && i + static_cast<size_t>(len) <= s.size(), what, ": invalid UTF-8 at byte ", i);
    char32_t c = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto cb = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      GRAFT_CHECK((cb & 0xC0) == 0x80, what, ": invalid UTF-8 at byte ", i);
      c = (c << 6) | (cb & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not characters.
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    GRAFT_CHECK(c >= kMin[len] && c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF), what, ": invalid UTF-8 at byte ", i);
    out.push_back(c);
    i += static_cast<size_t>(len);
  }
  return out;
}

std::string utf8_encode(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// ---- vocabulary ------------------------------------------------------------------------------------

CharVocabulary::CharVocabulary(std::vector<char32_t> chars) : chars_(std::move(chars)) {
  std::sort(chars_.begin(), chars_.end());
  chars_.erase(std::unique(chars_.begin(), chars_.end()), chars_.end());
}

bool CharVocabulary::contains(char32_t c) const { return std::binary_search(chars_.begin(), chars_.end(), c); }

std::vector<int64_t> CharVocabulary::encode(std::string_view text, std::string_view what) const {
  const auto cps = utf8_decode(text, what);
  std::vector<int64_t> ids;
  ids.reserve(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    auto it = std::lower_bound(chars_.begin(), chars_.end(), cps[i]);
    GRAFT_CHECK(it != chars_.end() && *it == cps[i], what, ": character ", describe_char(cps[i]), " at position ", i,
                " is not in the model's vocabulary of ", size(), " characters");
    ids.push_back(it - chars_.begin());
  }
  return ids;
}

std::string CharVocabulary::decode(int64_t id) const {
  GRAFT_CHECK(id >= 0 && id < size(), "CharVocabulary::decode: id ", id, " is outside [0, ", size(), ")");
  return utf8_encode(chars_[static_cast<size_t>(id)]);
}

std::string CharVocabulary::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t id : ids) s += decode(id);
  return s;
}

std::string CharVocabulary::to_text() const {
  std::string s;
  for (char32_t c : chars_) s += utf8_encode(c);
  return s;
}

CharVocabulary CharVocabulary::from_text(std::string_view utf8) {
  auto cps = utf8_decode(utf8, "vocabulary");
  CharVocabulary v(cps);
  GRAFT_CHECK(v.size() == static_cast<int64_t>(cps.size()) && std::is_sorted(cps.begin(), cps.end()),
              "vocabulary: expected distinct characters in order, got ", cps.size(), " characters with ",
              v.size(), " distinct");
  return v;
}

// ---- corpora -------------------------------------------------------------------------------------

CharCorpus make_char_corpus(std::string_view text, std::string source) {
  auto cps = utf8_decode(text, source);
  GRAFT_CHECK(!cps.empty(), source, ": the text is empty");
  CharCorpus c;
  c.source = std::move(source);
  c.vocab = CharVocabulary(cps);
  const auto n = static_cast<int64_t>(cps.size());
  Tensor ids = ops::empty({n}, kInt64, kCPU);
  int64_t* p = ids.data_ptr<int64_t>();
  const auto& chars = c.vocab.chars();
  for (int64_t i = 0; i < n; ++i)
    p[i] = std::lower_bound(chars.begin(), chars.end(), cps[static_cast<size_t>(i)]) - chars.begin();
  const int64_t n_train = n * 9 / 10;  // invariant 3
  c.train = ids.slice(0, 0, n_train);
  c.val = ids.slice(0, n_train, n);
  return c;
}

CharCorpus load_fortunes(const std::string& dir) {
  GRAFT_CHECK(fs::is_directory(dir), "corpus: '", dir, "' is not there (apt-get install fortunes fortunes-min, or "
              "give --data FILE)");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().string() < b.filename().string();
  });
  GRAFT_CHECK(!files.empty(), "corpus: '", dir, "' holds no fortune files");
  std::string text;
  for (const auto& f : files)
    for (char ch : read_file(f, "corpus"))
      if (ch == '\n' || (ch >= 32 && ch <= 126)) text += ch;  // invariant 2
  return make_char_corpus(text, dir);
}

CharCorpus load_text_file(const std::string& path) {
  GRAFT_CHECK(fs::is_regular_file(path), "corpus: '", path, "' is not a readable file");
  return make_char_corpus(read_file(path, "corpus"), path);
}

// ---- windows -------------------------------------------------------------------------------------

Batch text_windows(const Tensor& ids, const Tensor& starts, int64_t T) {
  const int64_t b = starts.size(0), n = ids.size(0);
  Tensor x = ops::empty({b, T}, kInt64, kCPU), y = ops::empty({b, T}, kInt64, kCPU);
  Tensor src = ids.contiguous();
  const int64_t* in = src.data_ptr<int64_t>();
  const int64_t* s = starts.contiguous().data_ptr<int64_t>();
  int64_t *px = x.data_ptr<int64_t>(), *py = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    GRAFT_CHECK(s[i] >= 0 && s[i] + T < n, "text_windows: window ", s[i], " + ", T + 1, " passes the ", n, " ids");
    std::copy(in + s[i], in + s[i] + T, px + i * T);
    std::copy(in + s[i] + 1, in + s[i] + T + 1, py + i * T);
  }
  return {x, y};
}

DataLoader random_window_loader(const Tensor& ids, int64_t T, int64_t batch_size, int64_t iterations, uint64_t seed,
                                std::string_view split_name) {
  const int64_t n = ids.size(0);
  GRAFT_CHECK(n > T, "corpus: the ", split_name, " split has ", n, " characters, fewer than one window of ", T + 1,
              " (the context plus its next character); use a longer text or a shorter context");
  GRAFT_CHECK(iterations >= 1 && batch_size >= 1, "corpus: iterations and batch size must be positive");
  const int64_t count = iterations * batch_size;
  return DataLoader(
      n - T, [ids, T](const Tensor& starts) { return text_windows(ids, starts, T); }, batch_size,
      [n, T, count, seed](int64_t epoch) { return random_draws(n - T, count, seed, epoch); });
}

}  // namespace graft::data
