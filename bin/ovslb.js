#!/usr/bin/env node
// `npx ovslb doctor ...`: the package's command (provider/doctor/cli.ts, compiled into dist/ by prepare).
"use strict";
const { main, processIo } = require("../dist/provider/doctor/cli.js");

main(process.argv.slice(2), processIo()).then(
  (status) => {
    // Output first, then the status: an idle socket's timer must not keep the process, nor cut the output.
    process.stdout.write("", () => process.exit(status));
  },
  (err) => {
    process.stderr.write(`ovslb: ${err && err.message ? err.message : String(err)}\n`, () => process.exit(2));
  },
);
