import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { joinChunks, readRequestChunks } from "../../src/api/http/body.js";

/**
 * A large body is read a chunk per turn of the event loop, each chunk in memory of its own
 * (src/api/http/body.ts): left alone, libuv reads 2 MiB from a socket in one turn and node's
 * parser copies all of it, holding the loop every renew waits on.
 */
describe("a large request body is read without holding the event loop", function () {
  this.timeout(20_000);
  let server: Server;
  let url: string;
  /** per request: the most bytes that arrived within one turn of the loop, and the chunks */
  let seen: { mostInOneTurn: number; chunks: Buffer[] };

  before(async () => {
    server = createServer((req, res) => {
      let inTurn = 0;
      let mostInOneTurn = 0;
      let reading = true;
      const turn = () => {
        inTurn = 0;
        if (reading) setImmediate(turn);
      };
      setImmediate(turn);
      req.on("data", (chunk: Buffer) => {
        inTurn += chunk.length;
        mostInOneTurn = Math.max(mostInOneTurn, inTurn);
      });
      readRequestChunks(req, res, 8 * 1024 * 1024).then(
        (chunks) => {
          reading = false;
          seen = { mostInOneTurn, chunks };
          res.end("ok");
        },
        () => res.writeHead(400).end(),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  after(() => new Promise((resolve) => server.close(resolve)));

  const body = Buffer.from(Array.from({ length: 60_000 }, (_, i) => `{"n":${i},"x":"é"}`).join(","));

  for (const how of ["with a Content-Length", "chunked"] as const) {
    it(`reads 1 MiB and more ${how} at most two socket reads a turn, as it was sent`, async () => {
      expect(body.length).to.be.greaterThan(1024 * 1024);
      const sent =
        how === "chunked"
          ? {
              body: new ReadableStream({
                start(controller) {
                  for (let i = 0; i < body.length; i += 200_000)
                    controller.enqueue(body.subarray(i, i + 200_000));
                  controller.close();
                },
              }),
              duplex: "half" as const,
            }
          : { body };
      const res = await fetch(url, { method: "POST", ...sent });
      expect(await res.text()).to.equal("ok");
      expect(joinChunks(seen.chunks).equals(body)).to.equal(true);
      // One chunk a turn past the first 64 KiB (a read is at most 64 KiB); unpaused, about 2 MiB.
      expect(seen.mostInOneTurn).to.be.at.most(2 * 64 * 1024);
      // Each chunk spans memory of its own: the decode pool moves it to its worker as it is.
      for (const chunk of seen.chunks)
        expect([chunk.byteOffset, chunk.buffer.byteLength]).to.deep.equal([0, chunk.length]);
    });
  }
});
