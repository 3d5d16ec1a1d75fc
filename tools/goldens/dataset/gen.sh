#!/bin/sh
# Regenerates internal/dataset/testdata goldens from CPython's random,
# Debian's numpy and Hugging Face's Rust tokenizers (npm). Needs:
#   apt-get install -y python3-numpy nodejs npm && npm install   (in this dir)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
shared=$(cd "$root/../shared" && pwd)
out="$root/internal/dataset/testdata"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
sample="$shared/data/sharegpt/sharegpt_v3_sample_1000.json"

$py "$here/rng_goldens.py" > "$out/rng.json"
node "$here/tok.js" sharegpt "$sample" > "$tmp/lens.json"
$py "$here/sharegpt_goldens.py" "$sample" "$tmp/lens.json" > "$out/sharegpt_goldens.json"
vocab=$(node "$here/tok.js" vocab)
$py "$here/random_goldens.py" "$vocab" > "$tmp/draws.json"
node "$here/tok.js" random "$tmp/draws.json" | gzip -n -9 > "$out/random_goldens.json.gz"
