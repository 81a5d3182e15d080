/** The framing of OVS's JSON-RPC streams (OVSDB, RFC 7047, and the unixctl sockets of ovs-vswitchd and ovsdb-server). */

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * Splits a JSON-RPC byte stream into JSON objects. OVSDB and unixctl send
 * them back to back with no delimiter, so a message ends where its
 * outermost brace closes, outside strings. Bytes are scanned, not text: every byte of a multi-byte
 * UTF-8 character is >= 0x80, so a character split across chunks is only
 * decoded once its message is whole.
 */
export class JsonStreamParser {
  private partial: Buffer[] = [];
  private depth = 0;
  private inString = false;
  private escaped = false;

  push(chunk: Buffer): unknown[] {
    const messages: unknown[] = [];
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (byte === BACKSLASH) this.escaped = true;
        else if (byte === QUOTE) this.inString = false;
      } else if (this.depth === 0) {
        if (WHITESPACE.has(byte)) start = i + 1;
        else if (byte === OPEN_BRACE) this.depth = 1;
        else throw new Error(`JSON-RPC stream: expected a JSON object, got ${JSON.stringify(String.fromCharCode(byte))}`);
      } else if (byte === QUOTE) {
        this.inString = true;
      } else if (byte === OPEN_BRACE) {
        this.depth++;
      } else if (byte === CLOSE_BRACE && --this.depth === 0) {
        this.partial.push(chunk.subarray(start, i + 1));
        messages.push(JSON.parse(Buffer.concat(this.partial).toString("utf8")));
        this.partial = [];
        start = i + 1;
      }
    }
    if (start < chunk.length) this.partial.push(chunk.subarray(start));
    return messages;
  }
}
