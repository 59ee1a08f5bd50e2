#!/usr/bin/env bash
# Serve MathJax from the book so that maths renders offline: take MathJax 3 from
# the npm registry (the only network the build may use) into .mathjax/mathjax.
set -euo pipefail
target=.mathjax/mathjax
[ -f "$target/tex-mml-chtml.js" ] && exit 0
scratch=$(mktemp -d)
(cd "$scratch" && npm pack --silent mathjax@3.2.2 >/dev/null && tar -xzf mathjax-3.2.2.tgz)
mkdir -p .mathjax
rm -rf "$target"
mv "$scratch/package/es5" "$target"
rm -rf "$scratch"
echo "MathJax 3.2.2 installed in $target"
