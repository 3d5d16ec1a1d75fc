#!/usr/bin/env bash
# End-to-end demo on the embedded simulator: the README's main command.
set -euo pipefail
cd "$(dirname "$0")/.."
go run ./cmd/perflab --help >/dev/null
echo "demo: (pipeline not wired yet)"
