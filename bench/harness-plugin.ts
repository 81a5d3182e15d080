import { readFileSync } from "node:fs";
import * as os from "node:os";
import { dirname } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { OvsBridge } from "../index";
import { deferSdkModules } from "../test/support/defer-sdk-modules";
import { registeredInputs, startProviderPlugin, unwrapSecrets } from "../test/support/provider-plugin";
import { fmtMs, median, type Benchmark, type Invariant } from "./common";
import { cpuOfStat } from "./fleet-preview";

/**
 * harness-plugin: what a new dynamic-provider plugin process costs the test
 * harness, as `pulumi` runs it ("eager": @pulumi/pulumi requires typescript
 * and @npmcli/arborist as it loads) and as the harness now runs it
 * ("deferred": test/support/defer-sdk-modules.cjs hands out stand-ins that
 * load those modules at their first use). Every harness step (preview, up,
 * refresh, destroy) starts one plugin and one program process, and both
 * load the SDK.
 *
 * Each run starts one plugin of each kind, one after the other (which goes
 * first alternates), through test/support/provider-plugin.ts as the
 * harness does, and sends it the `check` of an OvsBridge a program
 * registered (no host is contacted). Figures: the wall time from the spawn
 * to the plugin's port, and the process's CPU (utime + stime, /proc) when it
 * said its port and when it answered the check. The two must answer the
 * check alike. No lab needed.
 */

const FULL = { runs: 15 };
const SMOKE = { runs: 2 };
const TYPE = "pulumi-nodejs:dynamic/ovslb:OvsBridge";
const MODES = ["eager", "deferred"] as const;
type Mode = (typeof MODES)[number];

interface Sample {
  readyWallMs: number;
  readyCpuMs: number;
  checkedCpuMs: number;
  answer: unknown;
}

/** A process's CPU so far (user + system), from /proc: ms, in steps of the kernel's clock tick (10 ms). */
const processCpuMs = (pid: number) => cpuOfStat(readFileSync(`/proc/${pid}/stat`, "utf8")).own * 1000;

async function onePlugin(mode: Mode, inputs: Record<string, unknown>): Promise<Sample> {
  const start = performance.now();
  const plugin = await startProviderPlugin({ urn: `urn:pulumi:bench::harness-plugin::${TYPE}::b`, deferSdkModules: mode === "deferred" });
  try {
    const readyWallMs = performance.now() - start;
    const readyCpuMs = processCpuMs(plugin.pid);
    const answer = await plugin.check({}, inputs);
    return { readyWallMs, readyCpuMs, checkedCpuMs: processCpuMs(plugin.pid), answer };
  } finally {
    plugin.stop();
  }
}

export const harnessPluginBenchmark: Benchmark = {
  name: "harness-plugin",
  description:
    "the test harness's dynamic-provider plugin process: CPU to start and to its first check, the SDK's closure-serializer modules loaded eagerly (as pulumi) vs deferred",
  async run(ctx) {
    const size = ctx.smoke ? SMOKE : FULL;
    const registered = await registeredInputs(TYPE, () => {
      new OvsBridge("b", {
        host: {
          connection: {
            host: "192.0.2.10",
            user: "root",
            hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ",
            privateKeyPath: "/nonexistent/key",
          },
        },
        name: "br-bench",
      });
    });
    const inputs = unwrapSecrets(registered);
    const samples: Record<Mode, Sample[]> = { eager: [], deferred: [] };
    ctx.log(`${size.runs} run(s), a plugin of each kind per run, alternating`);
    for (let run = 0; run < size.runs; run++) {
      const order = run % 2 === 0 ? MODES : [...MODES].reverse();
      for (const mode of order) samples[mode].push(await onePlugin(mode, inputs));
      ctx.log(
        `  run ${run + 1}: ${MODES.map((m) => `${m}: ready ${fmtMs(samples[m].at(-1)!.readyWallMs)}, CPU ${fmtMs(samples[m].at(-1)!.checkedCpuMs)}`).join("; ")}`,
      );
    }
    const first = samples.eager[0].answer as { failures: unknown[] };
    const sdk = dirname(require.resolve("@pulumi/pulumi/package.json"));
    const deferred = JSON.parse(deferSdkModules(sdk).env.OVSLB_DEFER_SDK_MODULES) as { file: string }[];
    const invariants: Invariant[] = [
      {
        name: "every plugin, eager or deferred, answered the OvsBridge's check alike, with no failure",
        ok: first.failures.length === 0 && MODES.every((m) => samples[m].every((s) => isDeepStrictEqual(s.answer, samples.eager[0].answer))),
        detail: `failures ${JSON.stringify(first.failures)}`,
      },
      {
        name: "the harness defers at least typescript for this SDK",
        ok: deferred.some((m) => /typescript/.test(m.file)),
        detail: deferred.map((m) => m.file.replace(/.*node_modules\//, "")).join(", "),
      },
    ];
    const med = (m: Mode, k: keyof Omit<Sample, "answer">) => median(samples[m].map((s) => s[k]));
    const sdkVersion = (require("@pulumi/pulumi/package.json") as { version: string }).version;
    const cpus = os.cpus();
    const rows = [
      ["Wall, spawn to the plugin's port", "readyWallMs"],
      ["CPU at its port", "readyCpuMs"],
      ["CPU once it answered the first check", "checkedCpuMs"],
    ] as const;
    const markdown = [
      `## harness-plugin: a dynamic-provider plugin process of the test harness, eager vs deferred SDK modules`,
      "",
      `Machine: ${cpus[0]?.model ?? "unknown"} x${cpus.length}, Node ${process.version}, @pulumi/pulumi ${sdkVersion}; load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")} as the run ended; ${new Date().toISOString()}. Medians of ${size.runs} runs, the two kinds alternating.`,
      "",
      "| | eager (as `pulumi` runs it) | deferred (the harness) |",
      "| --- | --- | --- |",
      ...rows.map(([label, k]) => `| ${label} | ${fmtMs(med("eager", k))} | ${fmtMs(med("deferred", k))} |`),
      "",
      `Deferred: ${deferred.map((m) => `\`${m.file.replace(/.*node_modules\//, "")}\``).join(", ")}. CPU is the process's utime + stime from /proc, in steps of 10 ms.`,
    ].join("\n");
    return { name: "harness-plugin", markdown, data: { runs: size.runs, sdkVersion, deferred, samples }, invariants };
  },
};
