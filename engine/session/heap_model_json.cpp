#include "session/heap_model_json.h"

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace heapscope {

// A field added to one of these structures must be saved below (and the index format version bumped):
// these sizes fail to compile until then.
static_assert(sizeof(HeapModel) == 976 && sizeof(HeapSegment) == 16);
static_assert(sizeof(ArenaInfo) == 184 && sizeof(StateTotal) == 16 && sizeof(WalkStop) == 24);
static_assert(sizeof(Discovery) == 72 && sizeof(MallInfo) == 80 && sizeof(TrimSettings) == 16);
static_assert(sizeof(AllocatorFigure) == 96 && sizeof(SizeClassUse) == 48 && sizeof(FreePages) == 80);
static_assert(sizeof(CollectorRules) == 136 && sizeof(InterpreterFrame) == 120);

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StateTotal, blocks, bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HeapSegment, start, end)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WalkStop, heap, chunk, last_good)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ArenaInfo, address, is_main, heaps, system_bytes, overhead_bytes, totals, complete,
                                   walk_stops)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Discovery, structure, address, method)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MallInfo, arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks,
                                   fordblks, keepcost)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(InterpreterFrame::Local, at, name)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(InterpreterFrame, tid, function, file, line, start, end, locals)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrimSettings, threshold, pad)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SizeClassUse, object_bytes, slabs, slab_bytes, in_use, cached, free)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FreePages, kind, meaning, runs, bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CollectorRules, name, arena, page_bytes, module_data_roots, interior_pointers, anonymous_roots, valid_offsets,
                                   registered_roots, excluded_roots, code)

namespace {

using nlohmann::json;

template <class T>
json optional_to_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}
template <class T>
std::optional<T> optional_from_json(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<T>();
}

json figure_to_json(const AllocatorFigure& f) {
  return {{"name", f.name}, {"meaning", f.meaning}, {"own", optional_to_json(f.own)}, {"walk", optional_to_json(f.walk)}};
}
AllocatorFigure figure_from_json(const json& j) {
  AllocatorFigure f;
  f.name = j.at("name").get<std::string>();
  f.meaning = j.at("meaning").get<std::string>();
  f.own = optional_from_json<std::uint64_t>(j.at("own"));
  f.walk = optional_from_json<std::uint64_t>(j.at("walk"));
  return f;
}

}  // namespace

std::string heap_meta_to_json(const HeapModel& heap) {
  json figures = json::array();
  for (const AllocatorFigure& f : heap.figures) figures.push_back(figure_to_json(f));
  const json j = {
      {"allocator", heap.allocator},
      {"version", heap.version},
      {"arenas", heap.arenas},
      {"metadata", heap.metadata},
      {"reserved", heap.reserved},
      {"not_roots", heap.not_roots},
      {"interpreter_frames", heap.interpreter_frames},
      {"mmapped_total", heap.mmapped_total},
      {"mmapped_chunks", heap.mmapped_chunks},
      {"discovery", heap.discovery},
      {"warnings", heap.warnings},
      {"mallinfo", optional_to_json(heap.mallinfo)},
      {"state_labels", heap.state_labels},
      {"terms", {{"arena", heap.terms.arena}, {"heaps", heap.terms.heaps}, {"slab", heap.terms.slab},
                 {"cached", heap.terms.cached}, {"cached_meaning", heap.terms.cached_meaning}}},
      {"figures", figures},
      {"size_classes", heap.size_classes},
      {"free_pages", heap.free_pages},
      {"trim", optional_to_json(heap.trim)},
      {"collector", optional_to_json(heap.collector)},
      {"complete", heap.complete},
  };
  return json_text(j);
}

bool heap_meta_from_json(const std::string& text, HeapModel& heap) {
  try {
    const json j = json::parse(text);
    heap.allocator = j.at("allocator").get<std::string>();
    heap.version = j.at("version").get<std::string>();
    heap.arenas = j.at("arenas").get<std::vector<ArenaInfo>>();
    heap.metadata = j.at("metadata").get<std::vector<HeapSegment>>();
    heap.reserved = j.at("reserved").get<std::vector<HeapSegment>>();
    heap.not_roots = j.at("not_roots").get<std::vector<HeapSegment>>();
    heap.interpreter_frames = j.at("interpreter_frames").get<std::vector<InterpreterFrame>>();
    heap.mmapped_total = j.at("mmapped_total").get<StateTotal>();
    heap.mmapped_chunks = j.at("mmapped_chunks").get<StateTotal>();
    heap.discovery = j.at("discovery").get<std::vector<Discovery>>();
    heap.warnings = j.at("warnings").get<std::vector<std::string>>();
    heap.mallinfo = optional_from_json<MallInfo>(j.at("mallinfo"));
    heap.state_labels = j.at("state_labels").get<StateLabels>();
    const json& terms = j.at("terms");
    heap.terms = {terms.at("arena").get<std::string>(), terms.at("heaps").get<std::string>(),
                  terms.at("slab").get<std::string>(), terms.at("cached").get<std::string>(),
                  terms.at("cached_meaning").get<std::string>()};
    heap.figures.clear();
    for (const json& f : j.at("figures")) heap.figures.push_back(figure_from_json(f));
    heap.size_classes = j.at("size_classes").get<std::vector<SizeClassUse>>();
    heap.free_pages = j.at("free_pages").get<std::vector<FreePages>>();
    heap.trim = optional_from_json<TrimSettings>(j.at("trim"));
    heap.collector = optional_from_json<CollectorRules>(j.at("collector"));
    heap.complete = j.at("complete").get<bool>();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

}  // namespace heapscope
