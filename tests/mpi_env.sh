# mpi_env.sh -- what every MPI test needs to start Open MPI's mpirun here:
# CI runs as root (Open MPI refuses root unless told twice), on 2 cores
# with up to 8 ranks (oversubscribed, so ranks yield instead of spinning),
# and in containers where ptrace-based single-copy is not allowed.
command -v mpirun >/dev/null 2>&1 || {
  echo "error: mpirun not found: install openmpi-bin (./bootstrap --deps)" >&2
  exit 99
}
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe
export OMPI_MCA_mpi_yield_when_idle OMPI_MCA_btl_vader_single_copy_mechanism
# the sanitizer build: Open MPI's own allocations at exit are not ours
if test -n "${SHARDQ_LSAN_SUPPRESSIONS:-}"; then :; fi
SQ_MPIRUN_FLAGS=${SQ_MPIRUN_FLAGS:-}
