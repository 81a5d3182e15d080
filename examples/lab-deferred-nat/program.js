// Pulumi runs the program from inside its project: this loads index.ts as
// `npm run build:tools` compiled it (in your own project, point main at your
// TypeScript directly; the CLI compiles it).
module.exports = require("../../dist/examples/lab-deferred-nat/index.js");
