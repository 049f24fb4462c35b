// heapscope._heapscope: the engine behind the Python package (frontends/python/heapscope). It only adapts:
// sessions over a core, a process it stops itself (attach) or one a debugger keeps stopped, command lines
// run through the command table exactly as the CLI and the debuggers run them, and the `blocks` command's
// selection handed out as numpy columns instead of a rendered report (commands/block_columns.h).
//
// A command runs on a worker thread while the calling thread, the GIL released, serves it every 50 ms
// (base/serving_thread.h): it checks Python's signals, so Ctrl-C stops the command and is raised as the
// KeyboardInterrupt Python would raise, and it calls the progress callback. What the session had finished
// is kept for the next call.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/serving_thread.h"
#include "base/workers.h"
#include "commands/block_columns.h"
#include "commands/command_line.h"
#include "frontends/common/cache_settings.h"
#include "frontends/common/target_keys.h"
#include "frontends/common/target_options.h"
#include "frontends/common/thread_pointers.h"
#include "sources/elf_core_image.h"
#include "sources/live_process_image.h"
#include "sources/ptrace_attach.h"

namespace py = pybind11;
using namespace heapscope;

namespace {

// heapscope.Error: what the CLI would print as "heapscope: <message>" and exit 1 for.
struct HeapscopeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A column handed to numpy without a copy: the array owns the vector through a capsule.
template <class T>
py::array_t<T> column(std::vector<T>&& values) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule release(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(static_cast<py::ssize_t>(owned->size()), owned->data(), release);
}

// A column of `n` values filled by the caller, owned by the numpy array it becomes. Left uninitialised
// until then (zeroing 5M entries first would cost as much again as writing them); a large one is mapped
// with transparent huge pages asked for, since at 5M blocks most of the columns' time is otherwise the
// kernel's, handing out and zeroing a 4 KiB page at a time.
template <class T>
class RawColumn {
 public:
  explicit RawColumn(std::size_t n) : size_(n), bytes_(std::max<std::size_t>(n * sizeof(T), sizeof(T))) {
    if (bytes_ >= kHugePage) {
      bytes_ = (bytes_ + kHugePage - 1) / kHugePage * kHugePage;
      void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      ::madvise(p, bytes_, MADV_HUGEPAGE);  // a hint: without it, 4 KiB pages
      values_ = static_cast<T*>(p);
      mapped_ = true;
    } else {
      values_ = new T[n ? n : 1];
    }
  }
  ~RawColumn() { free(values_, bytes_, mapped_); }
  RawColumn(const RawColumn&) = delete;
  RawColumn& operator=(const RawColumn&) = delete;

  T& operator[](std::size_t i) { return values_[i]; }
  py::array_t<T> release() {
    auto* owned = new Owned{values_, bytes_, mapped_};
    values_ = nullptr;
    py::capsule owner(owned, [](void* p) {
      const Owned* o = static_cast<Owned*>(p);
      free(o->values, o->bytes, o->mapped);
      delete o;
    });
    return py::array_t<T>(static_cast<py::ssize_t>(size_), owned->values, owner);
  }

 private:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  struct Owned {
    T* values;
    std::size_t bytes;
    bool mapped;
  };
  static void free(T* values, std::size_t bytes, bool mapped) {
    if (!values) return;
    if (mapped)
      ::munmap(values, bytes);
    else
      delete[] values;
  }

  T* values_ = nullptr;
  std::size_t size_;
  std::size_t bytes_;
  bool mapped_ = false;
};

using BlockIdArray = py::array_t<BlockId, py::array::c_style | py::array::forcecast>;

std::span<const BlockId> block_ids(const BlockIdArray& ids) {
  return {ids.data(), static_cast<std::size_t>(ids.size())};
}

// Runs `work` on a worker thread with `progress` reporting to the Python callback `on_progress` (None:
// nothing shown) and Ctrl-C stopping it; rethrows, with the GIL held, a KeyboardInterrupt (or what the
// callback raised) after the work has stopped.
class PythonServing {
 public:
  PythonServing(Progress& progress, py::object on_progress)
      : progress_(progress), on_progress_(std::move(on_progress)) {
    progress_.set_interrupt_check([this] { return stop_.load(); });
    if (!on_progress_.is_none())
      progress_.set_display([this](const ProgressStatus& status) {
        std::lock_guard lock(mutex_);
        if (status.done) done_ = true;
        else pending_ = status;
      });
  }
  ~PythonServing() {
    progress_.set_interrupt_check({});
    progress_.set_display({});
  }
  PythonServing(const PythonServing&) = delete;
  PythonServing& operator=(const PythonServing&) = delete;

