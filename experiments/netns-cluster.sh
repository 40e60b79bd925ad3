#!/bin/bash
# netns-cluster.sh -- a cluster of K "nodes" on one machine, for running MPI
# jobs over a real network: each node is a network namespace with its own
# hostname, joined to a bridge in a switch namespace by a veth pair whose
# node-side egress is shaped with tc (rate and delay). mpirun runs inside
# node 0 and starts the other nodes' daemons through this script itself (the
# `agent` command, Open MPI's plm_rsh_agent), which enters the node's
# namespace with `ip netns exec` instead of ssh. Run it with --help.
#
# Why namespaces: ranks of one node talk through shared memory as on a real
# host, ranks of two nodes through TCP over the veths, so the inter-node
# traffic of a job passes the shaped links (and can be counted there) while
# the intra-node traffic does not.
#
# Nothing of the machine's own network is touched: every interface is
# created inside a namespace of the cluster (never in the caller's), the only
# addresses are in 198.18.0.0/15 (RFC 2544's range for network benchmarks),
# and the namespaces have no route out. Outside the namespaces the cluster
# has files only: its directory (under $TMPDIR), /dev/shm/PREFIX, and
# /etc/netns/PREFIX-n<k>/ (the nodes' /etc/hosts, see write_etc_netns).
# `down` removes every namespace (and with them the veths, the bridge and
# the qdiscs), every process left inside them, and those files.
#
# Needs bash, root, iproute2 (ip, tc), util-linux (unshare), coreutils
# (timeout) and Open MPI's mpirun (Debian: openmpi-bin).

# The sh -c '...' scripts below expand their own positional parameters.
# shellcheck disable=SC2016
set -eu
# $(...) keeps set -e (bash drops it there otherwise): `dir=$(cmd_up)` must
# stop at the first failing step of up.
shopt -s inherit_errexit

prog=netns-cluster.sh

usage() {
  cat <<'USAGE'
usage: netns-cluster.sh [options] up
       netns-cluster.sh [options] run-once [--timeout S] -- CMD [ARG...]
       netns-cluster.sh --dir DIR run [--timeout S] -- CMD [ARG...]
       netns-cluster.sh --dir DIR exec K [--timeout S] -- CMD [ARG...]
       netns-cluster.sh --dir DIR pids K
       netns-cluster.sh --dir DIR status
       netns-cluster.sh --dir DIR down

A cluster of K nodes on this machine: network namespaces with their own
hostnames, joined through a bridge by veth pairs whose node-side egress is
shaped with tc, and Open MPI configured to launch across them (no ssh).

commands:
  up        create the cluster; prints its directory DIR (the only output on
            stdout), which names it in the commands below
  run       run CMD in node 0 with the cluster's Open MPI settings in its
            environment: `run -- mpirun -np 8 ./prog` starts 8 ranks, G per
            node, on the cluster (the hostfile, the launch agent and the TCP
            interfaces come from the environment, see DIR/mpi.env)
  run-once  up, run, down: the cluster exists for CMD only and is removed on
            every exit path (also on SIGINT and SIGTERM); exits with CMD's status
  exec K    run CMD in node K (its namespace and hostname), e.g. a shell
  pids K    the processes inside node K's namespace, one pid a line
  status    nodes, addresses, links, qdiscs with their counters, processes
  down      end every process inside the cluster's namespaces, remove the
            namespaces (veths, bridge and qdiscs with them) and DIR
  agent HOST CMD...
            (Open MPI calls this) run the command line CMD in the node whose
            address or hostname is HOST, as ssh would run it there

options:
  --nodes K       nodes (default 2)
  --slots G       MPI slots (ranks) per node in the hostfile (default 4)
  --rate R        inter-node link rate, tc syntax: NUMBER{bit,kbit,mbit,gbit}
                  (default 1gbit); 0 leaves the rate unshaped
  --delay D       delay added on each node's egress, NUMBER{us,ms,s} (default
                  0.1ms: one way between two nodes, 0.2ms there and back); 0
                  for none.
                  Needs the kernel's netem qdisc: without it the default is
                  dropped with a warning and an explicit --delay fails
  --dir DIR       the cluster (default: $NETNS_CLUSTER_DIR)
  --timeout S     limit of run, run-once and exec in seconds (default 600):
                  CMD is killed at S; mpirun gets a limit of its own a little
                  shorter (S less a tenth, 2 to 10 s; MPIEXEC_TIMEOUT), so
                  that it ends the job itself and says so
  -h, --help      this text

