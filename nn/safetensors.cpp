#include "nn/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/functional.h"
#include "runtime/error.h"

namespace graft::nn {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using nlohmann::json;

const char* dtype_code(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
    case DType::BFloat16: return "BF16";
    case DType::Float16: return "F16";
    case DType::UInt8: return "U8";
    case DType::Int32: return "I32";
  }
  GRAFT_ERROR("save_safetensors: unsupported dtype ", t);
}

bool parse_dtype(const std::string& code, DType& out) {
  if (code == "F32") out = DType::Float32;
  else if (code == "F64") out = DType::Float64;
  else if (code == "I64") out = DType::Int64;
  else if (code == "BOOL") out = DType::Bool;
  else if (code == "BF16") out = DType::BFloat16;
  else if (code == "F16") out = DType::Float16;
  else if (code == "U8") out = DType::UInt8;
  else if (code == "I32") out = DType::Int32;
  else return false;
  return true;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  GRAFT_ERROR("load_safetensors: '", path, "': ", what);
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// Reads a non-negative integer that fits in int64 from a JSON value.
bool json_uint(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    out = static_cast<uint64_t>(s);
    return true;
  }
  return false;
}

Entry parse_entry(const std::string& path, const std::string& name, const json& v, uint64_t data_size) {
  const std::string where = "tensor '" + name + "': ";
  if (!v.is_object()) fail(path, where + "header entry is not a JSON object but " + v.type_name());
  Entry e;
  e.name = name;
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) fail(path, where + "missing or non-string \"dtype\"");
  if (!parse_dtype(dt->get<std::string>(), e.dtype))
    fail(path, where + "unknown dtype \"" + dt->get<std::string>() + "\" (supported: F32, F64, BF16, F16, I64, I32, U8, BOOL)");
  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) fail(path, where + "missing or non-array \"shape\"");
  if (sh->size() > 64) fail(path, where + "shape has " + std::to_string(sh->size()) + " dimensions (at most 64)");
  // numel in elements, with overflow checks against the (already bounded) data size.
  uint64_t numel = 1;  // product of the non-zero dims, kept within int64 for the tensor factories
  bool has_zero = false;
  for (const json& d : *sh) {
    if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0)
      fail(path, where + "negative dimension " + std::to_string(d.get<int64_t>()) + " at index " +
                     std::to_string(e.shape.size()) + " of \"shape\"");
    uint64_t n;
    if (!json_uint(d, n))
      fail(path, where + "\"shape\" element " + std::to_string(e.shape.size()) +
                     " is a non-integer or too large dimension (" + d.type_name() + ")");
    e.shape.push_back(static_cast<int64_t>(n));
    if (n == 0) {
      has_zero = true;
    } else {
      if (numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n)
        fail(path, where + "shape is too large (more than 2^63 elements)");
      numel *= n;
    }
  }
  if (has_zero) numel = 0;
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2)
    fail(path, where + "\"data_offsets\" must be an array [begin, end]");
  if (!json_uint((*off)[0], e.begin) || !json_uint((*off)[1], e.end))
    fail(path, where + "\"data_offsets\" must be non-negative integers");
  if (e.end < e.begin) fail(path, where + "data_offsets " + off->dump() + " end before begin");
  if (e.end > data_size)
    fail(path, where + "data_offsets " + off->dump() + " run past the end of the data section (" +
                   std::to_string(data_size) + " bytes)");
  const uint64_t esize = element_size(e.dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / esize || numel * esize != e.end - e.begin)
    fail(path, where + "shape " + sh->dump() + " of dtype " + dt->get<std::string>() + " needs " +
                   (numel > std::numeric_limits<uint64_t>::max() / esize ? std::string("too many")
                                                                          : std::to_string(numel * esize)) +
                   " bytes but data_offsets " + off->dump() + " span " + std::to_string(e.end - e.begin));
  return e;
}