  bool has_display() const { return !on_progress_.is_none(); }

  void run(const std::function<void()>& work) {
    ServingThread serving;
    std::exception_ptr failed;
    {
      py::gil_scoped_release unlocked;
      try {
        serving.run_serving(work, [this] { serve(); });
      } catch (...) {
        failed = std::current_exception();
      }
    }
    serve();  // the last status: done
    if (raised_) {  // Ctrl-C, or the callback's own exception: it is why the work stopped
      py::error_already_set raised = std::move(*raised_);
      raised_.reset();
      throw raised;
    }
    if (failed) std::rethrow_exception(failed);
  }

 private:
  // On the calling thread, every 50 ms.
  void serve() {
    py::gil_scoped_acquire locked;
    if (!raised_ && PyErr_CheckSignals() != 0) stop_with(py::error_already_set());
    // The newest line, then "done" if the command has ended: a command quicker than one serving still has
    // its last line told before its end.
    std::optional<ProgressStatus> status;
    bool done = false;
    {
      std::lock_guard lock(mutex_);
      status.swap(pending_);
      std::swap(done, done_);
    }
    try {
      if (status && !raised_)
        on_progress_(status->text(), status->fraction < 0 ? py::object(py::none()) : py::float_(status->fraction),
                     false);
      if (done && !raised_) on_progress_(py::none(), py::none(), true);
    } catch (py::error_already_set& e) {
      stop_with(std::move(e));
    }
  }

  void stop_with(py::error_already_set&& error) {
    raised_.emplace(std::move(error));
    stop_ = true;
  }

  Progress& progress_;
  py::object on_progress_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::optional<ProgressStatus> pending_;  // the newest line not yet told
  bool done_ = false;                      // the command has ended, not yet told
  std::optional<py::error_already_set> raised_;
};

std::vector<std::string> verdict_names();

// One Python Session: the engine's Session, and for attach() the process it keeps stopped.
class PySession {
 public:
  PySession(std::unique_ptr<Session> session, std::unique_ptr<StoppedProcess> stopped = nullptr)
      : session_(std::move(session)), stopped_(std::move(stopped)) {}

  // The command's output (JSON unless the words ask for another format or a file).
  std::string run(const std::vector<std::string>& words, py::object on_progress) {
    Session& s = live();
    PythonServing serving(s.progress(), std::move(on_progress));
    CommandResult result;
    serving.run([&] { result = execute_command_line(s, words, serving.has_display()); });
    if (result.exit_code != 0) throw HeapscopeError(result.error);
    return result.output;
  }

