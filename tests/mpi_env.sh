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
# The sanitizer build: Open MPI keeps allocations until exit, some made in
# components it unloads (whose frames LeakSanitizer could then not name):
# keep the components loaded, unwind through libraries without frame
# pointers (the stacks that pass through MPI's own libraries are suppressed
# by tests/lsan.supp, which every test gets).
OMPI_MCA_mca_base_component_disable_dlclose=1
export OMPI_MCA_mca_base_component_disable_dlclose
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS ASAN_OPTIONS
# ranks that a daemon on another (namespace) node starts get these too
# (each must be set, or Open MPI warns)
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export UBSAN_OPTIONS
OMPI_MCA_mca_base_env_list="LSAN_OPTIONS;ASAN_OPTIONS;UBSAN_OPTIONS"
export OMPI_MCA_mca_base_env_list
SQ_MPIRUN_FLAGS=${SQ_MPIRUN_FLAGS:-}