Node k is namespace PREFIX-n<k> with hostname sq-node<k>-ID (the name the
hostfile and Open MPI's messages give it) and address 198.18.0.<k+1>/24 on
interface sqnet0; the switch is PREFIX-sw with bridge sqbr0. PREFIX (sqnc-ID,
ID random) is unique to each `up`, so clusters never collide. Traffic between
ranks of one node stays inside its namespace (shared memory), unshaped.
Without root, or without ip, tc, mpirun, unshare, hostname or timeout, up
says what is missing and makes nothing.

example:
  dir=$(netns-cluster.sh up)
  netns-cluster.sh --dir "$dir" run -- mpirun -np 8 shardq world --run \
      --transport mpi --workers 2x4
  netns-cluster.sh --dir "$dir" status
  netns-cluster.sh --dir "$dir" down
USAGE
}

die() { echo "$prog: $*" >&2; exit 2; }   # the command line is wrong
fail() { echo "$prog: $*" >&2; exit 1; }  # the machine or the cluster is
warn() { echo "$prog: warning: $*" >&2; }

# The absolute path of this script: Open MPI runs it as its launch agent.
case $0 in
  /*) self=$0 ;;
  *) self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0") ;;
esac

need_root() {
  test "$(id -u)" -eq 0 ||
    fail "must run as root (it creates network namespaces and runs ip netns exec); try sudo"
}

# need_tools CMD...: every CMD on PATH, or one message naming the missing.
need_tools() {
  missing=
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
  done
  test -z "$missing" && return 0
  fail "missing:$missing (Debian: apt-get install iproute2 util-linux coreutils hostname openmpi-bin)"
}

# shq WORD: WORD quoted for sh (single quotes), for the env file.
shq() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

# rate_bits R: R (NUMBER{bit,kbit,mbit,gbit}) in bits per second.
rate_bits() {
  echo "$1" | awk '{
    v = $0; m = 1
    if (v ~ /gbit$/) m = 1e9; else if (v ~ /mbit$/) m = 1e6; else if (v ~ /kbit$/) m = 1e3
    sub(/[a-z]+$/, "", v); printf "%.0f\n", v * m }'
}

# ------------------------------------------------------------------ options
nodes=2 slots=4 rate=1gbit delay=0.1ms delay_set='' timeout_s=600
dir=${NETNS_CLUSTER_DIR:-}
while test $# -gt 0; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --nodes|--slots|--rate|--delay|--dir|--timeout)
      test $# -ge 2 || die "$1 needs a value"
      case $1 in
        --nodes) nodes=$2 ;; --slots) slots=$2 ;; --rate) rate=$2 ;;
        --delay) delay=$2; delay_set=1 ;; --dir) dir=$2 ;; --timeout) timeout_s=$2 ;;
      esac
      shift 2 ;;
    -*) die "unknown option '$1' (try --help)" ;;
    *) break ;;
  esac
done
test $# -ge 1 || { usage >&2; exit 2; }
cmd=$1
shift

is_count() { case $1 in '' | *[!0-9]*) return 1 ;; esac; test "$1" -ge "$2" && test "$1" -le "$3"; }
is_count "$nodes" 1 250 || die "--nodes: '$nodes': expected 1 to 250"
is_count "$slots" 1 4096 || die "--slots: '$slots': expected 1 to 4096"
is_count "$timeout_s" 1 86400 || die "--timeout: '$timeout_s': expected 1 to 86400 seconds"
# (bash's own matching: these checks run before the tools are looked for)
[[ $rate == 0 || $rate =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] ||
  die "--rate: '$rate': expected NUMBER followed by bit, kbit, mbit or gbit (e.g. 1gbit), or 0"
[[ $delay == 0 || $delay =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] ||
  die "--delay: '$delay': expected NUMBER followed by us, ms or s (e.g. 0.1ms), or 0"

# ------------------------------------------------------------- the cluster
# DIR holds: cluster.env (what up made, sourced by the other commands),
# nodes (one line per node: index, namespace, hostname, address), hostfile,
# mpi.env (the environment of run), tmp/ (Open MPI's session directories),
# agent.log (every daemon the agent started). Shared-memory segments go to
# /dev/shm/PREFIX (or DIR/shm): named by the cluster, never left behind.

load() {
  test -n "$dir" || die "which cluster? give --dir DIR (printed by up) or set NETNS_CLUSTER_DIR"
  test -f "$dir/cluster.env" || fail "$dir: not a cluster of $prog (no cluster.env)"
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  case $SQNC_PREFIX in sqnc-*) ;; *) fail "$dir/cluster.env: bad prefix '$SQNC_PREFIX'" ;; esac
}

# node_ns K, node_host K, node_addr K
node_ns() { echo "$SQNC_PREFIX-n$1"; }
node_host() { echo "sq-node$1-$SQNC_ID"; }
node_addr() { echo "198.18.0.$(($1 + 1))"; }
switch_ns() { echo "$SQNC_PREFIX-sw"; }

# Our namespaces that exist now (those of a half-made cluster too).
cluster_namespaces() {
  ip netns list 2>/dev/null | awk -v p="$SQNC_PREFIX-" 'index($1, p) == 1 { print $1 }' | sort -V
}

# ------------------------------------------------------------------- up
# add_shaping NS DEV: the node's egress qdiscs. netem (delay) at the root with
# tbf (rate) below it, or tbf alone when there is no delay or no netem.
# tbf's burst is 1 ms at the rate, at least 32 KiB: large enough for the
# veth's GSO packets at the default rate, small enough to shape.
add_shaping() {
  ns=$1 dev=$2
  parent=root
  if test "$delay" != 0; then
    if tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" 2>"$dir/tc.err"; then
      parent="parent 1:1"
      SQNC_DELAY_APPLIED=$delay
    elif test -n "$delay_set"; then
      fail "--delay $delay: tc cannot add a netem qdisc ($(cat "$dir/tc.err")): this kernel lacks netem (CONFIG_NET_SCH_NETEM); use --delay 0"
    else
      test -n "${netem_warned:-}" ||
        warn "no netem qdisc in this kernel (CONFIG_NET_SCH_NETEM): links are shaped for rate only, without the default delay $delay"
      netem_warned=1
      SQNC_DELAY_APPLIED=0
    fi
  fi
  if test "$rate" != 0; then
    burst=$(rate_bits "$rate" | awk '{ b = int($1 / 8 / 1000); print (b < 32768 ? 32768 : b) }')
    # shellcheck disable=SC2086
    tc -n "$ns" qdisc add dev "$dev" $parent handle 10: tbf rate "$rate" burst "$burst" latency 100ms ||
      fail "tc cannot add a tbf qdisc (rate $rate) on $dev in $ns"
  fi
}

# no_ipv6 NS: IPv6 off in NS: no router solicitations or duplicate address
# probes on the links, and Open MPI sees one address per node. A kernel
# without IPv6 has nothing to turn off.
no_ipv6() {
  ip netns exec "$1" sh -c 'for f in all default; do echo 1 >/proc/sys/net/ipv6/conf/$f/disable_ipv6; done' 2>/dev/null || true
}

# write_etc_netns: the names of the nodes for every node, through iproute2's
# per-namespace /etc (`ip netns exec NS` mounts /etc/netns/NS/FILE over
# /etc/FILE): Open MPI looks the hostfile's names up, and finds them in
# /etc/hosts instead of asking the machine's DNS server (which no namespace
# can reach: there is no route out). No nameserver either: a lookup of any
# other name fails at once inside the node.
write_etc_netns() {
  k=0
  while test "$k" -lt "$nodes"; do
    e=/etc/netns/$(node_ns "$k")
    mkdir -p "$e"
    {
      echo "# $prog: the hosts of cluster $SQNC_PREFIX"
      echo "127.0.0.1 localhost"
      cut -f3,4 "$dir/nodes" | awk -F '\t' '{ print $2 " " $1 }'
    } >"$e/hosts"
    echo "# $prog: no DNS inside cluster $SQNC_PREFIX" >"$e/resolv.conf"
    echo "options attempts:1 timeout:1" >>"$e/resolv.conf"
    echo "nameserver 127.0.0.1" >>"$e/resolv.conf"
    k=$((k + 1))
  done
}

cmd_up() {
  need_root
  need_tools ip tc mpirun unshare hostname timeout awk
  case $self in *[[:space:]]*)
    fail "this script's path '$self' contains white space, which Open MPI's launch agent setting cannot hold" ;;
  esac
  base=${TMPDIR:-/tmp}
  # A fresh id for every up: the directory is created atomically (mkdir),
  # and no namespace of that prefix may exist either.
  for _ in 1 2 3 4 5 6 7 8; do
    id=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
    SQNC_ID=$id SQNC_PREFIX=sqnc-$id
    if ! ip netns list 2>/dev/null | grep -q "^$SQNC_PREFIX-" && mkdir "$base/$SQNC_PREFIX" 2>/dev/null; then
      dir=$base/$SQNC_PREFIX
      break
    fi
    dir=
  done
  test -n "$dir" || fail "cannot create a cluster directory in $base"
  case $dir in *[[:space:]]*) rmdir "$dir"; fail "the cluster directory '$dir' contains white space (set TMPDIR)" ;; esac
  if test -d /dev/shm && test -w /dev/shm; then shm=/dev/shm/$SQNC_PREFIX; else shm=$dir/shm; fi
  mkdir -m 700 "$shm" "$dir/tmp"
  SQNC_DELAY_APPLIED=$delay
  write_cluster_env
  # A failure half way removes what was made (down finds it by prefix).
  trap 'echo "$prog: up failed; removing the partial cluster" >&2; cmd_down >&2 || true' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  sw=$(switch_ns)
  ip netns add "$sw" || fail "ip netns add $sw failed (a kernel without network namespaces?)"
  no_ipv6 "$sw"
  ip -n "$sw" link set lo up
  # STP off and no forward delay: the ports forward as soon as they are up.
  ip -n "$sw" link add sqbr0 type bridge stp_state 0 forward_delay 0
  ip -n "$sw" link set sqbr0 up
  k=0
  : >"$dir/nodes"
  : >"$dir/hostfile"
  while test "$k" -lt "$nodes"; do
    ns=$(node_ns "$k")
    ip netns add "$ns" || fail "ip netns add $ns failed"
    no_ipv6 "$ns"
    ip -n "$ns" link set lo up
    # Both ends are born inside namespaces of the cluster: created in the
    # node, the peer straight into the switch.
    ip -n "$ns" link add sqnet0 type veth peer name "n$k" netns "$sw"
    ip -n "$sw" link set "n$k" master sqbr0
    ip -n "$sw" link set "n$k" up
    ip -n "$ns" addr add "$(node_addr "$k")/24" dev sqnet0
    ip -n "$ns" link set sqnet0 up
    add_shaping "$ns" sqnet0
    printf '%s\t%s\t%s\t%s\n' "$k" "$ns" "$(node_host "$k")" "$(node_addr "$k")" >>"$dir/nodes"
    echo "$(node_host "$k") slots=$slots" >>"$dir/hostfile"
    k=$((k + 1))
  done
  rm -f "$dir/tc.err"
  write_cluster_env   # SQNC_DELAY_APPLIED is known now
  write_etc_netns
  write_mpi_env
  wait_links
  trap - EXIT INT TERM
  echo "$dir"
}

write_cluster_env() {
  {
    echo "# written by $prog up; read by its other commands"
    echo "SQNC_ID=$SQNC_ID"
    echo "SQNC_PREFIX=$SQNC_PREFIX"
    echo "SQNC_NODES=$nodes"
    echo "SQNC_SLOTS=$slots"
    echo "SQNC_RATE=$rate"
    echo "SQNC_DELAY=$delay"
    echo "SQNC_DELAY_APPLIED=$SQNC_DELAY_APPLIED"
    echo "SQNC_SHM=$(shq "$shm")"
  } >"$dir/cluster.env"
}

# The environment of mpirun (and, through it, of the daemons and ranks).
# Every setting here is one Open MPI needs to stay inside the cluster:
# - orte_default_hostfile: the nodes' addresses, slots=G each;
# - plm_rsh_agent: this script's `agent` instead of ssh, and no tree spawn
#   (daemons starting other daemons), so only mpirun calls the agent;
# - oob/btl_tcp_if_include: the cluster's subnet only, for the daemons'
#   wire-up and the ranks' data alike;
# - pml ob1 with btl self,vader,tcp: shared memory within a node and TCP
#   between nodes; not UCX, which picks its own interfaces;
# - hwloc_base_binding_policy none, oversubscribe and mpi_yield_when_idle:
#   all nodes share this machine's cores, so binding G ranks per "node"
#   would overload cores or be refused, and ranks that spin while waiting
#   (Open MPI's default when the hostfile's slots are not exceeded) take the
#   cores from the ranks that have work: a 2x4 job on 2 cores ran 3 to 10
#   times slower;
# - orte_tmpdir_base and the shared-memory directories: the session files
#   and segments of the cluster live in its own directories, which down
#   removes even after a rank was killed;
# - OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM): mpirun refuses root without them, and
#   this script runs as root.
write_mpi_env() {
  subnet=198.18.0.0/24
  {
    echo "# Open MPI's settings for the cluster $SQNC_PREFIX (netns-cluster.sh run sources this)"
    echo "export NETNS_CLUSTER_DIR=$(shq "$dir")"
    echo "export OMPI_MCA_orte_default_hostfile=$(shq "$dir/hostfile")"
    echo "export OMPI_MCA_plm_rsh_agent=$(shq "$self agent")"
    echo "export OMPI_MCA_plm_rsh_no_tree_spawn=1"
    echo "export OMPI_MCA_orte_startup_timeout=60"
    echo "export OMPI_MCA_oob_tcp_if_include=$subnet"
    echo "export OMPI_MCA_btl_tcp_if_include=$subnet"
    echo "export OMPI_MCA_pml=ob1"
    echo "export OMPI_MCA_btl=self,vader,tcp"
    # Large messages by plain sends: the TCP BTL's emulated RDMA put (its
    # default for large messages) moves the two directions of a pair at
    # half the link's rate each. Measured through a 200mbit tbf: MPI_Allgather
    # of 4 MiB between two nodes, 12.3 MB/s each way with put, 23.4 with
    # sends alone; raw TCP both ways 23.9, one way MPI_Send 23.9.
    echo "export OMPI_MCA_btl_tcp_flags=send"
    echo "export OMPI_MCA_hwloc_base_binding_policy=none"
    echo "export OMPI_MCA_rmaps_base_oversubscribe=1"
    echo "export OMPI_MCA_mpi_yield_when_idle=1"
    echo "export OMPI_MCA_orte_tmpdir_base=$(shq "$dir/tmp")"
    echo "export OMPI_MCA_btl_vader_backing_directory=$(shq "$shm")"
    echo "export OMPI_MCA_shmem_mmap_backing_file_base_dir=$(shq "$shm")"
    echo "export OMPI_MCA_osc_sm_backing_directory=$(shq "$shm")"
    echo "export OMPI_ALLOW_RUN_AS_ROOT=1"
    echo "export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
  } >"$dir/mpi.env"
}

# Every node's link up (carrier on both ends), within 5 s.
wait_links() {
  sw=$(switch_ns)
  for _ in $(seq 50); do
    down_links=0
    k=0
    while test "$k" -lt "$nodes"; do
      ip -n "$(node_ns "$k")" link show sqnet0 | grep -q 'state UP' || down_links=$((down_links + 1))
      k=$((k + 1))
    done
    test "$down_links" -eq 0 && return 0
    sleep 0.1
  done
  fail "$down_links node link(s) still down after 5 s"
}

# ------------------------------------------------------------------- run
# with_timeout LABEL CMD...: CMD killed (TERM, then KILL 5 s later) at the limit,
# with a message; CMD's status otherwise. CMD runs in the background and is
# waited for, so that a SIGINT or SIGTERM to this script is handled at once:
# it is passed on to CMD (timeout forwards it; mpirun then ends its job), and
# after at most 10 s more this script exits 130 or 143 (run-once then tears
# the cluster down, ending whatever is left).
with_timeout() {
  label=$1
  shift
  timeout -k 5 "$timeout_s" "$@" &
  child=$!
  got_sig=0
  trap 'got_sig=130; kill -INT "$child" 2>/dev/null || true' INT
  trap 'got_sig=143; kill -TERM "$child" 2>/dev/null || true' TERM
  rc=0
  wait "$child" || rc=$?
  if test "$got_sig" -ne 0; then
    for _ in $(seq 100); do
      kill -0 "$child" 2>/dev/null || break
      sleep 0.1
    done
    echo "$prog: interrupted; '$label' got the signal too" >&2
    exit "$got_sig"
  fi
  trap - INT TERM
  child=
  if test "$rc" -eq 124; then
    echo "$prog: '$label' timed out after $timeout_s s" >&2
  fi
  return "$rc"
}

cmd_run() {
  load
  need_root
  need_tools ip unshare hostname timeout
  test "${1:-}" = -- && shift
  test $# -ge 1 || die "run: which command? (run -- mpirun -np N PROG...)"
  # mpirun's own limit, shorter than ours: it then ends the job itself and
  # says which ranks were still running.
  margin=$((timeout_s / 10 < 2 ? 2 : timeout_s / 10 > 10 ? 10 : timeout_s / 10))
  mpi_limit=$((timeout_s - margin < 1 ? 1 : timeout_s - margin))
  with_timeout "$*" ip netns exec "$(node_ns 0)" unshare --uts -- sh -c \
    '. "$1" && export MPIEXEC_TIMEOUT="$2" && hostname "$3" && shift 3 && exec "$@"' \
    sh "$dir/mpi.env" "$mpi_limit" "$(node_host 0)" "$@"
}

cmd_exec() {
  load
  need_root
  need_tools ip unshare hostname timeout
  test $# -ge 1 || die "exec: which node?"
  is_count "$1" 0 $((SQNC_NODES - 1)) || die "exec: node '$1': expected 0 to $((SQNC_NODES - 1))"
  k=$1
  shift
  test "${1:-}" = -- && shift
  test $# -ge 1 || die "exec: which command?"
  with_timeout "$*" ip netns exec "$(node_ns "$k")" unshare --uts -- sh -c \
    '. "$1" && hostname "$2" && shift 2 && exec "$@"' sh "$dir/mpi.env" "$(node_host "$k")" "$@"
}

cmd_pids() {
  load
  need_root
  test $# -eq 1 || die "pids: which node?"
  is_count "$1" 0 $((SQNC_NODES - 1)) || die "pids: node '$1': expected 0 to $((SQNC_NODES - 1))"
  ip netns pids "$(node_ns "$1")"
}

# agent HOST CMD...: what Open MPI's rsh launcher calls in place of
# `ssh HOST CMD...`. As ssh does, the words of CMD are joined by spaces into
# one shell command line (the launcher quotes for that); it runs in the node
# whose address or hostname is HOST, under that node's hostname. The agent
# execs into the command, so the daemon is mpirun's child as with ssh.
cmd_agent() {
  load
  test $# -ge 2 || die "agent: expected HOST COMMAND..."
  host=$1
  shift
  line=$(awk -F '\t' -v h="$host" '$4 == h || $3 == h || $2 == h' "$dir/nodes")
  test -n "$line" || fail "agent: '$host' is no node of the cluster $SQNC_PREFIX (see $dir/nodes)"
  ns=$(printf '%s\n' "$line" | cut -f2)
  name=$(printf '%s\n' "$line" | cut -f3)
  echo "$(date '+%F %T') $host -> $ns: $*" >>"$dir/agent.log"
  exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$1" && shift && exec sh -c "$*"' sh "$name" "$@"
}

# ------------------------------------------------------------------ status
cmd_status() {
  load
  need_root
  echo "cluster $SQNC_PREFIX in $dir: $SQNC_NODES nodes x $SQNC_SLOTS slots, rate $SQNC_RATE, delay $SQNC_DELAY_APPLIED (asked $SQNC_DELAY)"
  echo "environment of run: $dir/mpi.env"
  ns_now=$(cluster_namespaces)
  while IFS="$(printf '\t')" read -r k ns host addr; do
    if ! printf '%s\n' "$ns_now" | grep -qx "$ns"; then
      echo "node $k: namespace $ns MISSING"
      continue
    fi
    n=$(ip netns pids "$ns" | wc -l)
    echo "node $k: namespace $ns, host $host, address $addr, $n process(es)"
    ip -n "$ns" -s link show sqnet0 | sed 's/^/    /'
    tc -n "$ns" -s qdisc show dev sqnet0 | sed 's/^/    /'
  done <"$dir/nodes"
  if printf '%s\n' "$ns_now" | grep -qx "$(switch_ns)"; then
    echo "switch: namespace $(switch_ns), bridge sqbr0"
  else
    echo "switch: namespace $(switch_ns) MISSING"
  fi
}

# ------------------------------------------------------------------- down
# kill_in NS: every process inside NS, TERM then (after up to 3 s) KILL,
# waiting up to 5 s more for them to be gone.
kill_in() {
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  test -n "$pids" || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 30); do
    test -z "$(ip netns pids "$1" 2>/dev/null)" && return 0
    sleep 0.1
  done
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  # shellcheck disable=SC2086
  test -z "$pids" || kill -KILL $pids 2>/dev/null || true
  for _ in $(seq 50); do
    test -z "$(ip netns pids "$1" 2>/dev/null)" && return 0
    sleep 0.1
  done
  echo "$prog: processes still in $1 after SIGKILL: $(ip netns pids "$1" | tr '\n' ' ')" >&2
  return 1
}

# kill_escaped: every process that carries this cluster in its environment
# (NETNS_CLUSTER_DIR=DIR: mpirun, its daemons and ranks) but lives in a
# network namespace other than ours: one whose namespace was deleted while
# it ran (by hand, or by a down that could not end it) is no longer listed
# by `ip netns pids`, and keeps that namespace alive. Processes of our own
# namespace are never touched: a shell that exported NETNS_CLUSTER_DIR,
# this script itself.
kill_escaped() {
  own=$(readlink /proc/self/ns/net)
  found=
  for pd in /proc/[0-9]*; do
    test "$(readlink "$pd/ns/net" 2>/dev/null)" != "$own" || continue
    { tr '\0' '\n' <"$pd/environ"; } 2>/dev/null | grep -qxF "NETNS_CLUSTER_DIR=$dir" || continue
    found="$found ${pd#/proc/}"
  done
  test -n "$found" || return 0
  echo "$prog: ending processes of $SQNC_PREFIX outside its namespaces:$found" >&2
  # shellcheck disable=SC2086
  kill -KILL $found 2>/dev/null || true
}

cmd_down() {
  load
  need_root
  need_tools ip
  status=0
  all=$(cluster_namespaces)
  # Processes first, node 0 (mpirun) before the others: with its job gone
  # nothing relaunches a daemon while the rest are ended.
  for ns in $all; do kill_in "$ns" || status=1; done
  kill_escaped
  # Then the qdiscs, the links and the namespaces themselves (deleting a
  # namespace deletes its interfaces and their qdiscs; the explicit deletes
  # say so and fail loudly on a kernel that would keep them).
  for ns in $all; do
    case $ns in
      *-sw) ip -n "$ns" link del sqbr0 2>/dev/null || true ;;
      *) tc -n "$ns" qdisc del dev sqnet0 root 2>/dev/null || true
         ip -n "$ns" link del sqnet0 2>/dev/null || true ;;
    esac
    ip netns del "$ns" || status=1
  done
  left=$(cluster_namespaces)
  if test -n "$left"; then
    echo "$prog: namespaces left: $left" >&2
    status=1
  fi
  # The cluster's files: its names in /etc/netns, its shared memory and its
  # directory.
  for e in /etc/netns/"$SQNC_PREFIX"-*; do
    test -e "$e" || continue
    rm -f "$e/hosts" "$e/resolv.conf"
    rmdir "$e" || status=1
  done
  rmdir /etc/netns 2>/dev/null || true   # when empty: it holds nothing then
  case ${SQNC_SHM:-} in */"$SQNC_PREFIX") rm -rf "$SQNC_SHM" ;; esac
  case $dir in
    */"$SQNC_PREFIX") rm -rf "$dir" ;;
    *) warn "$dir is not named $SQNC_PREFIX; left in place" ;;
  esac
  return "$status"
}

