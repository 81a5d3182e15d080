// Pulumi runs the program from inside its project: this loads index.ts as
// `npm run build:tools` compiled it.
module.exports = require("../../dist/bench/fleet/index.js");