  // The `blocks` selection (words as after "blocks") as columns: address, usable size and state (the
  // rest — chunks, types, sites — on demand, from the block ids).
  py::dict blocks(const std::vector<std::string>& words, py::object on_progress) {
    Session& s = live();
    PythonServing serving(s.progress(), std::move(on_progress));
    BlockSelection selection;
    std::optional<RawColumn<Address>> address;
    std::optional<RawColumn<std::uint64_t>> size;
    std::optional<RawColumn<std::uint8_t>> state;
    std::vector<std::string> warnings;
    serving.run([&] {
      guarded([&] {
        in_phase(s, serving, [&] {
          selection = select_blocks(s, words);
          const auto& blocks = s.heap().blocks;
          const std::size_t n = selection.blocks.size();
          address.emplace(n), size.emplace(n), state.emplace(n);
          // On all cores: at 5M blocks most of the time is the kernel handing out the columns' fresh pages.
          const unsigned workers = worker_count(n, kBlocksPerWorker);
          run_workers(workers, [&](unsigned w) {
            const auto [first, last] = slice_of(n, workers, w);
            for (std::size_t k = first; k < last; ++k) {
              const Block& b = blocks[selection.blocks[k]];
              (*address)[k] = b.address();
              (*size)[k] = b.usable_size();
              (*state)[k] = static_cast<std::uint8_t>(b.state);
            }
          });
          warnings = s.warnings_with({});
        });
      });
    });
    py::dict out;
    out["matched"] = selection.matched;
    out["address"] = address->release();
    out["size"] = size->release();
    out["state"] = state->release();
    if (!selection.verdicts.empty()) {  // by leak verdict: each block's, as an index into verdict_names
      std::vector<std::string> names = verdict_names();
      std::vector<std::uint8_t> verdict(selection.verdicts.size());
      for (std::size_t k = 0; k < verdict.size(); ++k)
        verdict[k] = static_cast<std::uint8_t>(std::find(names.begin(), names.end(), selection.verdicts[k]) - names.begin());
      std::vector<std::uint8_t> possibly(selection.possibly.begin(), selection.possibly.end());
      out["verdict"] = column(std::move(verdict));
      out["verdict_names"] = names;
      out["possibly"] = column(std::move(possibly));
    }
    out["ids"] = column(std::move(selection.blocks));
    out["warnings"] = warnings;
    return out;
  }

  // The chunks of blocks `ids`: (chunk addresses, chunk sizes), headers included.
  py::tuple chunks(const BlockIdArray& ids) {
    Session& s = live();
    check_ids(ids);
    const std::span<const BlockId> wanted = block_ids(ids);
    RawColumn<Address> chunk(wanted.size());
    RawColumn<std::uint64_t> chunk_size(wanted.size());
    const auto& blocks = s.heap().blocks;
    for (std::size_t k = 0; k < wanted.size(); ++k) {
      chunk[k] = blocks[wanted[k]].chunk;
      chunk_size[k] = blocks[wanted[k]].chunk_size();
    }
    return py::make_tuple(chunk.release(), chunk_size.release());
  }

  // The type names of blocks `ids` (block_type_column): (type ids, names, namings).
  py::tuple types(const BlockIdArray& ids, py::object on_progress) {
    TypeColumn types = per_block(ids, std::move(on_progress), block_type_column);
    return py::make_tuple(column(std::move(types.ids)), types.names, types.namings);
  }

  // The allocation sites of blocks `ids` (block_site_column): (site ids, labels).
  py::tuple sites(const BlockIdArray& ids, py::object on_progress) {
    SiteColumn sites = per_block(ids, std::move(on_progress), block_site_column);
    return py::make_tuple(column(std::move(sites.ids)), sites.labels);
  }

  // Lets an attached process run on (idempotent); the session is closed first, as it reads the process.
  void close() {
    session_.reset();
    if (stopped_) stopped_->detach();
    stopped_.reset();
  }
  bool closed() const { return !session_; }
  bool attached() const { return stopped_ != nullptr; }

  // Writes the index cache of a core when a command computed what it holds (docs/usage.md).
  bool save_index() {
    Session& s = live();
    if (!s.index_cache_outdated()) return false;
    py::gil_scoped_release unlocked;
    s.save_index_cache();
    return true;
  }

 private:
  Session& live() {
    if (!session_) throw HeapscopeError("the session is closed");
    return *session_;
  }

  // A column of blocks `ids`, computed as a command computes (progress, Ctrl-C, errors).
  template <class Column>
  Column per_block(const BlockIdArray& ids, py::object on_progress, Column (*compute)(Session&, std::span<const BlockId>)) {
    Session& s = live();
    check_ids(ids);
    PythonServing serving(s.progress(), std::move(on_progress));
    Column result;
    serving.run([&] { guarded([&] { in_phase(s, serving, [&] { result = compute(s, block_ids(ids)); }); }); });
    return result;
  }

