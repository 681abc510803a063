// Tests of the length-file readers: text, JSON and Megatron .idx (hand-built binary files),
// with every rejection naming the source and the bad value.
#include "core/error.h"
#include "data/lengths_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace dcp::data {
namespace {

void expect_error(const std::function<void()>& f, const std::string& sub) {
  try {
    f();
    ADD_FAILURE() << "no error, expected: " << sub;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(sub), std::string::npos) << e.what();
  }
}

TEST(LengthsText, CommentsBlankLinesAndWhitespace) {
  const auto v = parse_lengths_text("# header\n12\n\n  7  \n3 # trailing\r\n\n", "f.txt");
  EXPECT_EQ(v, (std::vector<int64_t>{12, 7, 3}));
  EXPECT_EQ(parse_lengths_text("5", "f"), (std::vector<int64_t>{5}));
  EXPECT_TRUE(parse_lengths_text("", "f").empty());
}

TEST(LengthsText, RejectsNonIntegersAndNonPositive) {
  expect_error([] { parse_lengths_text("1\n2x\n", "f.txt"); }, "f.txt:2: \"2x\" is not an integer length");
  expect_error([] { parse_lengths_text("1\n1.5\n", "f.txt"); }, "f.txt:2: \"1.5\"");
  expect_error([] { parse_lengths_text("4\n0\n", "f.txt"); }, "f.txt:2: length 0 must be >= 1");
  expect_error([] { parse_lengths_text("-3\n", "f.txt"); }, "f.txt:1: length -3 must be >= 1");
  expect_error([] { parse_lengths_text("99999999999999999999999\n", "f.txt"); }, "out of range");
}

TEST(LengthsJson, ArrayOfIntegers) {
  EXPECT_EQ(parse_lengths(" [3, 4,5]", "a.json"), (std::vector<int64_t>{3, 4, 5}));
  expect_error([] { parse_lengths_json("[3, \"x\"]", "a.json"); }, "a.json: element 1 (\"x\") is not an integer");
  expect_error([] { parse_lengths_json("[3, 2.5]", "a.json"); }, "element 1 (2.5)");
  expect_error([] { parse_lengths_json("[0]", "a.json"); }, "element 0 has length 0");
  expect_error([] { parse_lengths_json("{\"a\": 1}", "a.json"); }, "must be an array");
  expect_error([] { parse_lengths_json("[1,", "a.json"); }, "invalid JSON");
  expect_error([] { parse_lengths_json("[3, [4]]", "a.json"); }, "a.json: element 1 ([...]) is not an integer length");
  expect_error([] { parse_lengths_json("[3, {\"a\": 4}]", "a.json"); }, "element 1 ({...})");
  expect_error([] { parse_lengths_json("[3, null]", "a.json"); }, "element 1 (null)");
  expect_error([] { parse_lengths_json("[3, 9223372036854775808]", "a.json"); }, "element 1 (9223372036854775808) is out of range");
  // Beyond uint64 an integer literal reaches the reader as a float: still out of range, quoted as
  // written (helper-75's trial: "(1.8446744073709552e+19) is not an integer length").
  expect_error([] { parse_lengths_json("[3, 18446744073709551616]", "a.json"); }, "element 1 (18446744073709551616) is out of range");
  expect_error([] { parse_lengths_json("[-18446744073709551617]", "a.json"); }, "element 0 (-18446744073709551617) is out of range");
  expect_error([] { parse_lengths_json("[3, 1e20]", "a.json"); }, "element 1 (1e+20) is not an integer length");
  expect_error([] { parse_lengths_json("7", "a.json"); }, "must be an array");
  expect_error([] { parse_lengths_json("\"x\"", "a.json"); }, "must be an array");
  EXPECT_EQ(parse_lengths_json("[]", "a.json"), std::vector<int64_t>{});
  // Found by the fuzzer: nlohmann throws out_of_range (not parse_error) on a number overflow.
  expect_error([] { parse_lengths_json("[10000000000000E0000000000008880]", "a.json"); }, "invalid JSON");
}

// Builds a Megatron MMIDIDX v1 index in memory (layout in lengths_file.h).
std::string make_idx(const std::vector<int32_t>& seq_lens, const std::vector<int64_t>& doc_idx, bool modes,
                     uint64_t version = 1, uint8_t dtype = 4) {
  std::string b("MMIDIDX\0\0", 9);
  auto put = [&b](const void* p, size_t n) { b.append(static_cast<const char*>(p), n); };
  put(&version, 8);
  put(&dtype, 1);
  const uint64_t n = seq_lens.size(), m = doc_idx.size();
  put(&n, 8);
  put(&m, 8);
  put(seq_lens.data(), 4 * n);
  int64_t ptr = 0;
  for (size_t i = 0; i < n; ++i) {
    put(&ptr, 8);
    ptr += seq_lens[i] * 4;
  }
  put(doc_idx.data(), 8 * m);
  if (modes) b.append(n, '\1');
  return b;
}

TEST(MegatronIdx, DocumentLengthsAreSumsOfSequences) {
  const std::string b = make_idx({5, 7, 11, 13}, {0, 2, 3, 4}, false);
  EXPECT_EQ(b.size(), 34u + 12 * 4 + 8 * 4);
  EXPECT_EQ(parse_lengths(b, "x.idx"), (std::vector<int64_t>{12, 11, 13}));
  EXPECT_EQ(parse_megatron_idx(make_idx({5, 7, 11, 13}, {0, 2, 3, 4}, true), "x.idx"),
            (std::vector<int64_t>{12, 11, 13}));
}

