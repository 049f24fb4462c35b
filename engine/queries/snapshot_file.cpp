#include "queries/snapshot_file.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/json_text.h"
#include "session/session.h"

namespace heapscope {

namespace {

using nlohmann::json;

json to_json(const HeapSnapshot& s) {
  json types = json::array(), roots = json::array(), blocks = json::array();
  for (const SnapshotTypeTotal& t : s.types) types.push_back({{"type", t.type}, {"count", t.count}, {"bytes", t.bytes}});
  json sites = json::array();
  for (const SnapshotTypeTotal& t : s.sites) sites.push_back({{"site", t.type}, {"count", t.count}, {"bytes", t.bytes}});
  for (const SnapshotRootTotal& r : s.roots)
    roots.push_back({{"root", r.root}, {"kind", r.kind}, {"blocks", r.blocks}, {"bytes", r.bytes}});
  // Three numbers per block keep a file of a million blocks near 30 MB.
  for (const SnapshotBlock& b : s.blocks) blocks.push_back(json::array({b.address, b.size_units, b.type_and_flag}));
  return {{"heapscope_snapshot", kSnapshotFileVersion},
          {"name", s.name},
          {"target", s.target},
          {"pid", s.pid},
          {"capture_time_ns", s.capture_time_ns},
          {"in_use_blocks", s.in_use_blocks},
          {"in_use_bytes", s.in_use_bytes},
          {"types", std::move(types)},
          {"sites", std::move(sites)},
          {"roots", std::move(roots)},
          {"blocks", std::move(blocks)},
          {"warnings", s.warnings}};
}

HeapSnapshot from_json(const json& j) {
  if (!j.is_object() || j.value("heapscope_snapshot", 0) != kSnapshotFileVersion)
    throw std::invalid_argument("not a heapscope snapshot file of version " + std::to_string(kSnapshotFileVersion));
  HeapSnapshot s;
  s.name = j.at("name").get<std::string>();
  s.target = j.at("target").get<std::string>();
  s.pid = j.at("pid").get<int>();
  s.capture_time_ns = j.at("capture_time_ns").get<std::int64_t>();
  s.in_use_blocks = j.at("in_use_blocks").get<std::uint64_t>();
  s.in_use_bytes = j.at("in_use_bytes").get<std::uint64_t>();
  s.warnings = j.value("warnings", std::vector<std::string>{});
  for (const json& t : j.at("types"))
    s.types.push_back({t.at("type").get<std::string>(), t.at("count").get<std::uint64_t>(), t.at("bytes").get<std::uint64_t>()});
  if (j.contains("sites"))  // files written before allocation sites have none
    for (const json& t : j.at("sites"))
      s.sites.push_back({t.at("site").get<std::string>(), t.at("count").get<std::uint64_t>(), t.at("bytes").get<std::uint64_t>()});
  for (const json& r : j.at("roots"))
    s.roots.push_back({r.at("root").get<std::string>(), r.at("kind").get<std::string>(),
                       r.at("blocks").get<std::uint64_t>(), r.at("bytes").get<std::uint64_t>()});
  Address previous = 0;
  for (const json& b : j.at("blocks")) {
    SnapshotBlock block{b.at(0).get<Address>(), b.at(1).get<std::uint32_t>(), b.at(2).get<std::uint32_t>()};
    if (block.type() >= s.types.size()) throw std::invalid_argument("a block names a type the file does not list");
    if (!s.blocks.empty() && block.address <= previous) throw std::invalid_argument("blocks are not in address order");
    previous = block.address;
    s.blocks.push_back(block);
  }
  return s;
}

}  // namespace

void write_snapshot_file(const std::string& path, const HeapSnapshot& snapshot) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << json_text(to_json(snapshot)) << "\n";
  if (!out) throw AnalysisError("cannot write " + path + ": " + std::strerror(errno));
}

HeapSnapshot read_snapshot_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw AnalysisError("cannot read " + path + ": " + std::strerror(errno));
  try {
    return from_json(json::parse(in));
  } catch (const std::exception& e) {  // parse errors, missing fields, wrong types
    throw AnalysisError(path + " is not a usable snapshot file: " + e.what());
  }
}

}  // namespace heapscope
