import { spawnSync } from "node:child_process";
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import type { Benchmark, BenchContext, Invariant } from "./common";
import { childResult, fmtInt, fmtMs, median } from "./common";
import { flowStreamParser, groupStreamParser, parseFlows, parseGroups, type DumpStreamParser } from "../provider/openflow";

/**
 * scale-reading (issue 13): parsing `dump-groups` and `dump-flows` of a
 * gateway holding 10,000 groups and 1,000,000 buckets, buffered whole (what
 * the transport did: the SSH channel's output concatenated into one string,
 * then parsed) against streamed (what it does now: each chunk parsed into
 * lines as it arrives, only the unfinished line kept between chunks), side
 * by side in one run.
 *
 * The dump is generated in the text OVS 3.1 prints (ovs-ofctl -O OpenFlow15
 * --no-names; taken from the lab: test/fixtures/dumps and a 200-group dump of
 * a lab bridge): a reply header before every ~64 KiB OpenFlow reply
 * (`flags=[more]` on all but the last), one line per group, buckets as
 * DeferredNatLoadBalancer writes them. It is written to a file once; each
 * measurement is a fresh node process (--expose-gc) reading that file: whole
 * (readFileSync, toString, parse) or as a stream of 32 KiB chunks (an SSH
 * channel's window packet is 32 KiB), so the figures are the parse and what
 * it holds, not the generator's.
 *
 * Memory: the process's peak resident set (process.resourceUsage().maxRSS)
 * and what is still held once the parse is done (heap and buffers after a
 * full gc, the parsed result alive). "Streamed, folded" hands each group to
 * a callback that keeps a count only: the bound of streaming when the caller
 * does not keep every entry.
 */

const FULL = { groups: 10_000, buckets: 100, runs: 3 };
const SMOKE = { groups: 200, buckets: 100, runs: 1 };
const CHUNK = 32 * 1024;
const GW_MAC = "02:00:0a:00:00:0b";

interface Figures {
  wallMs: number;
  cpuMs: number;
  peakRssMiB: number;
  rssBeforeMiB: number;
  /** Heap plus array buffers after a full gc, with the parse's result still referenced, MiB. */
  retainedMiB: number;
  entries: number;
  buckets: number;
}

const hex2 = (n: number) => (n & 255).toString(16).padStart(2, "0");

/** Writes the gateway's two dumps; returns their paths and sizes. */
async function writeDumps(dir: string, size: { groups: number; buckets: number }): Promise<{ groups: string; flows: string }> {
  const groups = join(dir, "dump-groups.txt");
  const flows = join(dir, "dump-flows.txt");
  const write = async (path: string, lines: Iterable<string>) => {
    const out = createWriteStream(path);
    for (const line of lines) if (!out.write(line)) await new Promise<void>((r) => out.once("drain", () => r()));
    await new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve())));
  };
  // OpenFlow bytes of one such group (OF1.5 group desc: 16 B; per bucket 16 B + weight 8 B + 2 set_field 16 B + output 16 B): replies hold up to 65,535 B.
  const perReply = Math.max(1, Math.floor(65_535 / (16 + size.buckets * 64)));
  const header = (more: boolean) => `OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):${more ? " flags=[more]" : ""}\n`;
  function* groupLines() {
    for (let g = 0; g < size.groups; g++) {
      if (g % perReply === 0) yield header(g + perReply < size.groups);
      // Group ids as ovslb derives them are spread over 32 bits; bucket ids too.
      const id = 1 + (((g * 2654435761) >>> 0) % 0xffffff00);
      const buckets: string[] = [];
      for (let b = 0; b < size.buckets; b++) {
        const bucketId = 1 + ((((g * 131 + b) * 2246822519) >>> 0) % 0xffffff00);
        buckets.push(
          `bucket=bucket_id:${bucketId},weight:100,actions=set_field:${GW_MAC}->eth_src,set_field:02:${hex2(g >> 16)}:${hex2(g >> 8)}:${hex2(g)}:${hex2(b >> 8)}:${hex2(b)}->eth_dst,IN_PORT`,
        );
      }
      yield ` group_id=${id},type=select,selection_method=hash,fields(ip_src,ip_dst,tcp_src,tcp_dst),${buckets.join(",")}\n`;
    }
  }
  function* flowLines() {
    // OF1.5 flow stats of these flows are ~120 B: about 540 per reply.
    for (let g = 0; g < size.groups; g++) {
      if (g % 540 === 0) yield `OFPST_FLOW reply (OF1.5) (xid=0x2):${g + 540 < size.groups ? " flags=[more]" : ""}\n`;
      const id = 1 + (((g * 2654435761) >>> 0) % 0xffffff00);
      yield ` cookie=0xb5ebd902f2332e1, duration=812.154s, table=0, n_packets=${g * 7}, n_bytes=${g * 7 * 66}, idle_age=3, priority=100,tcp,in_port=1,nw_dst=10.${64 + (g >> 16)}.${(g >> 8) & 255}.${g & 255},tp_dst=80 actions=group:${id}\n`;
    }
    yield " cookie=0x0, duration=802.488s, table=0, n_packets=558, n_bytes=36439, idle_age=93, priority=0 actions=NORMAL\n";
  }
  await write(groups, groupLines());
  await write(flows, flowLines());
  return { groups, flows };
}

