# Sourced by bench/fleet.sh and bench/fleet-probes.sh: build what a fleet run needs (unless
# SKIP_BUILD is set), point `rollcall-fleet` at the controller to measure, and raise the open-file
# limit. Sets `fleet` (the driver's path).
target=${CARGO_TARGET_DIR:-target}
if [ -z "${SKIP_BUILD:-}" ]; then
  # The controller as the image ships it (Cargo.toml's `controller` profile), the driver and
  # the API server with --release.
  cargo build --profile controller -p rollcall-controller --bin rollcall-controller
  cargo build --release -p rollcall-devcluster -p rollcall-testkit \
    --bin rollcall-devcluster --bin rollcall-fleet
fi
# CONTROLLER=path runs another controller build (an A/B).
export ROLLCALL_CONTROLLER=${CONTROLLER:-$target/controller/rollcall-controller}
# Every sidecar, simulated or real, holds connections; so does the controller for each.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fleet="$target/release/rollcall-fleet"
