// Tests of the bounded-input pieces every command relies on (issue 11): one-line error text,
// checked integers, JSON depth/size limits, and the output-path policy (no device, FIFO,
// folder or symlink is ever replaced; nothing is left behind on failure).
#include "core/checked_int.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/rng.h"
#include "core/text.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>

namespace dcp {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// Code points of valid UTF-8 (the width a terminal shows, ignoring wide characters).
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool has_control_byte(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7F) return true;
  return false;
}

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("dcp_bounded_" + std::to_string(::getpid()) + "_" +
                                                 std::to_string(counter_++))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }
  // Names in the folder (to check that no temporary file is left).
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(ErrorText, EscapesControlAndInvalidBytesKeepsUtf8) {
  EXPECT_EQ(escape_bytes("a\nb\tc\r\x01\x7f\\"), "a\\nb\\tc\\r\\x01\\x7f\\\\");
  EXPECT_EQ(escape_bytes("donn\xc3\xa9" "es"), "donn\xc3\xa9" "es");       // é kept
  EXPECT_EQ(escape_bytes("\xc3"), "\\xc3");                                 // truncated sequence
  EXPECT_EQ(escape_bytes("\xc0\xaf"), "\\xc0\\xaf");                        // overlong '/'
  EXPECT_EQ(escape_bytes("\xe2\x80\xae" "x"), "\\xe2\\x80\\xaex");          // U+202E (bidi override)
  EXPECT_EQ(escape_bytes("\xc2\x85"), "\\xc2\\x85");                        // U+0085 (C1 next line)
  EXPECT_EQ(escape_bytes(std::string("a\0b", 3)), "a\\x00b");
}

TEST(ErrorText, QuoteCutsLongValuesAndCountsBytes) {
  EXPECT_EQ(quote("dcp"), "\"dcp\"");
  EXPECT_EQ(quote("dc\np"), "\"dc\\np\"");
  const std::string q = quote(std::string(5000, 'a'), 16);
  EXPECT_EQ(q, "\"" + std::string(16, 'a') + "\"...(5000 bytes)");
  // A cut never splits an escape: 16 characters of "\x01" escapes hold 4 of them.
  EXPECT_EQ(quote(std::string(100, '\x01'), 16), "\"" + std::string("\\x01\\x01\\x01\\x01") + "\"...(100 bytes)");
}

TEST(ErrorText, OneLineIsBoundedAndPrintableOnSeededRandomBytes) {
  Rng rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    // Awkward sizes around the limit, and large ones.
    const int64_t sizes[] = {0, 1, 299, 300, 301, 1200, 100000};
    const int64_t n = sizes[trial % 7];
    std::string msg(static_cast<size_t>(n), ' ');
    for (auto& c : msg) c = static_cast<char>(rng.uniform_int(0, 255));
    const std::string line = one_line(msg);
    EXPECT_FALSE(has_control_byte(line)) << trial;
    EXPECT_LE(code_points(line), kMaxErrorChars) << trial;
    if (n > 0 && trial % 7 >= 5) {
      EXPECT_NE(line.find(" [...] "), std::string::npos) << trial;
    }
  }
  // The tail (what is wrong) survives the cut.
  const std::string long_msg = std::string(2000, 'p') + ": is a character device";
  EXPECT_NE(one_line(long_msg).find(": is a character device"), std::string::npos);
  // A message within the limit is unchanged.
  EXPECT_EQ(one_line("--dp=\"x\" is not an integer"), "--dp=\"x\" is not an integer");
}

