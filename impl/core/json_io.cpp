// See json_io.h.
#include "core/json_io.h"

#include "core/error.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace dcp {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  DCP_REQUIRE(in.good(), path, ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for number overflow
    throw InputError(detail::concat(path, ": invalid JSON (", e.what(), ")"));
  }
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    DCP_REQUIRE(out.good(), path, ": cannot write file");
    out << text;
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      throw InputError(detail::concat(path, ": write failed"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(detail::concat(path, ": cannot rename temporary file into place"));
  }
}

void write_json_atomic(const std::string& path, const nlohmann::json& j, int indent) {
  write_file_atomic(path, j.dump(indent) + "\n");
}

}  // namespace dcp