// ---------------------------------------------------------------- one measurement (child process)

declare const gc: () => void;

/** What the transport did: every chunk kept, concatenated, decoded, then parsed whole (the text goes out of scope with this call). */
function parseBuffered(file: string, kind: "groups" | "flows"): unknown[] {
  const text = readFileSync(file).toString("utf8");
  return kind === "groups" ? parseGroups(text) : parseFlows(text);
}

async function measureChild(mode: "buffered" | "streamed" | "folded", kind: "groups" | "flows", file: string): Promise<Figures> {
  const rssBeforeMiB = process.memoryUsage().rss / 2 ** 20;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let result: unknown[] = [];
  let entries = 0;
  let buckets = 0;
  const count = (e: { buckets?: readonly unknown[] }) => {
    entries++;
    buckets += e.buckets?.length ?? 0;
  };
  if (mode === "buffered") {
    result = parseBuffered(file, kind);
    result.forEach((e) => count(e as { buckets?: readonly unknown[] }));
  } else {
    const keep = mode === "streamed";
    const onEntry = (e: { buckets?: readonly unknown[] }) => {
      count(e);
      if (keep) result.push(e);
    };
    const parser: DumpStreamParser = kind === "groups" ? groupStreamParser(onEntry) : flowStreamParser((f) => onEntry(f as { buckets?: readonly unknown[] }));
    await new Promise<void>((resolve, reject) => {
      createReadStream(file, { highWaterMark: CHUNK })
        .on("data", (chunk) => parser.push(chunk as Buffer))
        .on("end", () => resolve())
        .on("error", reject);
    });
    parser.end();
  }
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  const peakRssMiB = process.resourceUsage().maxRSS / 1024;
  gc();
  const m = process.memoryUsage();
  const figures = {
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    peakRssMiB,
    rssBeforeMiB,
    retainedMiB: (m.heapUsed + m.arrayBuffers) / 2 ** 20,
    entries,
    buckets,
  };
  if (result.length < 0) throw new Error("unreachable: keeps the result alive through the gc");
  return figures;
}

if (process.argv[2] === "--child") {
  const { mode, kind, file } = JSON.parse(process.argv[3]);
  childResult(measureChild(mode, kind, file));
}

// ---------------------------------------------------------------- the run

function child(ctx: BenchContext, mode: string, kind: string, file: string): Figures {
  const r = spawnSync(process.execPath, ["--expose-gc", __filename, "--child", JSON.stringify({ mode, kind, file })], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`scale-reading child ${mode} ${kind} failed (exit ${r.status}): ${r.stderr.slice(-2000)}`);
  const f = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Figures;
  ctx.log(`  ${kind} ${mode}: ${fmtMs(f.wallMs)} wall, ${fmtMs(f.cpuMs)} CPU, peak ${f.peakRssMiB.toFixed(0)} MiB, held ${f.retainedMiB.toFixed(0)} MiB`);
  return f;
}

const MODES = ["buffered", "streamed", "folded"] as const;
const LABEL: Record<(typeof MODES)[number], string> = {
  buffered: "buffered: whole output as one string, then parsed (before)",
  streamed: "streamed: parsed per line as chunks arrive, every entry kept (now)",
  folded: "streamed, folded: each entry to a callback that keeps a count",
};

