#!/usr/bin/env bash
# The README's install, done as a user does it, outside the repository:
#
#   1. a clean clone of this repository's HEAD (committed files only: no
#      dist/, no node_modules), served as a git URL
#      (git+file://.../ovslb.git#<commit>), as a user's would be
#      git+https://...;
#   2. a fresh project beside it (package.json, Pulumi.yaml, tsconfig.json,
#      a TypeScript program declaring an OvsBridge on one lab host from
#      `ovslb:hosts`), and the README's command in it:
#      `npm install <git URL> @pulumi/pulumi typescript` (npm builds ovslb
#      through its `prepare`);
#   3. `npx tsc --noEmit`: the program type-checks against the installed
#      typings, with the TypeScript npm installed (the library files too);
#   4. with the lab lock held: preview, up, a preview that must change
#      nothing, destroy, through the test harness (test/harness: the lab has
#      no Pulumi CLI; the program runs as TypeScript through the project's own
#      @pulumi/pulumi, as `pulumi up` runs it), asserting that `up` made the
#      bridge on the host (ovs-vsctl list-br in its namespace) and destroy
#      removed it.
#
# Usage: tools/install-check.sh  (as root, the lab up, the repo built with
# `npx tsc -p tsconfig.tools.json`, for the harness and the lab's helpers).
# Environment: OVSLB_INSTALL_HOST (default gw1), OVSLB_LAB_LOCK (default
# /tmp/ovslb-lab.lock, the lab lock; "" when the caller holds it already),
# OVSLB_INSTALL_KEEP=1 keeps the scratch directory. Needs the npm registry.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
host=${OVSLB_INSTALL_HOST:-gw1}
bridge=br-install
lock=${OVSLB_LAB_LOCK-/tmp/ovslb-lab.lock}
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - $1 )); }
say() { echo "install-check: $*"; }
fail() { echo "install-check: FAILED: $*" >&2; exit 1; }

[ -f "$repo/dist/test/harness/cli.js" ] && [ -f "$repo/dist/test/lab/stack-config.js" ] ||
  fail "build the repo's tools first: npx tsc -p tsconfig.tools.json"
inventory=${OVSLB_LAB_DIR:-/run/ovslb-lab}/inventory.json
[ -f "$inventory" ] || fail "no lab inventory at $inventory: npm run lab -- up"

work=$(mktemp -d /tmp/ovslb-install.XXXXXX)
if [ "${OVSLB_INSTALL_KEEP:-0}" = 1 ]; then trap 'say "kept $work"' EXIT; else trap 'rm -rf "$work"' EXIT; fi
cd "$work"

# --- 1. The repository as a git URL gives it ---------------------------------
if commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null) && git clone --quiet --bare "$repo" ovslb.git 2>/dev/null; then
  git -C "$repo" diff --quiet HEAD -- || say "note: uncommitted changes in $repo are not part of the check (a git URL serves commits)"
else
  # Not a git checkout (an exported tree), or one git refuses to read as this user (safe.directory):
  # a repository of its files serves as the clone, node_modules, dist/ and the lab's files left out.
  say "note: $repo cannot be cloned here; serving a repository made of its files"
  rm -rf ovslb.git
  mkdir src
  tar -C "$repo" --exclude=./node_modules --exclude=./dist --exclude=./.lab --exclude=./.git -cf - . | tar -C src -xf -
  git -C src init --quiet
  git -C src add -A
  git -C src -c user.name=install-check -c user.email=install-check@localhost commit --quiet -m "the checkout's files"
  commit=$(git -C src rev-parse HEAD)
  git clone --quiet --bare src ovslb.git
fi
url="git+file://$work/ovslb.git#$commit"

# --- 2. A fresh project, and the README's install ----------------------------
mkdir project
cd project
cat > package.json <<'EOF'
{
  "name": "ovslb-install-check",
  "private": true,
  "main": "index.ts"
}
EOF
cat > Pulumi.yaml <<'EOF'
name: ovslb-install-check
runtime: nodejs
description: One OVS bridge, declared with ovslb installed as the README says
EOF
cat > tsconfig.json <<'EOF'
{
  "compilerOptions": {
    "strict": true,
    "target": "es2022",
    "module": "nodenext",
    "outDir": "bin"
  },
  "files": ["index.ts"]
}
EOF
cat > index.ts <<'EOF'
import * as pulumi from "@pulumi/pulumi";
import { OvsBridge, stackHost } from "ovslb";