TEST(MegatronIdx, RejectsMalformedFiles) {
  const std::string good = make_idx({5, 7}, {0, 1, 2}, false);
  expect_error([&] { parse_megatron_idx(good.substr(0, 20), "x.idx"); }, "too short");
  expect_error([&] { parse_megatron_idx(good.substr(0, good.size() - 1), "x.idx"); }, "does not match");
  expect_error([&] { parse_megatron_idx(make_idx({5}, {0, 1}, false, 2), "x.idx"); }, "unsupported .idx version 2");
  expect_error([&] { parse_megatron_idx(make_idx({5}, {0, 1}, false, 1, 9), "x.idx"); }, "dtype code 9");
  expect_error([&] { parse_megatron_idx(make_idx({5, 7}, {0, 2, 1}, false), "x.idx"); }, "document_indices[2] = 1");
  expect_error([&] { parse_megatron_idx(make_idx({5, 7}, {1, 2}, false), "x.idx"); }, "document_indices[0] = 1");
  expect_error([&] { parse_megatron_idx(make_idx({5, 0}, {0, 1, 2}, false), "x.idx"); }, "document 1 has length 0");
  expect_error([&] { parse_megatron_idx(make_idx({5, 7}, {0, 1}, false), "x.idx"); }, "last document index 1");
  std::string huge = good;
  const uint64_t big = 1ull << 62;
  std::memcpy(huge.data() + 18, &big, 8);
  expect_error([&] { parse_megatron_idx(huge, "x.idx"); }, "do not fit");
  std::string badmagic = good;
  badmagic[0] = 'X';
  expect_error([&] { parse_megatron_idx(badmagic, "x.idx"); }, "bad magic");
}

TEST(LengthsFile, ReadsFileAndRejectsMissingOrEmpty) {
  const auto dir = std::filesystem::temp_directory_path() / ("dcp_len_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.txt") << "3\n4\n";
  EXPECT_EQ(read_lengths_file((dir / "a.txt").string()), (std::vector<int64_t>{3, 4}));
  std::ofstream(dir / "empty.txt") << "# nothing\n";
  expect_error([&] { read_lengths_file((dir / "empty.txt").string()); }, "no sample lengths");
  expect_error([&] { read_lengths_file((dir / "missing.txt").string()); }, "cannot open lengths file");
  expect_error([&] { read_lengths_file(dir.string()); }, "is a directory");
  // A file of samples to plan names the file, the sample and the limit; a document file does not cap.
  std::ofstream(dir / "long.txt") << "# header\n3\n9223372036854775807\n";
  EXPECT_EQ(read_lengths_file((dir / "long.txt").string()).size(), 2u);
  EXPECT_EQ(read_sample_lengths_file((dir / "a.txt").string(), 4), (std::vector<int64_t>{3, 4}));
  expect_error([&] { read_sample_lengths_file((dir / "long.txt").string(), int64_t{1} << 40); },
               "long.txt: sample 1 has length 9223372036854775807, above the limit of 1099511627776 tokens per sample");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dcp::data

namespace dcp::data {
namespace {

// Issue 11: inputs a robustness run found. Each is refused with a one-line message that names
// the limit or the problem, never a crash, a binary dump or a text reading of a damaged .idx.
TEST(LengthsFile, BadInputsGiveShortPrintableErrors) {
  // JSON nesting: refused while parsing (was a SIGSEGV when the error printed the value).
  expect_error([] { parse_lengths(std::string(70000, '[') + std::string(70000, ']'), "d.json"); },
               "d.json: JSON nested deeper than the limit of 64 levels");
  // Binary content is named, not copied.
  std::string bin = "12\n";
  bin += std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 11);
  expect_error([&] { parse_lengths(bin, "ls"); }, "ls: binary content (a NUL byte at offset 10)");
  // Control bytes in a bad text line are escaped, a long line is cut.
  try {
    parse_lengths_text("3\n\x1b[31m" + std::string(5000, '9') + "x\n", "f.txt");
    ADD_FAILURE();
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("f.txt:2: \"\\x1b[31m"), std::string::npos) << m;
    EXPECT_LT(m.size(), 200u);
    for (unsigned char c : m) EXPECT_GE(c, 0x20);
  }
  // A damaged .idx (starts like the magic) is never read as text.
  using namespace std::string_view_literals;
  expect_error([] { parse_lengths("MMIDIDX\0X1\n2\n"sv, "a.txt"); }, "not a Megatron .idx file (bad magic)");
}

TEST(LengthsFile, IdxByNameAndSizeLimit) {
  const auto dir = std::filesystem::temp_directory_path() / ("dcp_len11_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "text.idx") << "12\n34\n";  // a text file named .idx: checked as .idx
  expect_error([&] { read_lengths_file((dir / "text.idx").string()); }, "not a Megatron .idx file (bad magic)");
  // Over the size limit (a sparse file: refused from its size, before reading).
  { std::ofstream(dir / "big.txt") << "1\n"; }
  std::filesystem::resize_file(dir / "big.txt", kMaxLengthsFileBytes + 1);
  expect_error([&] { read_lengths_file((dir / "big.txt").string()); },
               "lengths file is larger than the limit of 1 GiB (1073741825 bytes)");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dcp::data
