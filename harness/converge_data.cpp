// See converge_data.h.
#include "harness/converge_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/files.h"
#include "core/rng.h"

namespace dcp::harness {

namespace {

constexpr int64_t kMaxTextBytes = int64_t{64} << 20;  // a text folder above 64 MiB is a mistake

std::vector<std::vector<int32_t>> paragraphs_of(const std::string& text) {
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> cur;
  size_t i = 0;
  while (i < text.size()) {
    // A blank line ends a paragraph; its newline stays with the paragraph.
    if (text[i] == '\n' && i + 1 < text.size() && text[i + 1] == '\n') {
      cur.push_back('\n');
      out.push_back(std::move(cur));
      cur.clear();
      while (i < text.size() && text[i] == '\n') ++i;
      continue;
    }
    cur.push_back(static_cast<unsigned char>(text[i]));
    ++i;
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace

TextCorpus load_text_corpus(const ConvergeScenario& s) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(s.text_dir))
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  DCP_REQUIRE(!files.empty(), s.file, ": \"data.text_dir\"=\"", s.text_dir_as_written,
              "\" holds no .txt files");
  TextCorpus c;
  Rng rng(s.data_seed);
  for (const auto& f : files) {
    // Bounded read (core/files.h): a huge file is refused before it is read into memory.
    const std::string text = read_file_bounded(f.string(), kMaxTextBytes, "text file");
    c.bytes += static_cast<int64_t>(text.size());
    DCP_REQUIRE(c.bytes <= kMaxTextBytes, s.file, ": \"data.text_dir\" holds more than ",
                kMaxTextBytes >> 20, " MiB of text");
    ++c.files;
    const auto paras = paragraphs_of(text);
    std::vector<std::vector<int32_t>> docs;
    if (rng.uniform() < s.whole_chapter_share) {
      std::vector<int32_t> d;
      for (const auto& p : paras) d.insert(d.end(), p.begin(), p.end());
      docs.push_back(std::move(d));
    } else {
      size_t i = 0;
      while (i < paras.size()) {
        // Log-uniform run length: short documents are as common as long ones per octave.
        const double u = rng.uniform();
        const size_t k = std::clamp<size_t>(
            static_cast<size_t>(std::exp(u * std::log(s.max_paragraphs + 1.0))), 1, s.max_paragraphs);
        std::vector<int32_t> d;
        for (size_t e = std::min(paras.size(), i + k); i < e; ++i) d.insert(d.end(), paras[i].begin(), paras[i].end());
        docs.push_back(std::move(d));
      }
    }
    for (const auto& d : docs)
      for (size_t b = 0; b < d.size(); b += static_cast<size_t>(s.max_seqlen)) {
        const size_t e = std::min(d.size(), b + static_cast<size_t>(s.max_seqlen));
        if (e - b >= 2) c.documents.emplace_back(d.begin() + b, d.begin() + e);
      }
  }
  DCP_REQUIRE(static_cast<int64_t>(c.documents.size()) >= s.global_batch, s.file, ": the text gives ",
              c.documents.size(), " documents, fewer than \"training.global_batch\"=", s.global_batch);
  return c;
}

exec::GlobalBatch step_batch(const TextCorpus& c, const ConvergeScenario& s, int step) {
  Rng rng(hash_u64(s.batch_seed, static_cast<uint64_t>(step)));
  std::vector<int> idx(c.documents.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  exec::GlobalBatch b;
  for (int i = 0; i < s.global_batch; ++i) {  // partial Fisher-Yates
    const int j = static_cast<int>(rng.uniform_int(i, static_cast<int64_t>(idx.size()) - 1));
    std::swap(idx[i], idx[j]);
    b.samples.push_back(c.documents[idx[i]]);
  }
  return b;
}

exec::GlobalBatch edge_batch(const TextCorpus& c, const std::vector<int64_t>& lengths, int offset) {
  exec::GlobalBatch b;
  size_t doc = static_cast<size_t>(offset) % c.documents.size(), pos = 0;
  for (int64_t len : lengths) {
    std::vector<int32_t> s;
    while (static_cast<int64_t>(s.size()) < len) {
      const auto& d = c.documents[doc];
      const size_t take = std::min<size_t>(d.size() - pos, static_cast<size_t>(len) - s.size());
      s.insert(s.end(), d.begin() + pos, d.begin() + pos + take);
      pos += take;
      if (pos == d.size()) {
        doc = (doc + 1) % c.documents.size();
        pos = 0;
      }
    }
    b.samples.push_back(std::move(s));
  }
  return b;
}

}  // namespace dcp::harness