const config = new pulumi.Config();
const bridge = new OvsBridge("install-check", { host: stackHost(config.require("host")), name: config.require("bridge") });

export const uuid = bridge.uuid;
EOF
t=$(date +%s)
npm install --no-audit --no-fund --loglevel=error "$url" @pulumi/pulumi typescript
[ -f node_modules/ovslb/dist/index.js ] || fail "npm installed ovslb without dist/index.js"
versions=$(node -p '["ovslb", "@pulumi/pulumi", "typescript"].map((p) => `${p} ${require(`${p}/package.json`).version}`).join(", ")')
say "npm install <git URL> @pulumi/pulumi typescript took $(elapsed "$t") s: $versions"

# --- 3. Type-check -------------------------------------------------------------
t=$(date +%s)
npx tsc --noEmit
say "tsc --noEmit took $(elapsed "$t") s"

# --- 4. Preview, up, destroy on the lab ---------------------------------------
# The stack config a user writes with `pulumi config set` (the lab's hosts and
# login, test/lab/stack-config.ts); `ovslb:ssh` is secret: the harness takes it
# from the environment, as the CLI would decrypt it.
node - "$repo" "$inventory" "$host" "$bridge" <<'EOF'
const [repo, inventory, host, bridge] = process.argv.slice(2);
const { labConnections } = require(`${repo}/dist/test/lab/stack-config.js`);
const inv = JSON.parse(require("fs").readFileSync(inventory, "utf8"));
if (!inv.hosts[host]?.ovsRundir) throw new Error(`no OVS host ${host} in the lab`);
const c = labConnections(inv);
const config = { "ovslb:hosts": { [host]: c["ovslb:hosts"][host] }, "ovslb-install-check:host": host, "ovslb-install-check:bridge": bridge };
const yaml = ["config:", ...Object.entries(config).map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`)].join("\n");
require("fs").writeFileSync("Pulumi.install.yaml", `${yaml}\n`);
require("fs").writeFileSync(".secret-config.json", JSON.stringify({ "ovslb:ssh": c["ovslb:ssh"] }), { mode: 0o600 });
EOF
OVSLB_HARNESS_SECRET_CONFIG=$(cat .secret-config.json)
export OVSLB_HARNESS_SECRET_CONFIG
ns=$(node -p 'const h = require(process.argv[1]).hosts[process.argv[2]]; h.namespace' "$inventory" "$host")
db=$(node -p 'const h = require(process.argv[1]).hosts[process.argv[2]]; h.dbSock' "$inventory" "$host")
bridges() { ip netns exec "$ns" ovs-vsctl --db="unix:$db" list-br; }
harness() { node "$repo/dist/test/harness/cli.js" "$@" --cwd "$work/project" --stack install; }

lab_checks() {
  local t out
  t=$(date +%s)
  ! bridges | grep -qx "$bridge" || fail "$host already has a bridge $bridge (left by an interrupted run?): remove it first"
  out=$(harness preview) || fail "preview: $out"
  echo "$out"
  grep -q "OvsBridge.* create" <<<"$out" || fail "preview does not create the OvsBridge"
  bridges | grep -qx "$bridge" && fail "preview made $bridge on $host"
  out=$(harness up) || fail "up: $out"
  echo "$out"
  bridges | grep -qx "$bridge" || fail "up did not make $bridge on $host (bridges there: $(bridges | tr '\n' ' '))"
  out=$(harness preview --expect-no-changes) || fail "a preview after up would change something: $out"
  out=$(harness destroy) || fail "destroy: $out"
  echo "$out"
  ! bridges | grep -qx "$bridge" || fail "destroy left $bridge on $host"
  say "preview, up, preview (no changes), destroy on $host took $(elapsed "$t") s"
}
if [ -n "$lock" ]; then
  exec 9>>"$lock"
  flock -w 900 9 || fail "lab lock $lock not taken within 900 s"
fi
lab_checks
[ -z "$lock" ] || flock -u 9
say "passed in $(elapsed "$t0") s"
