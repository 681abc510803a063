// Bounded input files and the output-path policy shared by every command that reads or writes
// a file. Every failure is an InputError naming the path (escaped and shortened, text.h).
//
// Input: read_file_bounded() reads at most `max_bytes` (a larger file, or an endless one such as
// /dev/zero, is refused with the limit in the message before it fills memory); directories are
// refused; pipes and devices are read like files, up to the limit.
//
// Output (`--out` of every command): one policy, so no command can replace a device node,
// follow a symlink or leave half a file behind.
//   "-"                                     -> stdout
//   ""                                      -> error
//   a regular file                          -> replaced atomically (temp file in the same
//                                              folder, then rename)
//   a new path in an existing folder        -> created atomically
//   a directory, device, FIFO, socket, symbolic link, or a path whose folder does not
//   exist (no folder is ever created)       -> error, and the path is left untouched
// write_output() checks the target again just before the rename.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dcp {

// The path as it appears at the start of a message: escaped, and quoted + cut when long or odd.
std::string show_path(std::string_view path);

// Reads the whole file, refusing more than max_bytes. `what` names the file's role in messages
// ("lengths file", "scenario").
std::string read_file_bounded(const std::string& path, int64_t max_bytes, std::string_view what);

inline bool is_stdout_path(std::string_view path) { return path == "-"; }

// Throws InputError if `path` may not be written under the policy above. `flag` (e.g. "--out")
// starts the message when non-empty. Call it before long work so a bad --out fails at once.
void check_output_path(const std::string& path, std::string_view flag = "--out");

// The last check before the work, after every other check of the output and of the input: creates
// and removes an empty temporary file in the folder of `path` (nothing for stdout), and throws
// InputError naming the path if the folder does not take one. check_output_path's access(2) test
// creates nothing but is not enough: as root it passes on a pseudo file system (/proc, /sys) where
// no regular file can be created (stop 45: `converge --out /proc/x` trained 33 s before exit 2).
// Run last, so that bad input or a path another check refuses leaves the folder untouched (its
// modification time included).
void probe_output_folder(const std::string& path, std::string_view flag = "--out");

// Throws InputError if `path` names the same file as one of `inputs` (the files the command reads:
// a scenario, a lengths file, a results file), compared by device and inode, so `--out` never
// replaces what it was given ("run s.json --out s.json" turned the scenario into a results file).
// Stdout, absent paths and absent inputs pass. Call it with check_output_path, before any work
// (and before probe_output_folder).
void check_output_not_input(const std::string& path, const std::vector<std::string>& inputs,
                            std::string_view flag = "--out");

// Throws InputError if `path` would be written into `folder` (same device and inode of the
// folder), a folder the command reads every file of (conform's cases, converge's corpus): it
// would replace one of them, or be read as one the next time. `what` names the folder's role.
void check_output_not_in_folder(const std::string& path, const std::string& folder, std::string_view what,
                                std::string_view flag = "--out");

// Writes `text` to `path` under the policy ("-" = stdout). Nothing is left behind on failure.
void write_output(const std::string& path, std::string_view text, std::string_view flag = "--out");

// Output folders (a command writing several files, e.g. `plot --out DIR`): an existing directory
// (not a symlink) or a new path whose folder exists. Throws InputError otherwise.
void check_output_dir(const std::string& dir, std::string_view flag = "--out");

// Moves every regular file of `staging` (a folder the caller created next to `dir` and filled)
// into `dir`: if `dir` does not exist, `staging` is renamed to it; otherwise every target is
// checked with the output-file policy first, and only then are the files renamed in. `staging` is
// removed in every case. Throws InputError (nothing moved) if a target is not a regular file.
void publish_dir(const std::string& staging, const std::string& dir, std::string_view flag = "--out");

// A new empty folder next to `dir` (same file system, so publish_dir can rename), for staging.
std::string make_staging_dir(const std::string& dir, std::string_view flag = "--out");

}  // namespace dcp
