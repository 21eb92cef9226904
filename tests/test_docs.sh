#!/bin/bash
# Runs every example in docs/: a block marked <!-- doc-test: NAME -->, a
# ```sh block, then the ``` block with its exact expected output.  A doc
# example that no longer matches what sluice prints fails the suite.  The
# examples run in one directory, a page's in the page's order, so that
# one may use the files an earlier one made ("with the files made above").
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
export PATH="$(dirname "$SLUICE"):$PATH"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$SOURCE_DIR/docs" "$tmp" <<'PY' || exit 1
import os, re, sys
docs, out = sys.argv[1], sys.argv[2]
pat = re.compile(r'<!-- doc-test: ([\w-]+) -->\s*```sh\n(.*?)```\s*```\w*\n(.*?)```', re.S)
n = 0
for name in sorted(os.listdir(docs)):
    if not name.endswith('.md'):
        continue
    text = open(os.path.join(docs, name)).read()
    marks = text.count('<!-- doc-test:')
    found = pat.findall(text)
    if len(found) != marks:
        sys.exit(f"{name}: {marks} doc-test marks but {len(found)} well-formed examples")
    for test, cmd, expected in found:
        with open(os.path.join(out, f"{name}.{test}.sh"), 'w') as f:
            f.write(cmd)
        with open(os.path.join(out, f"{name}.{test}.expected"), 'w') as f:
            f.write(expected)
        with open(os.path.join(out, "order"), 'a') as f:
            f.write(f"{name}.{test}\n")
        n += 1
if n == 0:
    sys.exit("no doc-test examples found")
PY

# The README's C excerpt must be quoted from examples/quickstart.c, which
# CTest builds and runs (test_quickstart).
python3 - "$SOURCE_DIR" <<'PY' || exit 1
import re, sys
root = sys.argv[1]
readme = open(root + "/README.md").read()
src = [l.strip() for l in open(root + "/examples/quickstart.c")]
block = re.search(r"```c\n(.*?)```", readme, re.S)
if not block:
    sys.exit("README: no C example")
for line in block.group(1).splitlines():
    line = line.strip()
    if line and not any(line in s for s in src):
        sys.exit(f"README line not in examples/quickstart.c: {line}")
print("PASS README example quoted from examples/quickstart.c")
PY

fail=0 total=0
while read -r name; do
  total=$((total + 1))
  (cd "$tmp" && bash "$tmp/$name.sh") >"$tmp/$name.actual" 2>&1 </dev/null
  if diff -u "$tmp/$name.expected" "$tmp/$name.actual" >"$tmp/$name.diff"; then
    echo "PASS $name"
  else
    echo "FAIL $name"; cat "$tmp/$name.diff"; fail=$((fail + 1))
  fi
done <"$tmp/order"
echo "doc examples: $((total - fail))/$total passed"
[ "$fail" -eq 0 ]
