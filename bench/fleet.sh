#!/usr/bin/env bash
# The controller under a fleet: the local API server holding pools of ENDPOINTS endpoints in
# total, the real controller, SIDECARS simulated sidecars in their own process (real Watch and
# Report streams), CHANGES endpoint changes made through the API server, then a controller
# crash and restart. Prints one `fleet:` line per scenario (bench/README.md explains them).
#   ./bench/fleet.sh                       # 1,000 sidecars x 10,000 endpoints, one pool and 100 pools
#   SIDECARS=200 ENDPOINTS=2000 ./bench/fleet.sh
#   AUTH=0 ./bench/fleet.sh                # sidecars without tokens (controller --insecure-no-auth)
#   TLS=0 ./bench/fleet.sh                 # plaintext roster port (the default is TLS, as installed)
#   CONTROLLER=/tmp/old-controller ./bench/fleet.sh   # another controller build
set -euo pipefail
cd "$(dirname "$0")/.."
SIDECARS=${SIDECARS:-1000}
ENDPOINTS=${ENDPOINTS:-10000}
CHANGES=${CHANGES:-5}
# shellcheck source=bench/fleet-build.sh
. bench/fleet-build.sh
# AUTH=0: sidecars present no tokens and the controller runs --insecure-no-auth.
auth=()
if [ "${AUTH:-1}" = 0 ]; then auth=(--no-auth); fi
# TLS (the default, as the chart installs it): the controller serves a self-signed certificate
# for localhost; the sidecars verify it. TLS=0: plaintext h2c.
if [ "${TLS:-1}" = 1 ]; then auth+=(--tls); fi
"$fleet" run --scenario one-pool --sidecars "$SIDECARS" --endpoints "$ENDPOINTS" --pools 1 \
  --changes "$CHANGES" "${auth[@]}"
"$fleet" run --scenario 100-pools --sidecars "$SIDECARS" --endpoints "$ENDPOINTS" --pools 100 \
  --pools-per-sidecar 10 --changes "$CHANGES" "${auth[@]}"