TEST(CheckedInt, RejectsWrapsPartialsAndOutOfRange) {
  EXPECT_EQ(parse_int("42", 1, 100, "--dp"), 42);
  EXPECT_EQ(parse_int("+7", 0, 100, "--dp"), 7);
  EXPECT_EQ(parse_int("-9223372036854775808", std::numeric_limits<int64_t>::min(), 0, "x"),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(parse_int("9223372036854775807", 0, kMaxI64, "x"), kMaxI64);
  EXPECT_EQ(error_of([] { parse_int("-1", 0, kMaxI64, "--seed"); }), "--seed=\"-1\" is below the minimum 0");
  EXPECT_EQ(error_of([] { parse_int("101", 1, 100, "--dp"); }), "--dp=\"101\" is above the maximum 100");
  for (const char* bad : {"", "+", "-", "+-5", "1e3", " 1", "1 ", "0x10", "4x", "1.0", "--1"})
    EXPECT_NE(error_of([bad] { parse_int(bad, 0, 100, "--n"); }).find("is not an integer"), std::string::npos) << bad;
  EXPECT_NE(error_of([] { parse_int("9223372036854775808", 0, kMaxI64, "--n"); }).find("is out of range"),
            std::string::npos);
  EXPECT_FALSE(int_error("5", 5, 5).has_value());
}

TEST(JsonLimits, DepthIsCheckedWhileParsing) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_NO_THROW(parse_json_text(nested(kMaxJsonDepth), "ok.json"));
  EXPECT_EQ(error_of([&] { parse_json_text(nested(kMaxJsonDepth + 1), "d.json"); }),
            "d.json: JSON nested deeper than the limit of 64 levels");
  // 70,000 levels (the SIGSEGV of issue 11): refused, not built and then walked.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { parse_json_text(nested(70000), "d.json"); }).find("nested deeper"), std::string::npos);
  std::string objects;
  for (int i = 0; i < 70000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(70000, '}');
  EXPECT_NE(error_of([&] { parse_json_text(objects, "o.json"); }).find("nested deeper"), std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST(JsonLimits, ParseErrorsDoNotCopyTheInput) {
  // An unterminated 1 MB string with a control byte: nlohmann's "last read" token is the whole string.
  const std::string text = "[\"" + std::string(1 << 20, 'x') + "\x01";
  const std::string e = error_of([&] { parse_json_text(text, "big.json"); });
  EXPECT_NE(e.find("big.json: invalid JSON"), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 400u);
  EXPECT_FALSE(has_control_byte(e));
}

// The token nlohmann last read is quoted alone, "; expected ..." after the quotes, and a long one by
// its tail, where the parser stopped (helper-47: the head of a 300-byte string hid the offending
// " oops" after it, and "; expected end of input" had landed inside the quotes).
TEST(JsonLimits, ParseErrorsQuoteTheTokenWhereTheParserStopped) {
  const std::string trailing = error_of([] { parse_json_text("{\"name\": \"abc\"} x", "t.json"); });
  // (nlohmann's token here runs from the last string to the stray x)
  EXPECT_NE(trailing.find("last read: \"\"abc\"} x\"; expected end of input)"), std::string::npos) << trailing;
  const std::string longer = error_of([] {
    parse_json_text("{\"a\": \"" + std::string(300, 'y') + "\" oops}", "l.json");
  });
  EXPECT_NE(longer.find("last read: (3"), std::string::npos) << longer;
  EXPECT_NE(longer.find("bytes, ending) ...\""), std::string::npos) << longer;
  EXPECT_NE(longer.find("y\" o\"; expected '}'"), std::string::npos) << longer;  // where it stopped: " o"
  EXPECT_LT(longer.size(), 400u);
  // A tail never starts inside a UTF-8 sequence: é is 2 bytes and an odd ASCII tail puts the
  // 40-byte cut inside one (nlohmann writes the control byte as "<U+0001>", 8 bytes).
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xc3\xa9";
  const std::string utf = error_of([&] { parse_json_text("[\"" + accents + "b\x01", "u.json"); });
  EXPECT_NE(utf.find("ending) ...\"\xc3\xa9"), std::string::npos) << utf;  // starts on a whole é
  EXPECT_EQ(utf.find("\\x"), std::string::npos) << utf;                    // no escaped half of one
  // The input's own "'; expected" text is not taken for nlohmann's.
  const std::string own = error_of([] { parse_json_text("[\"a'; expected zzz", "o.json"); });
  EXPECT_EQ(own.find("\"; expected zzz"), std::string::npos) << own;
}

// Nothing to parse is said as such (a FIFO given as a scenario read as "invalid JSON", stop 44).
TEST(JsonLimits, EmptyTextIsNamedEmptyNotInvalid) {
  EXPECT_EQ(error_of([] { parse_json_text("", "s.json"); }), "s.json: is empty, no JSON in it");
  EXPECT_EQ(error_of([] { parse_json_text(" \n\t", "s.json"); }), "s.json: is empty, no JSON in it (white space only)");
  EXPECT_NE(error_of([] { parse_json_text(" {", "s.json"); }).find("s.json: invalid JSON"), std::string::npos);
  EXPECT_EQ(parse_json_text(" 1\n", "s.json"), nlohmann::json(1));
}

TEST(JsonLimits, ExcerptAndCheckedIntegers) {
  nlohmann::json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = nlohmann::json::array({deep});
  const std::string ex = json_excerpt(deep, 64);
  EXPECT_LE(ex.size(), 67u);
  // A long string keeps its quotes and says its length (as quote() does for a flag's value).
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(10000, 'z')), 10), "\"zzzzzzzzzz\"...(10000 bytes)");
  EXPECT_EQ(json_excerpt(nlohmann::json("\xc3\xa9\xc3\xa9"), 3), "\"\xc3\xa9\"...(4 bytes)");  // not inside a UTF-8 sequence
  EXPECT_EQ(json_excerpt(nlohmann::json("a\nb")), "\"a\\nb\"");
  const auto big = nlohmann::json::parse("9223372036854775808");  // 2^63: stored unsigned
  EXPECT_EQ(error_of([&] { json_int(big, 0, kMaxI64, "\"step\""); }),
            "\"step\"=9223372036854775808 is above the maximum 9223372036854775807");
  EXPECT_NE(error_of([] { json_int(nlohmann::json(1.5), 0, 10, "k"); }).find("k=1.5 is not an integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { json_int(nlohmann::json(-1), 0, 10, "k"); }).find("below the minimum 0"), std::string::npos);
  EXPECT_EQ(json_int(nlohmann::json(7), 0, 10, "k"), 7);
  // Beyond uint64 the parser keeps an integer literal as a float: named with the range.
  EXPECT_EQ(error_of([] { json_int(nlohmann::json::parse("18446744073709551616"), 0, 10, "k"); }),
            "k=1.8446744073709552e+19 is not an integer in [0, 10]");
  EXPECT_EQ(error_of([] { json_int(nlohmann::json::parse("-18446744073709551616"), 0, 10, "k"); }),
            "k=-1.8446744073709552e+19 is not an integer in [0, 10]");
  EXPECT_EQ(json_int_problem(nlohmann::json(1e3), 0, 10000), "is not an integer");  // 1e3: a float below 2^63
  EXPECT_EQ(json_int_problem(nlohmann::json(10), 0, 10), "");
}

TEST(InputFiles, SizeLimitStopsEndlessAndLargeFiles) {
  TempDir d;
  std::ofstream(d / "big.json") << std::string(5000, ' ') << "[]";
  EXPECT_NE(error_of([&] { read_file_bounded((d / "big.json").string(), 1000, "JSON file"); })
                .find("JSON file is larger than the limit of 1000 bytes (5002 bytes)"),
            std::string::npos);
  EXPECT_EQ(read_file_bounded((d / "big.json").string(), 5002, "x").size(), 5002u);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([] { read_file_bounded("/dev/zero", 1 << 20, "lengths file"); })
                .find("/dev/zero: lengths file is larger than the limit of 1 MiB"),
            std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_NE(error_of([&] { read_file_bounded(d.path().string(), 100, "lengths file"); }).find("is a directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_file_bounded((d / "missing").string(), 100, "scenario"); })
                .find("cannot open scenario (No such file or directory)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_json_file((d / "big.json").string(), 100); }).find("larger than the limit"),
            std::string::npos);
  // A FIFO nobody writes to reads as empty at once instead of blocking in open().
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(read_file_bounded((d / "fifo").string(), 100, "lengths file"), "");
}

TEST(OutputPolicy, RegularFilesAndNewPathsAreWrittenAtomically) {
  TempDir d;
  const std::string p = (d / "plan.json").string();
  write_output(p, "first\n");
  EXPECT_EQ(slurp(p), "first\n");
  write_output(p, "second\n");  // replaces a regular file
  EXPECT_EQ(slurp(p), "second\n");
  EXPECT_EQ(d.names(), std::vector<std::string>{"plan.json"});  // no temporary file left
  EXPECT_NO_THROW(check_output_path("-"));
  EXPECT_NO_THROW(check_output_path((d / "new.json").string()));
}

// A folder the command cannot write in is refused by the up-front check, before any work (stop 44:
// `run --out` on a read-only folder lost the run at the end), and the check creates nothing. Root
// may write in a mode-0555 folder, so as root the refusal is checked on a read-only file system's
// folder where this machine has one (/proc/sys here), else skipped with a message.
TEST(OutputPolicy, AFolderThatCannotBeWrittenIsRefusedBeforeTheWork) {
  TempDir d;
  fs::create_directory(d / "ro");
  EXPECT_NO_THROW(check_output_path((d / "ro" / "out.json").string()));
  EXPECT_TRUE(fs::is_empty(d / "ro"));  // nothing made by the check
  fs::permissions(d / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  std::string target = (d / "ro" / "out.json").string();
  if (::geteuid() == 0) {
    target.clear();
    for (const char* dir : {"/proc/sys"})
      if (::access(dir, W_OK) != 0 && fs::is_directory(dir)) target = std::string(dir) + "/dcpbench-out.json";
  }
  fs::permissions(d / "ro", fs::perms::owner_all);
  if (target.empty()) GTEST_SKIP() << "running as root and no read-only folder found to refuse";
  if (::geteuid() != 0) fs::permissions(d / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  const std::string says = error_of([&] { check_output_path(target); });
  fs::permissions(d / "ro", fs::perms::owner_all);
  EXPECT_EQ(says.rfind("--out=", 0), 0u) << says;
  EXPECT_NE(says.find(": cannot write a file in its folder"), std::string::npos) << says;
  EXPECT_FALSE(fs::exists(target));
}

// The probe, run after every other check, creates and removes a real file: it refuses a folder
// that access(2) passes but that takes no file (as root, a pseudo file system such as /proc: stop
// 45's `converge --out /proc/x` trained 33 s before exit 2), and leaves a folder that takes one as
// it was. Without root, a mode-0555 folder stands in for the refusal.
TEST(OutputPolicy, TheProbeCreatesAndRemovesAFileAndRefusesAFolderThatTakesNone) {
  TempDir d;
  fs::create_directory(d / "ok");
  EXPECT_NO_THROW(probe_output_folder((d / "ok" / "out.json").string()));
  EXPECT_NO_THROW(probe_output_folder("-"));
  EXPECT_TRUE(fs::is_empty(d / "ok"));  // the probe file is gone
  std::string target;
  if (::geteuid() == 0) {
    // /proc as root: access(2) says writable (check_output_path lets it through), open(O_CREAT) fails.
    if (fs::is_directory("/proc") && ::access("/proc", W_OK) == 0) target = "/proc/dcpbench-out.json";
  } else {
    fs::create_directory(d / "ro");
    fs::permissions(d / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    target = (d / "ro" / "out.json").string();
  }
  if (target.empty()) GTEST_SKIP() << "running as root and /proc is not a folder access(2) calls writable";
  if (::geteuid() == 0) {
    EXPECT_NO_THROW(check_output_path(target));  // what the probe is there for
  }
  const std::string says = error_of([&] { probe_output_folder(target); });
  if (::geteuid() != 0) fs::permissions(d / "ro", fs::perms::owner_all);
  EXPECT_EQ(says.rfind("--out=", 0), 0u) << says;
  EXPECT_NE(says.find(": cannot create a file in its folder"), std::string::npos) << says;
  EXPECT_FALSE(fs::exists(target));
}

TEST(OutputPolicy, DevicesFifosFoldersLinksAndMissingFoldersAreRefusedUntouched) {
  TempDir d;
  std::ofstream(d / "target.json") << "keep";
  fs::create_symlink(d / "target.json", d / "link.json");
  fs::create_directory(d / "folder");
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  struct Case {
    std::string path;
    std::string says;
  };
  std::vector<Case> cases = {{(d / "link.json").string(), "is a symbolic link"},
                             {(d / "folder").string(), "is a directory"},
                             {(d / "fifo").string(), "is a FIFO"},
                             {(d / "no" / "such" / "x.json").string(), "does not exist"},
                             {(d / "folder/").string(), "names a folder"},
                             {"", "empty path"}};
  if (::geteuid() == 0 && ::mknod((d / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0)
    cases.push_back({(d / "null").string(), "is a character device"});
  const auto before = d.names();
  for (const auto& c : cases) {
    EXPECT_NE(error_of([&] { write_output(c.path, "x", "--out"); }).find(c.says), std::string::npos) << c.path;
    EXPECT_NE(error_of([&] { check_output_path(c.path); }).find(c.says), std::string::npos) << c.path;
  }
  EXPECT_EQ(d.names(), before);  // nothing created, nothing replaced
  EXPECT_TRUE(fs::is_symlink(d / "link.json"));
  EXPECT_EQ(slurp(d / "target.json"), "keep");
  EXPECT_TRUE(fs::is_fifo(d / "fifo"));
  // /dev/null is only checked (never written) here: the check must refuse it.
  EXPECT_NE(error_of([] { check_output_path("/dev/null"); }).find("is a character device"), std::string::npos);
  // The atomic-JSON writers use the same policy.
  EXPECT_THROW(write_json_atomic((d / "fifo").string(), nlohmann::json{}), InputError);
  EXPECT_TRUE(fs::is_fifo(d / "fifo"));
}

TEST(OutputPolicy, PublishDirMovesFilesOnlyWhenEveryTargetIsAllowed) {
  TempDir d;
  // New folder: the staging folder becomes it.
  std::string staging = make_staging_dir((d / "charts").string());
  std::ofstream(fs::path(staging) / "a.png") << "A";
  publish_dir(staging, (d / "charts").string());
  EXPECT_EQ(slurp(d / "charts" / "a.png"), "A");
  EXPECT_FALSE(fs::exists(staging));
  // Existing folder with a symlink where b.png would go: nothing moves, the link stays.
  fs::create_symlink(d / "charts" / "a.png", d / "charts" / "b.png");
  staging = make_staging_dir((d / "charts").string());
  std::ofstream(fs::path(staging) / "a.png") << "A2";
  std::ofstream(fs::path(staging) / "b.png") << "B2";
  EXPECT_NE(error_of([&] { publish_dir(staging, (d / "charts").string()); }).find("is a symbolic link"),
            std::string::npos);
  EXPECT_EQ(slurp(d / "charts" / "a.png"), "A");
  EXPECT_TRUE(fs::is_symlink(d / "charts" / "b.png"));
  EXPECT_FALSE(fs::exists(staging));
  // A file where the folder should be is refused before any staging folder is made.
  std::ofstream(d / "file") << "f";
  EXPECT_NE(error_of([&] { make_staging_dir((d / "file").string()); }).find("not a folder"), std::string::npos);
  EXPECT_EQ(d.names(), (std::vector<std::string>{"charts", "file"}));
  // "-" (stdout for a file) is refused as a folder, before anything is made (it had made ./-).
  EXPECT_NE(error_of([] { make_staging_dir("-"); }).find("not stdout"), std::string::npos);
  EXPECT_FALSE(fs::exists("-"));
}

}  // namespace
}  // namespace dcp
