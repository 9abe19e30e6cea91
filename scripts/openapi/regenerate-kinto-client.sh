#!/usr/bin/env bash
# Regenerates Tests/OfflineBundleOpenAPITests/KintoClient from the OpenAPI description a real Kinto serves.
#
# 1. Starts Kinto (from .venv-api, as `make deps` installs it) on loopback and saves its /v1/__api__ document
#    (Swagger 2.0, as cornice_swagger writes it) to scripts/openapi/kinto/kinto-swagger-2.0.json.
# 2. Converts it to OpenAPI 3.0.3 (swagger2-to-openapi3.py: swift-openapi-generator reads 3.0 and 3.1 only) as
#    scripts/openapi/kinto/openapi.json, with the server as the base path alone (/v1).
# 3. Runs swift-openapi-generator 1.14.3 (built from a clone of its repository in a temporary folder) with
#    scripts/openapi/kinto/openapi-generator-config.yaml, writing Types.swift and Client.swift into the test target.
#
# The generated files are committed: the suite compiles them without the generator (and its build).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
kinto=${KINTO:-$root/.venv-api/bin/kinto}
[ -x "$kinto" ] || { echo "Kinto is not installed: make deps installs it into .venv-api" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$kinto" init --ini "$work/kinto.ini" --backend memory --cache-backend memory > /dev/null
"$kinto" start --ini "$work/kinto.ini" --port "$port" > "$work/kinto.log" 2>&1 &
pid=$!
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/v1/" > /dev/null && break; sleep 0.5; done
# The host is the run's own port: written as it would be on the default one, so a regeneration changes nothing else.
curl -sf "http://127.0.0.1:$port/v1/__api__" | python3 -c '
import json, sys
document = json.load(sys.stdin)
document["host"] = "127.0.0.1:8888"
json.dump(document, sys.stdout, indent=1, sort_keys=True)
print()' > scripts/openapi/kinto/kinto-swagger-2.0.json
python3 scripts/openapi/swagger2-to-openapi3.py scripts/openapi/kinto/kinto-swagger-2.0.json scripts/openapi/kinto/openapi.json --relative-server
generator=${OPENAPI_GENERATOR:-}
if [ -z "$generator" ]; then
    git clone -q --branch 1.14.3 https://github.com/apple/swift-openapi-generator "$work/generator"
    swift build -c release --package-path "$work/generator" --product swift-openapi-generator
    generator=$work/generator/.build/release/swift-openapi-generator
fi
"$generator" generate scripts/openapi/kinto/openapi.json --config scripts/openapi/kinto/openapi-generator-config.yaml \
    --output-directory Tests/OfflineBundleOpenAPITests/KintoClient
echo "regenerated Tests/OfflineBundleOpenAPITests/KintoClient from Kinto $(curl -s "http://127.0.0.1:$port/v1/" | python3 -c 'import json,sys; print(json.load(sys.stdin)["project_version"])')"