std::map<std::string, Tensor> load_impl(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open file");
  in.seekg(0, std::ios::end);
  const std::streamoff fsize_s = in.tellg();
  if (fsize_s < 0) fail(path, "cannot determine the file size");
  const uint64_t fsize = static_cast<uint64_t>(fsize_s);
  in.seekg(0, std::ios::beg);
  if (fsize < 8) fail(path, "file is " + std::to_string(fsize) + " bytes, shorter than the 8-byte header length");
  unsigned char lenbuf[8];
  if (!in.read(reinterpret_cast<char*>(lenbuf), 8)) fail(path, "cannot read the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | lenbuf[i];
  if (n > kSafetensorsMaxHeaderSize)
    fail(path, "header length " + std::to_string(n) + " is absurdly large (limit " +
                   std::to_string(kSafetensorsMaxHeaderSize) + ")");
  if (n > fsize - 8)
    fail(path, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(fsize) +
                   " bytes)");
  std::string header(n, '\0');
  if (n > 0 && !in.read(header.data(), static_cast<std::streamsize>(n))) fail(path, "cannot read the header");
  const uint64_t data_size = fsize - 8 - n;

  json j;
  std::string duplicate;
  try {
    // Track keys of the top-level object: nlohmann keeps the last of duplicates silently.
    std::set<std::string> seen;
    json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
      if (depth == 1 && ev == json::parse_event_t::key && parsed.is_string()) {
        const auto& k = parsed.get_ref<const std::string&>();
        if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
      }
      return true;
    };
    j = json::parse(header, cb);
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, std::string("header must be a JSON object, got ") + j.type_name());
  if (!duplicate.empty()) fail(path, "header names '" + duplicate + "' twice");

  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) fail(path, "\"__metadata__\" must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) fail(path, "\"__metadata__\" value for '" + m.key() + "' is not a string");
        if (metadata) (*metadata)[m.key()] = m->get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, it.key(), *it, data_size));
  }

  // The tensors must tile the data section exactly: no overlap, no gap, nothing left over.
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t pos = 0;
  for (const Entry* e : order) {
    if (e->begin < pos)
      fail(path, "tensor '" + e->name + "' data_offsets [" + std::to_string(e->begin) + ", " +
                     std::to_string(e->end) + "] overlap the previous tensor (which ends at " + std::to_string(pos) +
                     ")");
    if (e->begin > pos)
      fail(path, "gap in the data section: bytes [" + std::to_string(pos) + ", " + std::to_string(e->begin) +
                     ") before tensor '" + e->name + "' belong to no tensor");
    pos = e->end;
  }
  if (pos != data_size)
    fail(path, "the tensors cover " + std::to_string(pos) + " bytes but the data section holds " +
                   std::to_string(data_size) + " bytes");

  std::map<std::string, Tensor> out;
  const uint64_t data_start = 8 + n;
  for (const Entry& e : entries) {
    Tensor t = graft::empty(e.shape, TensorOptions{}.dtype(e.dtype));
    const uint64_t bytes = e.end - e.begin;
    if (bytes > 0) {
      in.seekg(static_cast<std::streamoff>(data_start + e.begin), std::ios::beg);
      if (!in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(bytes)))
        fail(path, "cannot read the data of tensor '" + e.name + "'");
      if (e.dtype == DType::Bool) {  // a bool must hold 0 or 1; normalise any other byte
        auto* p = static_cast<unsigned char*>(t.data_ptr());
        for (uint64_t i = 0; i < bytes; ++i) p[i] = p[i] != 0;
      }
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace

SafetensorsParts encode_safetensors(const std::map<std::string, Tensor>& tensors,
                                    const std::map<std::string, std::string>& metadata, const std::string& path) {
  json header = json::object();
  SafetensorsParts parts;
  parts.data.reserve(tensors.size());
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted by name
    GRAFT_CHECK(name != "__metadata__", "save_safetensors: '", path, "': \"__metadata__\" is reserved, not a tensor name");
    GRAFT_CHECK(t.defined(), "save_safetensors: '", path, "': tensor '", name, "' is undefined");
    Tensor c = t.detach().cpu().contiguous();
    json shape = json::array();
    for (int64_t d : c.sizes()) shape.push_back(d);
    const uint64_t bytes = c.nbytes();
    header[name] = {{"dtype", dtype_code(c.dtype())}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    parts.data.push_back(c);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  parts.header = header.dump();
  return parts;
}

void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  SafetensorsParts parts = encode_safetensors(tensors, metadata, path);
  std::string& text = parts.header;
  const std::vector<Tensor>& host = parts.data;
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    GRAFT_CHECK(out.good(), "save_safetensors: cannot open '", tmp, "' for writing");
    unsigned char lenbuf[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) lenbuf[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(lenbuf), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Tensor& c : host)
      if (c.nbytes() > 0) out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    out.flush();
    if (!out.good()) {
      out.close();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      GRAFT_ERROR("save_safetensors: writing '", tmp, "' failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    GRAFT_ERROR("save_safetensors: cannot rename '", tmp, "' to '", path, "': ", ec.message());
  }
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) { return load_impl(path, nullptr); }

std::map<std::string, Tensor> load_safetensors(const std::string& path, std::map<std::string, std::string>& metadata) {
  metadata.clear();
  return load_impl(path, &metadata);
}

}  // namespace graft::nn
