// `heapscope record [--every BYTES] [--slots N] -- PROGRAM ARGS…`: runs PROGRAM with heapscope's
// allocation-site recorder preloaded (recorder/heapscope_sites.c), so that any later core of it, or an
// attach, says where its sampled blocks were allocated. The program replaces heapscope (exec): its exit
// status, signals and terminal are its own, as under `env`.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace heapscope {

struct RecordOptions {
  std::uint64_t every = 0;  // HEAPSCOPE_SAMPLE_BYTES; 0: the recorder's default
  std::uint64_t slots = 0;  // HEAPSCOPE_SITES_SLOTS; 0: the recorder's default
  std::vector<std::string> program;
};

CLI::App* add_record_command(CLI::App& app, RecordOptions& options);

// Where `record`'s program starts in a command line whose argv[1] is "record": past record's own options
// and a "--" (then argv[program - 1] is "--"), argc when none follows. What comes from there on is the
// program's, verbatim, never parsed as heapscope's (`heapscope record -- prog -a --every 3`).
int record_program_start(int argc, char** argv);

// Execs the program; returns only on failure, with the exit status to use (the error said on stderr).
int run_record(const RecordOptions& options);

// The recorder library this heapscope uses: HEAPSCOPE_SITES_LIBRARY, else the one installed beside this
// executable (PREFIX/lib/heapscope/), else the build tree's. Empty, with *error set, when none exists.
std::string recorder_library(std::string* error);

}  // namespace heapscope
