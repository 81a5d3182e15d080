/**
 * `ovs-ofctl dump-ports-desc` (OpenFlow 1.4+), parsed: each port's number,
 * name and whether its state carries LIVE, which is what a select or
 * fast-failover bucket's watch_port follows.
 */
export interface PortDesc {
  ofport: number;
  name: string;
  live: boolean;
}

export function parsePortsDesc(dump: string): PortDesc[] {
  const ports: PortDesc[] = [];
  let current: PortDesc | undefined;
  for (const line of dump.split("\n")) {
    const head = /^ (\d+)\(([^)]*)\): /.exec(line);
    if (head) {
      current = { ofport: Number(head[1]), name: head[2], live: false };
      ports.push(current);
      continue;
    }
    if (/^ \S/.test(line)) current = undefined; // LOCAL and other reserved ports
    const state = /^\s+state:\s+(.*)$/.exec(line);
    if (state && current) current.live = state[1].split(/\s+/).includes("LIVE");
  }
  return ports;
}
