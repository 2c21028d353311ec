import { expect } from "chai";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import {
  freePort,
  listenerSpan,
  parseEphemeralRange,
  pickListenerPort,
} from "../../src/tools/chaos/free-port.js";

const listen = (port: number): Promise<Server> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });

describe("freePort: a listener's port outside the range outgoing connections get", function () {
  const ephemeral = parseEphemeralRange(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"));

  it("reads the kernel's range and picks under it, leaving the machine's service ports alone", () => {
    expect(parseEphemeralRange("32768\t60999\n")).to.deep.equal({ low: 32768, high: 60999 });
    expect(parseEphemeralRange("garbage")).to.equal(null);
    expect(parseEphemeralRange("60999 32768")).to.equal(null);
    expect(listenerSpan({ low: 32768, high: 60999 })).to.deep.equal({ low: 20000, high: 32767 });
    expect(listenerSpan({ low: 20500, high: 60999 }), "too narrow a span: the kernel's pick").to.equal(null);
    expect(listenerSpan(null)).to.equal(null);
  });

  it("hands out distinct ports under the ephemeral range, each one bindable", async function () {
    const span = listenerSpan(ephemeral);
    if (span === null) this.skip();
    const ports = await Promise.all(Array.from({ length: 40 }, () => freePort()));
    expect(new Set(ports).size, "no port handed out twice").to.equal(ports.length);
    for (const port of ports) expect(port).to.be.within(span.low, span.high);
    const servers = await Promise.all(ports.map(listen));
    await Promise.all(servers.map((server) => new Promise((done) => server.close(done))));
  });

  it("skips a port another listener holds, and one it handed out before", async function () {
    const span = listenerSpan(ephemeral);
    if (span === null) this.skip();
    const size = span.high - span.low + 1;
    const draw = (port: number) => (port - span.low + 0.5) / size;
    const [heldPort, givenPort, freeOne] = [await freePort(), await freePort(), await freePort()];
    const held = await listen(heldPort);
    try {
      const handedOut = new Set([givenPort]);
      const draws = [heldPort, givenPort, freeOne].map(draw);
      const port = await pickListenerPort(span, () => draws.shift() ?? Math.random(), handedOut);
      expect(port, "the held port and the handed-out one are passed over").to.equal(freeOne);
      expect([...handedOut].sort()).to.deep.equal([givenPort, freeOne].sort());
    } finally {
      await new Promise((done) => held.close(done));
    }
  });
});
