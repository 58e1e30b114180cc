# Shared by bench/load-test-servers and bench/soak (sourced, not run): the binaries, and
# `evicortex serve` processes started on loopback and stopped with SIGTERM.
#
# Env: EVICORTEX_LOAD_BIN=PATH         use this evicortex binary instead of building one
#      EVICORTEX_LOAD_BENCH_BIN=PATH   and this evicortex-bench binary
#      EVICORTEX_LOAD_PROFILE=release|dev   cargo profile to build otherwise (default release)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Sets $bin and $bench_bin (building them unless given) and $profile (what measured).
load_binaries() {
  profile="${EVICORTEX_LOAD_PROFILE:-release}"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/target}"
  if [[ -n "${EVICORTEX_LOAD_BIN:-}" ]]; then
    bin="$EVICORTEX_LOAD_BIN"
    bench_bin="${EVICORTEX_LOAD_BENCH_BIN:?set it beside EVICORTEX_LOAD_BIN}"
    profile="prebuilt $bin"
  else
    echo "building evicortex and evicortex-bench ($profile profile)..." >&2
    cargo build --quiet --profile "$profile" -p evicortex-cli -p evicortex-bench \
      --manifest-path "$repo/Cargo.toml"
    local dir="$profile"; [[ "$profile" == dev ]] && dir=debug
    bin="$CARGO_TARGET_DIR/$dir/evicortex"
    bench_bin="$CARGO_TARGET_DIR/$dir/evicortex-bench"
  fi
}

server_pids=()
server_urls=()

# start_server OUT_DIR ARGS...: `evicortex ARGS... serve --listen 127.0.0.1:0 $serve_args` in
# the background, its output in OUT_DIR; appends its pid and URL to the arrays above.
start_server() {
  local out="$1"; shift
  mkdir -p "$out"
  # shellcheck disable=SC2086 # serve_args is a list of options
  "$bin" "$@" serve --listen 127.0.0.1:0 $serve_args >"$out/serve.out" 2>"$out/serve.err" &
  local pid=$! url=""
  for _ in $(seq 1 600); do
    url="$(sed -n 's/^listening on //p' "$out/serve.out" | head -n 1)"
    [[ -n "$url" ]] && break
    kill -0 "$pid" 2>/dev/null || { echo "the server exited:" >&2; cat "$out/serve.err" >&2; return 1; }
    sleep 0.1
  done
  [[ -n "$url" ]] || { echo "the server did not report its address" >&2; return 1; }
  server_pids+=("$pid")
  server_urls+=("$url")
}

# Stops every server started with SIGTERM; fails unless each drained and exited 0.
stop_servers() {
  local pid rc failed=0
  for pid in "${server_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    rc=0; wait "$pid" || rc=$?
    (( rc == 0 )) || { echo "server $pid exited with $rc after SIGTERM" >&2; failed=1; }
  done
  server_pids=()
  server_urls=()
  return "$failed"
}

# For a trap: kills what is still running, without judging it.
kill_servers() {
  local pid
  for pid in "${server_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  done
  server_pids=()
}

# `--server URL --pid PID` for each running server.
server_args() {
  local i
  for i in "${!server_pids[@]}"; do
    printf -- '--server %s --pid %s ' "${server_urls[$i]}" "${server_pids[$i]}"
  done
}