export const scaleReadingBenchmark: Benchmark = {
  name: "scale-reading",
  description: "issue 13: parsing dump-groups and dump-flows of a gateway of 10,000 groups and 1,000,000 buckets, streamed vs buffered",
  async run(ctx) {
    const size = ctx.smoke ? SMOKE : FULL;
    const dir = mkdtempSync(join(os.tmpdir(), "ovslb-scale-reading-"));
    try {
      ctx.log(`writing the dumps: ${fmtInt(size.groups)} groups x ${size.buckets} buckets`);
      const files = await writeDumps(dir, size);
      const bytes = { groups: statSync(files.groups).size, flows: statSync(files.flows).size };
      const results: Record<string, Record<string, Figures[]>> = { groups: {}, flows: {} };
      for (const kind of ["groups", "flows"] as const) {
        for (const mode of MODES) results[kind][mode] = Array.from({ length: size.runs }, () => child(ctx, mode, kind, files[kind]));
      }
      const invariants: Invariant[] = [];
      for (const kind of ["groups", "flows"] as const) {
        const want = { entries: kind === "groups" ? size.groups : size.groups + 1, buckets: kind === "groups" ? size.groups * size.buckets : 0 };
        const all = MODES.flatMap((m) => results[kind][m]);
        invariants.push({
          name: `every way of parsing the ${kind} dump reads all ${fmtInt(want.entries)} entries${kind === "groups" ? ` and ${fmtInt(want.buckets)} buckets` : ""}`,
          ok: all.every((f) => f.entries === want.entries && f.buckets === want.buckets),
          detail: all.map((f) => `${f.entries}/${f.buckets}`).join(" "),
        });
      }
      // The parsers are the provider's: the same first group either way.
      const head = readFileSync(files.groups, "utf8").slice(0, 200_000).split("\n").slice(0, 3).join("\n");
      const streamed: unknown[] = [];
      const p = groupStreamParser((g) => streamed.push(g));
      p.push(Buffer.from(head));
      p.end();
      invariants.push({
        name: "streamed and buffered parses agree (first reply's groups)",
        ok:
          JSON.stringify(streamed, (_k, v) => (typeof v === "bigint" ? String(v) : v)) ===
          JSON.stringify(parseGroups(head), (_k, v) => (typeof v === "bigint" ? String(v) : v)),
      });

      const med = (fs: Figures[], k: keyof Figures) => median(fs.map((f) => f[k]));
      const rows = (["groups", "flows"] as const).flatMap((kind) =>
        MODES.map((mode) => {
          const fs = results[kind][mode];
          return `| dump-${kind} (${fmtInt(Math.round(bytes[kind] / 2 ** 20))} MiB) | ${LABEL[mode]} | ${fmtMs(med(fs, "wallMs"))} | ${fmtMs(med(fs, "cpuMs"))} | ${med(fs, "peakRssMiB").toFixed(0)} MiB | ${med(fs, "retainedMiB").toFixed(0)} MiB |`;
        }),
      );
      const cpus = os.cpus();
      const markdown = [
        `## scale-reading: ${fmtInt(size.groups)} groups x ${size.buckets} buckets (${fmtInt(size.groups * size.buckets)} buckets), ${fmtInt(size.groups)} flows`,
        "",
        `Machine: ${cpus[0]?.model ?? "unknown"} x${cpus.length}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}, Node ${process.version}; load average ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(" ")} as the run ended; ${new Date().toISOString()}.`,
        "",
        `Dumps generated in OVS 3.1's text (${fmtInt(bytes.groups)} B of dump-groups, ${fmtInt(bytes.flows)} B of dump-flows), read from a file by a fresh node process per figure: whole, or in ${CHUNK / 1024} KiB chunks. Medians of ${size.runs}. Peak memory is the process's maximum resident set (a fresh node holds about 45 MiB before it starts); held is heap and buffers after a full gc with the result still referenced.`,
        "",
        "| Dump | Parse | Wall | CPU | Peak memory (RSS) | Held after |",
        "| --- | --- | --- | --- | --- | --- |",
        ...rows,
      ].join("\n");
      return { name: "scale-reading", markdown, invariants, data: { size, bytes, chunk: CHUNK, results } };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