  void check_ids(const BlockIdArray& ids) {
    const std::size_t count = live().heap().blocks.size();
    for (BlockId id : block_ids(ids))
      if (id >= count) throw py::index_error("block id " + std::to_string(id) + " is not one of this heap's blocks");
  }

  template <class Fn>
  static void in_phase(Session& s, PythonServing& serving, Fn&& fn) {
    s.progress().begin(serving.has_display());
    ProgressScope current(&s.progress());
    struct End {
      Progress& p;
      ~End() { p.end(); }
    } end{s.progress()};
    fn();
  }

  // What a command's runner would turn into an error result, as an exception for the calling thread.
  template <class Fn>
  void guarded(Fn&& fn) {
    try {
      fn();
    } catch (const Interrupted& e) {
      throw HeapscopeError(e.what());
    } catch (const AnalysisError& e) {
      const std::string damage = session_->image().damage();
      throw HeapscopeError(damage.empty() ? std::string(e.what()) : damage + " (and so: " + e.what() + ")");
    }
  }

  std::unique_ptr<Session> session_;
  std::unique_ptr<StoppedProcess> stopped_;
};

TargetOptions target_options(const std::vector<std::string>& words) {
  TargetOptions target;
  std::string error;
  if (!parse_target_options(words, &target, &error)) throw HeapscopeError(error);
  return target;
}

std::unique_ptr<Session> new_session(std::shared_ptr<const Image> image, const TargetOptions& target,
                                     const std::string& key) {
  SessionOptions options = session_options(target);
  options.snapshots = snapshot_store_for(key);
  return std::make_unique<Session>(std::move(image), options);
}

// A core, opened as the CLI opens it (its index cache too, when `cache`); decompressing one runs with
// progress and Ctrl-C like a command.
PySession open_core(const std::string& core, const std::vector<std::string>& option_words, bool cache,
                    py::object on_progress) {
  use_file_caches();
  const TargetOptions target = target_options(option_words);
  Progress progress;
  PythonServing serving(progress, std::move(on_progress));
  std::shared_ptr<ElfCoreImage> image;
  std::string error;
  serving.run([&] {
    progress.begin(serving.has_display());
    ProgressScope current(&progress);
    try {
      image = ElfCoreImage::open(core, core_open_options(target), &error);
    } catch (const Interrupted&) {
      error = "interrupted";
    }
    progress.end();
  });
  if (!image) throw HeapscopeError(error);
  SessionOptions options = session_options(target);
  options.snapshots = snapshot_store_for(core_target_key(core));
  options.state_name = std::filesystem::path(core).filename().string();
  options.index_cache = index_cache_for(core, cache);
  return PySession(std::make_unique<Session>(std::move(image), options));
}

// Stops a running process (every thread seized, nothing written) until the session is closed.
PySession attach(int pid, const std::vector<std::string>& option_words) {
  use_file_caches();
  const TargetOptions target = target_options(option_words);
  std::string error;
  std::unique_ptr<StoppedProcess> stopped;
  {
    py::gil_scoped_release unlocked;
    stopped = StoppedProcess::stop(pid, &error);
  }
  if (!stopped) throw HeapscopeError(error);
  LiveProcessOptions open_options;
  open_options.executable = target.executable;
  std::shared_ptr<LiveProcessImage> image = LiveProcessImage::open(pid, stopped->threads(), open_options, &error);
  if (!image) throw HeapscopeError(error);  // `stopped` detaches as it goes
  return PySession(new_session(std::move(image), target, process_target_key(pid)), std::move(stopped));
}

// One thread of a process a debugger keeps stopped: (tid, general registers in register_names() order,
// vector lanes read (0, 2 or 4), sixteen vector registers of four 8-byte lanes each). An fs_base of 0 is
// one the debugger does not show: it is read from glibc's thread list.
using DebuggerThread = std::tuple<std::uint32_t, std::vector<std::uint64_t>, int, std::vector<std::vector<std::uint64_t>>>;

PySession open_stopped(int pid, const std::vector<DebuggerThread>& threads, const std::vector<std::string>& option_words) {
  use_file_caches();
  const TargetOptions target = target_options(option_words);
  std::vector<ThreadState> states(threads.size());
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const auto& [tid, registers, lanes_read, vectors] = threads[i];
    states[i].tid = tid;
    if (registers.size() != states[i].regs.size())
      throw py::value_error("thread " + std::to_string(tid) + ": " + std::to_string(registers.size()) +
                            " registers given, register_names() has " + std::to_string(states[i].regs.size()));
    std::copy(registers.begin(), registers.end(), states[i].regs.begin());
    if (lanes_read != 0 && lanes_read != VectorRegisters::kXmmLanes && lanes_read != VectorRegisters::kYmmLanes)
      throw py::value_error("vector lanes read must be 0, 2 or 4");
    states[i].vector.lanes_read = lanes_read;
    for (std::size_t r = 0; r < vectors.size() && r < static_cast<std::size_t>(VectorRegisters::kRegisters); ++r)
      for (std::size_t l = 0; l < vectors[r].size() && l < static_cast<std::size_t>(VectorRegisters::kYmmLanes); ++l)
        states[i].vector.lanes[r][l] = vectors[r][l];
  }
  LiveProcessOptions open_options;
  open_options.executable = target.executable;
  std::string error;
  std::shared_ptr<LiveProcessImage> image = LiveProcessImage::open(pid, std::move(states), open_options, &error);
  if (!image) throw HeapscopeError(error);
  {
    py::gil_scoped_release unlocked;
    complete_thread_pointers(*image, session_options(target).symbols);  // LLDB shows no fs_base
  }
  return PySession(new_session(std::move(image), target, process_target_key(pid)));
}

