import { createRequire } from "node:module";

/**
 * Warnings the Pulumi CLI shows as warnings. A dynamic provider runs in the
 * plugin process of @pulumi/pulumi/cmd/dynamic-provider, which is started
 * with the engine's address as its argument but never connects to it, so the
 * SDK's `pulumi.log.warn` there only writes to the plugin's stderr (the CLI
 * shows that as info). A warning is sent to the engine's Log RPC at that
 * address instead, with the SDK's own gRPC client; in any other process (a
 * provider called in process, a test, a benchmark) it goes to stderr.
 */

type LogClient = { log(req: unknown, done: (err: Error | null) => void): void };

let client: LogClient | null | undefined;

/** The engine's Log client, when this process is the dynamic-provider plugin. */
function engineClient(): LogClient | null {
  if (client !== undefined) return client;
  const [script, address] = process.argv.slice(1);
  if (!script || !address || !/dynamic-provider(\/index\.js)?$/.test(script) || !/^[\w.-]+:\d+$/.test(address)) return (client = null);
  // The SDK's own gRPC and engine stubs, resolved from the SDK so they are the very modules it uses.
  const sdk = createRequire(require.resolve("@pulumi/pulumi"));
  const grpc = sdk("@grpc/grpc-js") as { credentials: { createInsecure(): unknown } };
  const rpc = sdk("./proto/engine_grpc_pb") as { EngineClient: new (address: string, credentials: unknown) => LogClient };
  return (client = new rpc.EngineClient(address, grpc.credentials.createInsecure()));
}

/** Sends a warning to the engine (stderr outside the plugin); never fails the operation that warns. */
export async function warn(message: string): Promise<void> {
  const engine = engineClient();
  if (!engine) {
    process.stderr.write(`warning: ${message}\n`);
    return;
  }
  const pb = createRequire(require.resolve("@pulumi/pulumi"))("./proto/engine_pb") as {
    LogRequest: new () => { setSeverity(s: number): unknown; setMessage(m: string): unknown };
    LogSeverity: { WARNING: number };
  };
  const req = new pb.LogRequest();
  req.setSeverity(pb.LogSeverity.WARNING);
  req.setMessage(message);
  await new Promise<void>((resolve) => engine.log(req, () => resolve()));
}
