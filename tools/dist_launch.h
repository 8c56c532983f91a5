#pragma once
// `graft train --nproc N`: runs the same command under `mpirun -np N` (data-parallel, one rank
// per process). mpirun is given --bind-to none (on a small machine it would pin each rank to
// one core), --oversubscribe when N exceeds the cores, and --allow-run-as-root for root, which
// Open MPI otherwise refuses. The ranks set their own thread counts (cores / ranks per node).
namespace graft::tools {

// True when a launcher (mpirun) started this process.
bool launched_by_mpirun();
// Replaces this process with mpirun; returns only on failure (with an exit code).
int relaunch_under_mpirun(int nproc, int argc, char** argv);

}  // namespace graft::tools
