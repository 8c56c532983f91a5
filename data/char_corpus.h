#pragma once
// data::CharVocabulary and data::CharCorpus: the text a character-level language model reads.
//
// Invariants:
// 1. A vocabulary is a sorted list of distinct Unicode code points; a character's id is its rank.
//    It travels with the model (to_text / from_text: the characters themselves, UTF-8), so a saved
//    model decodes and encodes without its corpus.
// 2. The default corpus is Debian's fortunes: every regular file of the directory whose name does
//    not end in ".dat" (the .u8 names are symlinks to the same files), in byte order of the names,
//    concatenated, keeping printable ASCII (32..126) and '\n' only. Any other text (load_text_file)
//    is taken whole: its vocabulary is its code points, so invalid UTF-8 is an error naming the
//    byte offset.
// 3. The split is by position: the first floor(0.9 N) ids train, the rest validate.
// 4. Sample i of a split is the window starting at i: x = ids[i, i + T), y = ids[i + 1, i + T + 1),
//    so a split of n ids has n - T samples (text_windows).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_loader.h"
#include "runtime/tensor.h"

namespace graft::data {

class CharVocabulary {
 public:
  CharVocabulary() = default;
  // The distinct code points of `chars` (any order, repeats allowed).
  explicit CharVocabulary(std::vector<char32_t> chars);
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  const std::vector<char32_t>& chars() const { return chars_; }
  // The id of every character of UTF-8 `text`; a character outside the vocabulary is an error
  // that names it (and `what`, e.g. "the prompt") and its position.
  std::vector<int64_t> encode(std::string_view text, std::string_view what = "the text") const;
  // UTF-8 of one id / of ids.
  std::string decode(int64_t id) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  // Invariant 1: the characters as one UTF-8 string, and back.
  std::string to_text() const;
  static CharVocabulary from_text(std::string_view utf8);
  bool contains(char32_t c) const;

 private:
  std::vector<char32_t> chars_;  // sorted, distinct
};

struct CharCorpus {
  std::string source;  // where it came from, for messages
  CharVocabulary vocab;
  Tensor train, val;   // [n] int64 ids (invariant 3)
};

// Invariant 2's corpus.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
CharCorpus load_fortunes(const std::string& dir = kFortunesDir);
// A UTF-8 text file, whole.
CharCorpus load_text_file(const std::string& path);
// The corpus of `text` (UTF-8) with its own vocabulary; `source` names it in messages.
CharCorpus make_char_corpus(std::string_view text, std::string source);

// Decodes UTF-8 into code points; invalid UTF-8 is an error naming `what` and the byte offset.
std::vector<char32_t> utf8_decode(std::string_view text, std::string_view what);
std::string utf8_encode(char32_t c);

// Invariant 4: x [b, T] and y [b, T] (int64) of the windows starting at `starts` ([b] int64).
Batch text_windows(const Tensor& ids, const Tensor& starts, int64_t context);
// A loader of `iterations` batches of `batch_size` windows of `context` ids drawn uniformly with
// replacement from `ids` (random_draws of epoch e, so epoch e replays and seek() resumes), as
// nanoGPT's get_batch; an error when the split is too short for one window.
DataLoader random_window_loader(const Tensor& ids, int64_t context, int64_t batch_size, int64_t iterations,
                                uint64_t seed, std::string_view split_name);

}  // namespace graft::data
