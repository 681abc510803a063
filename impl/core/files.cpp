// See files.h. POSIX calls throughout: lstat (never follows the final symlink) decides what a
// path is, and the temporary file is created with O_EXCL | O_NOFOLLOW so it cannot be someone
// else's file or link.
#include "core/files.h"

#include "core/error.h"
#include "core/text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

namespace dcp {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::strerror(err); }

std::string mib_text(int64_t bytes) {
  if (bytes % (int64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes % (int64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// "--out=\"x\"" or "x" at the start of a message.
std::string subject(std::string_view flag, std::string_view path) {
  return flag.empty() ? show_path(path) : std::string(flag) + "=" + quote(path, 120);
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISREG(m)) return "a regular file";
  return "not a regular file";
}

// The folder a path is in ("." for a bare name).
std::string folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Throws unless the folder of `path` exists and is a directory (following symlinks: a folder
// reached through a link is fine, only the final component must not be one).
void require_folder(const std::string& path, std::string_view flag) {
  const std::string dir = folder_of(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw InputError(subject(flag, path) + ": folder " + quote(dir, 120) + " does not exist (" +
                     errno_text(errno) + "; create it first)");
  if (!S_ISDIR(st.st_mode))
    throw InputError(subject(flag, path) + ": " + quote(dir, 120) + " is not a folder");
}

// Throws unless `path` is absent or a regular file (lstat: a symlink is refused, not followed).
void require_regular_or_absent(const std::string& path, std::string_view flag) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw InputError(subject(flag, path) + ": cannot check the path (" + errno_text(errno) + ")");
  }
  if (!S_ISREG(st.st_mode))
    throw InputError(subject(flag, path) + ": is " + kind_of(st.st_mode) +
                     ", not a regular file; refusing to replace it (left untouched)");
}

std::string temp_name(const std::string& dir, const char* what) {
  static std::atomic<unsigned> counter{0};
  return (fs::path(dir) / (std::string(".dcpbench-") + what + "." + std::to_string(::getpid()) + "." +
                           std::to_string(counter++) + ".tmp"))
      .string();
}

}  // namespace

std::string show_path(std::string_view path) {
  const std::string esc = escape_bytes(path);
  if (esc == path && path.size() <= 120 && !path.empty()) return esc;
  return quote(path, 120);
}

std::string read_file_bounded(const std::string& path, int64_t max_bytes, std::string_view what) {
  const std::string w(what);
  // O_NONBLOCK for the open only: a FIFO nobody writes to must not block here (a read of it then
  // sees end-of-file at once); reads below block as usual.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(show_path(path) + ": cannot open " + w + " (" + errno_text(errno) + ")");
  if (const int fl = ::fcntl(fd, F_GETFL); fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(show_path(path) + ": cannot read " + w + " (" + errno_text(errno) + ")");
  if (S_ISDIR(st.st_mode)) throw InputError(show_path(path) + ": is a directory, not a " + w);
  const std::string too_large = show_path(path) + ": " + w + " is larger than the limit of " + mib_text(max_bytes);
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes)
    throw InputError(too_large + " (" + std::to_string(st.st_size) + " bytes)");
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  std::vector<char> buf(1 << 16);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(show_path(path) + ": cannot read " + w + " (" + errno_text(errno) + ")");
    }
    if (n == 0) break;
    if (static_cast<int64_t>(out.size()) + n > max_bytes) throw InputError(too_large + " (read stopped there)");
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

void check_output_path(const std::string& path, std::string_view flag) {
  if (is_stdout_path(path)) return;
  if (path.empty()) throw InputError(subject(flag, path) + ": empty path (use - for stdout)");
  if (path.back() == '/') throw InputError(subject(flag, path) + ": names a folder, not a file");
  require_regular_or_absent(path, flag);
  require_folder(path, flag);
  // The file is written through a temporary file in its folder: check now that the folder can be
  // written (permissions and a read-only file system: access(2) says EROFS even to root), so it
  // fails before the work, not after it (stop 44: `run --out` on a read-only folder lost the whole
  // run at its end). Checked without creating anything: a refused path leaves its folder as it was;
  // probe_output_folder, run after every other check, catches what access(2) lets through.
  const std::string dir = folder_of(path);
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
    throw InputError(subject(flag, path) + ": cannot write a file in its folder " + quote(dir, 120) + " (" +
                     errno_text(errno) + ")");
}

void probe_output_folder(const std::string& path, std::string_view flag) {
  if (is_stdout_path(path)) return;
  const std::string dir = folder_of(path);
  const std::string probe = temp_name(dir, "probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    throw InputError(subject(flag, path) + ": cannot create a file in its folder " + quote(dir, 120) + " (" +
                     errno_text(errno) + ")");
  ::close(fd);
  if (::unlink(probe.c_str()) != 0)
    throw InputError(subject(flag, path) + ": cannot remove a file it created in its folder (" + show_path(probe) +
                     ": " + errno_text(errno) + ")");
}

namespace {
// Whether both paths exist and name the same file or folder (device and inode, links followed).
bool same_file(const std::string& a, const std::string& b) {
  struct stat x {}, y {};
  return ::stat(a.c_str(), &x) == 0 && ::stat(b.c_str(), &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}
}  // namespace

void check_output_not_input(const std::string& path, const std::vector<std::string>& inputs, std::string_view flag) {
  if (is_stdout_path(path)) return;
  for (const std::string& in : inputs)
    if (!is_stdout_path(in) && same_file(path, in))
      throw InputError(subject(flag, path) + ": is an input of this command (" + show_path(in) +
                       "); refusing to replace it (left untouched)");
}

void check_output_not_in_folder(const std::string& path, const std::string& folder, std::string_view what,
                                std::string_view flag) {
  if (!is_stdout_path(path) && same_file(folder_of(path), folder))
    throw InputError(subject(flag, path) + ": is inside " + std::string(what) + " " + show_path(folder) +
                     ", which this command reads every file of; refusing to write there");
}

void write_output(const std::string& path, std::string_view text, std::string_view flag) {
  if (is_stdout_path(path)) {
    std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::cout.flush();
    if (!std::cout.good()) throw InputError("stdout: write failed (" + errno_text(errno) + ")");
    return;
  }
  check_output_path(path, flag);
  const std::string tmp = temp_name(folder_of(path), "out");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0)
    throw InputError(subject(flag, path) + ": cannot create a temporary file in its folder (" + errno_text(errno) + ")");
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    throw InputError(subject(flag, path) + ": " + what + (err ? " (" + errno_text(err) + ")" : ""));
  };
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      fail("write failed", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) fail("write failed", errno);
  try {
    require_regular_or_absent(path, flag);  // it may have changed while we wrote
  } catch (const InputError&) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename the temporary file into place", errno);
}

void check_output_dir(const std::string& dir, std::string_view flag) {
  if (dir.empty()) throw InputError(subject(flag, dir) + ": empty path");
  // "-" is stdout for a file (write_output); a folder of charts cannot go there, and a folder
  // named "-" is almost surely that mistake (audit of helper-48): "./-" names one on purpose.
  if (dir == "-") throw InputError(subject(flag, dir) + ": a folder is needed here, not stdout (\"./-\" for a folder named -)");
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      throw InputError(subject(flag, dir) + ": is " + kind_of(st.st_mode) + ", not a folder (left untouched)");
    return;
  }
  if (errno != ENOENT) throw InputError(subject(flag, dir) + ": cannot check the path (" + errno_text(errno) + ")");
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  require_folder(trimmed, flag);
}

std::string make_staging_dir(const std::string& dir, std::string_view flag) {
  check_output_dir(dir, flag);
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const std::string staging = temp_name(folder_of(trimmed), "dir");
  if (::mkdir(staging.c_str(), 0777) != 0)
    throw InputError(subject(flag, dir) + ": cannot create a staging folder beside it (" + errno_text(errno) + ")");
  return staging;
}

void publish_dir(const std::string& staging, const std::string& dir, std::string_view flag) {
  std::error_code ec;
  struct Cleanup {
    const std::string& staging;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(staging, e);
    }
  } cleanup{staging};
  check_output_dir(dir, flag);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (::rename(staging.c_str(), dir.c_str()) != 0)
      throw InputError(subject(flag, dir) + ": cannot rename the staging folder into place (" + errno_text(errno) + ")");
    return;
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(staging, ec)) {
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  }
  if (ec) throw InputError(subject(flag, dir) + ": cannot list the staging folder (" + ec.message() + ")");
  for (const auto& n : names) require_regular_or_absent((fs::path(dir) / n).string(), flag);
  for (const auto& n : names) {
    const std::string target = (fs::path(dir) / n).string();
    if (::rename((fs::path(staging) / n).c_str(), target.c_str()) != 0)
      throw InputError(subject(flag, target) + ": cannot rename into place (" + errno_text(errno) + ")");
  }
}

}  // namespace dcp