# --------------------------------------------------------------- run-once
cmd_run_once() {
  test "${1:-}" = -- && shift
  test $# -ge 1 || die "run-once: which command? (run-once -- mpirun -np N PROG...)"
  need_root
  need_tools ip tc mpirun unshare hostname timeout
  dir=$(cmd_up)
  # Teardown on every exit path: the command's end, a failure of this script
  # (set -e), a signal (with_timeout passes it on, then exits 130 or 143).
  # down ends every process left inside the namespaces, mpirun included.
  trap 'rc=$?; trap - EXIT; cmd_down || rc=1; exit "$rc"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  rc=0
  cmd_run -- "$@" || rc=$?
  exit "$rc"
}

# A --timeout written after run/exec/run-once.
sub_timeout() {
  while test $# -gt 0; do
    case $1 in
      --timeout) test $# -ge 2 || die "--timeout needs a value"
                 is_count "$2" 1 86400 || die "--timeout: '$2': expected 1 to 86400 seconds"
                 timeout_s=$2; shift 2 ;;
      *) break ;;
    esac
  done
  rest=("$@")
}

case $cmd in
  up) test $# -eq 0 || die "up takes no arguments (options go before it)"; cmd_up ;;
  run) sub_timeout "$@"; cmd_run "${rest[@]}" ;;
  run-once) sub_timeout "$@"; cmd_run_once "${rest[@]}" ;;
  exec) k=${1:-}; test $# -ge 1 && shift; sub_timeout "$@"; cmd_exec "$k" "${rest[@]}" ;;
  pids) cmd_pids "$@" ;;
  status) cmd_status ;;
  down) cmd_down ;;
  agent) cmd_agent "$@" ;;
  *) die "unknown command '$cmd' (try --help)" ;;
esac
