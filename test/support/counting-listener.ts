import { createServer, type Server } from "node:net";

/**
 * A TCP listener on 127.0.0.1 that counts the connections made to it and
 * drops each at once: where a host's SSH would be, for a test that counts
 * login attempts without any host.
 */
export class CountingListener {
  /** Connections made so far (a test sets it back to 0 before what it counts). */
  connections = 0;
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async open(): Promise<CountingListener> {
    const counter = { listener: undefined as CountingListener | undefined };
    const server = createServer((s) => {
      if (counter.listener) counter.listener.connections += 1;
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    counter.listener = new CountingListener(server, (server.address() as { port: number }).port);
    return counter.listener;
  }

  close(): void {
    this.server.close();
  }
}
