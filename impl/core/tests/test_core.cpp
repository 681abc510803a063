// Tests of the error macros, atomic JSON writes and the deterministic RNG.
#include "core/error.h"
#include "core/json_io.h"
#include "core/provenance.h"
#include "core/rng.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

namespace dcp {
namespace {

TEST(Error, CheckMessageNamesConditionAndValues) {
  try {
    const int x = 3;
    DCP_CHECK(x == 4, "x=", x);
    FAIL() << "DCP_CHECK did not throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Assertion failed: x == 4. x=3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_core.cpp:"), std::string::npos) << msg;
  }
}

TEST(Error, RequireThrowsInputErrorWithOnlyTheMessage) {
  try {
    DCP_REQUIRE(false, "--dp ", 0, " must be >= 1");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--dp 0 must be >= 1");
  }
}

TEST(JsonIo, AtomicWriteLeavesNoTempFileAndRoundTrips) {
  const auto dir = std::filesystem::temp_directory_path() / ("dcp_core_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "x.json").string();
  write_json_atomic(path, nlohmann::json{{"a", 1}, {"b", {1, 2, 3}}});
  const auto j = read_json_file(path);
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"].size(), 3u);
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
  EXPECT_THROW(write_json_atomic((dir / "no/such/dir/y.json").string(), nlohmann::json{}), InputError);
  std::filesystem::remove_all(dir);
}

TEST(JsonIo, WriteRefusesWhatReadWouldRefuse) {
  const auto dir = std::filesystem::temp_directory_path() / ("dcp_core_big_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "big.json").string();
  // One string 2 bytes short of the limit: with its quotes and the newline it is 1 byte over.
  const nlohmann::json over = std::string(static_cast<size_t>(kMaxJsonFileBytes) - 2, 'a');
  EXPECT_THROW(write_json_atomic(path, over), InputError);
  EXPECT_FALSE(std::filesystem::exists(path));  // nothing written
  const nlohmann::json at = std::string(static_cast<size_t>(kMaxJsonFileBytes) - 3, 'a');
  write_json_atomic(path, at);  // exactly the limit: written, and read back
  EXPECT_EQ(read_json_file(path).get_ref<const std::string&>().size(), static_cast<size_t>(kMaxJsonFileBytes) - 3);
  std::filesystem::remove_all(dir);
}

TEST(JsonIo, KeyTwiceInOneObjectIsAnError) {
  EXPECT_THROW(parse_json_text(R"({"name": "a", "x": 1, "name": "b"})", "s.json"), InputError);
  EXPECT_THROW(parse_json_text(R"({"o": [{"k": 1}, {"k": 2, "k": 3}]})", "s.json"), InputError);
  // The same key in different objects, nested or side by side, is fine.
  const auto j = parse_json_text(R"({"k": {"k": 1}, "a": [{"k": 2}, {"k": 3}]})", "s.json");
  EXPECT_EQ(j["k"]["k"], 1);
  EXPECT_EQ(j["a"][1]["k"], 3);
  try {
    parse_json_text(R"({"name": 1, "name": 2})", "s.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"name\" appears twice"), std::string::npos) << e.what();
  }
}

TEST(JsonIo, ParseErrorNamesFile) {
  const auto path = std::filesystem::temp_directory_path() / ("dcp_bad_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << "{not json";
  try {
    read_json_file(path.string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST(Rng, DeterministicAndSpread) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
  std::set<int64_t> seen;
  Rng r(1);
  double sum = 0, sum2 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    seen.insert(r.uniform_int(1, 6));
    const double z = r.normal();
    sum += z;
    sum2 += z * z;
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(sum2 / n, 1.0, 0.05);
  EXPECT_EQ(hash_u64(7, 100), hash_u64(7, 100));
  EXPECT_NE(hash_u64(7, 100), hash_u64(7, 101));
  const double u = hash_uniform(7, 5);
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

}  // namespace
}  // namespace dcp

// This test binary stands in for one that links the build-time sha (cmake/DcpBuildInfo.cmake):
// the commit a binary was built from is what it records, not the tree's current one (a stale
// dcpbench stamped the newer tree's sha on its results, audit of helper-48), marked "-dirty"
// when the sources differ from it (here: a commit this checkout does not have), and a tree that
// has moved on is said once on stderr.
extern "C" const char dcp_build_git_sha[] = "0123456789abcdef0123456789abcdef01234567";

TEST(Provenance, RecordsTheCommitTheBinaryWasBuiltFromAndWarnsWhenTheTreeDiffers) {
  testing::internal::CaptureStderr();
  const std::string sha = dcp::source_git_sha();
  const std::string again = dcp::source_git_sha();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(sha, again);
  const std::string tree = dcp::tree_git_sha();
  if (tree.empty()) {
    EXPECT_EQ(sha, "0123456789abcdef0123456789abcdef01234567");
    EXPECT_EQ(err, "");  // no git here: nothing to compare with
  } else {
    EXPECT_EQ(sha, "0123456789abcdef0123456789abcdef01234567-dirty");
    EXPECT_NE(err.find("built at 0123456789abcdef0123456789abcdef01234567, the source tree is now at " + tree +
                       ": results record " + sha),
              std::string::npos)
        << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;  // once
  }
}