std::vector<std::string> register_names() {
  std::vector<std::string> names;
  for (int r = 0; r < static_cast<int>(Reg::count); ++r) names.emplace_back(register_name(static_cast<Reg>(r)));
  return names;
}

std::vector<std::string> verdict_names() {
  std::vector<std::string> names;
  for (int v = 0; v <= static_cast<int>(Verdict::cycle_leak); ++v) names.emplace_back(verdict_name(static_cast<Verdict>(v)));
  return names;
}

std::vector<std::string> state_names() {
  std::vector<std::string> names;
  for (int s = 0; s < kBlockStateCount; ++s) names.emplace_back(block_state_name(static_cast<BlockState>(s)));
  return names;
}

std::vector<std::pair<std::string, std::string>> commands() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CommandEntry& e : command_table()) out.emplace_back(e.name, e.description);
  return out;
}

}  // namespace

PYBIND11_MODULE(_heapscope, m) {
  m.doc() = "heapscope's engine for the heapscope package (use the package, not this module)";
  py::register_exception<HeapscopeError>(m, "Error", PyExc_RuntimeError);
  py::class_<PySession>(m, "Session")
      .def("run", &PySession::run, py::arg("words"), py::arg("progress") = py::none())
      .def("blocks", &PySession::blocks, py::arg("words"), py::arg("progress") = py::none())
      .def("types", &PySession::types, py::arg("ids"), py::arg("progress") = py::none())
      .def("sites", &PySession::sites, py::arg("ids"), py::arg("progress") = py::none())
      .def("chunks", &PySession::chunks, py::arg("ids"))
      .def("save_index", &PySession::save_index)
      .def("close", &PySession::close)
      .def_property_readonly("closed", &PySession::closed)
      .def_property_readonly("attached", &PySession::attached);
  m.def("open_core", &open_core, py::arg("core"), py::arg("options"), py::arg("cache"), py::arg("progress") = py::none());
  m.def("attach", &attach, py::arg("pid"), py::arg("options"));
  m.def("open_stopped", &open_stopped, py::arg("pid"), py::arg("threads"), py::arg("options"));
  m.def("split_command", &split_command_words, py::arg("text"));
  m.def("command_help", [](const std::string& name) { return command_help(name, "heapscope"); }, py::arg("name") = "");
  m.def("commands", &commands);
  m.def("register_names", &register_names);
  m.def("state_names", &state_names);
}
