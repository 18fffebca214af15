#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The layer check: folders are layers, and a file may include headers of its
# own layer and of the layers below it only. Reads every #include "..." of
# the library's sources and of perf/ and tools/, maps both ends to their
# layer, and fails on each include that runs against the order (printing the
# file, the line and the two layers). Two subfolders of one layer
# (transport/tcp, transport/shm) may not include each other either.
#   layers.sh           check; exit 1 on any violation
#   layers.sh --dot     print the folder dependency graph (Graphviz)
#   layers.sh --table   print it as a Markdown table
# docs/ARCHITECTURE.md holds the graph this prints.
set -u
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top" || exit 1
# Lowest first. perf/ and tools/ sit above the library, side by side.
LAYERS="include lib/base kernels lib/schedule algorithms lib/tune transport lib/control lib/core lib/sparse lib/compress lib/fusion perf tools"
mode=${1:-check}

files=$(for d in $LAYERS; do [ -d "$d" ] && find "$d" -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh'; done | sort)
[ -n "$files" ] || { echo "FAIL: no sources found under $top"; exit 1; }

# One line per include: file line target
grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files |
  sed 's/^\([^:]*\):\([0-9]*\):.*include[[:space:]]*"\([^"]*\)".*/\1 \2 \3/' |
  awk -v layers="$LAYERS" -v mode="$mode" '
  BEGIN {
    n = split(layers, L, " ")
    for (i = 1; i <= n; i++) rank[L[i]] = i
    # perf and tools are peers at the top: neither may include the other.
    rank["tools"] = rank["perf"]
  }
  # A layer is a top folder, or lib/<folder> for the layers of the library itself.
  function layer(path,   p, l) {
    split(path, p, "/")
    l = (p[1] == "lib") ? p[1] "/" p[2] : p[1]
    if (!(l in rank)) return ""
    return l
  }
  # The subfolder of a layer: tcp for a file of transport/tcp/.
  function sub2(path,   p) { split(path, p, "/"); return p[1] == "lib" ? p[3] : p[2] }
  {
    from = layer($1); to = $3
    # Headers named without a folder: the public API (sparsecoll.h and the
    # sparsecoll_version.h that configure writes) and the generated config.h.
    if (to == "sparsecoll.h" || to == "sparsecoll_version.h" || to == "config.h") to = "include/" to
    tl = layer(to)
    if (tl == "") { printf("%s:%s: includes \"%s\", which is in no layer\n", $1, $2, $3); bad++; next }
    if (from != tl) edge[from " " tl]++
    if (rank[tl] > rank[from] || (rank[tl] == rank[from] && tl != from)) {
      printf("%s:%s: %s (layer %s) includes %s (layer %s, above it)\n", $1, $2, $1, from, $3, tl); bad++
    } else if (tl == from) {
      fs = sub2($1); ts = sub2(to)
      # Subfolders are siblings: a/x/ may not reach into a/y/.
      if (fs != ts && index(fs, ".") == 0 && index(ts, ".") == 0) {
        printf("%s:%s: %s includes %s of a sibling folder\n", $1, $2, $1, $3); bad++
      }
    }
    total++
  }
  END {
    if (mode == "--dot") {
      print "digraph layers {"; print "  rankdir=BT; node [shape=box];"
      for (e in edge) { split(e, p, " "); printf("  \"%s\" -> \"%s\";\n", p[1], p[2]) }
      print "}"
    } else if (mode == "--table") {
      print "| folder | includes headers of |"; print "|---|---|"
      for (i = n; i >= 1; i--) {
        f = L[i]; line = ""
        for (j = i; j >= 1; j--) if ((f " " L[j]) in edge) line = line (line == "" ? "" : ", ") L[j]
        printf("| %s | %s |\n", f, line == "" ? "(nothing of ours)" : line)
      }
    } else {
      if (bad) { printf("FAIL: %d of %d includes run against the layer order (%s)\n", bad, total, layers); exit 1 }
      printf("PASS: %d includes, none upward (%s)\n", total, layers)
    }
    exit bad ? 1 : 0
  }'
