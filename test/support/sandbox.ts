import { existsSync, mkdtempSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { LocalRunner } from "../../provider/transport/exec";

/**
 * One ovsdb-server + ovs-vswitchd (userspace datapath) in a temporary
 * directory and a network namespace of its own (the netdev datapath makes an
 * `ovs-netdev` tap, which goes away with the namespace), for transport tests
 * that need a real OVS but no network. Lab tests (several hosts over SSH)
 * use the lab instead.
 */
export interface OvsSandbox {
  dir: string;
  rundir: string;
  dbSock: string;
  /** Runs ovs-* commands against this sandbox (OVS_RUNDIR set). */
  runner: LocalRunner;
  /** Creates a netdev bridge and returns its management socket address (unix:...). */
  addBridge(name: string): string;
  stop(): void;
}

function sh(argv: string[], env: NodeJS.ProcessEnv): string {
  return execFileSync(argv[0], argv.slice(1), { env, encoding: "utf8" });
}

export function startOvsSandbox(opts: { vswitchd?: boolean } = {}): OvsSandbox {
  const dir = mkdtempSync(join(tmpdir(), "ovslb-sbx-"));
  const netns = `ovslb-sbx-${dir.slice(-6)}`;
  execFileSync("ip", ["netns", "add", netns]);
  const env = { ...process.env, OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir, OVS_SYSCONFDIR: dir };
  const db = join(dir, "conf.db");
  const dbSock = join(dir, "db.sock");
  sh(["ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema"], env);
  sh(
    [
      "ovsdb-server",
      db,
      `--remote=punix:${dbSock}`,
      `--pidfile=${join(dir, "ovsdb-server.pid")}`,
      "--detach",
      "-vconsole:err",
      `--log-file=${join(dir, "ovsdb-server.log")}`,
    ],
    env,
  );
  sh(["ovs-vsctl", `--db=unix:${dbSock}`, "--no-wait", "init"], env);
  if (opts.vswitchd !== false) {
    sh(
      [
        "ip",
        "netns",
        "exec",
        netns,
        "ovs-vswitchd",
        `unix:${dbSock}`,
        "--enable-dummy",
        "--disable-system",
        "--disable-system-route",
        `--pidfile=${join(dir, "ovs-vswitchd.pid")}`,
        "--detach",
        "-vconsole:err",
        `--log-file=${join(dir, "ovs-vswitchd.log")}`,
      ],
      env,
    );
  }
  const stop = () => {
    for (const daemon of ["ovs-vswitchd", "ovsdb-server"]) {
      try {
        const pid = Number(readFileSync(join(dir, `${daemon}.pid`), "utf8").trim());
        process.kill(pid, "SIGTERM");
        for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) execFileSync("sleep", ["0.02"]);
      } catch {
        /* not running */
      }
    }
    rmSync(dir, { recursive: true, force: true });
    execFileSync("ip", ["netns", "del", netns]);
  };
  return {
    dir,
    rundir: dir,
    dbSock,
    runner: new LocalRunner("sandbox", env),
    addBridge(name: string) {
      sh(
        [
          "ovs-vsctl",
          `--db=unix:${dbSock}`,
          "add-br",
          name,
          "--",
          "set",
          "bridge",
          name,
          "datapath_type=netdev",
          "protocols=OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15",
        ],
        env,
      );
      return `unix:${join(dir, `${name}.mgmt`)}`;
    },
    stop,
  };
}
