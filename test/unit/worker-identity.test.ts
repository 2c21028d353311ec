import { expect } from "chai";
import { workerIdentity } from "../../src/bridge/ironic/worker-identity.js";

/**
 * A bridge's name among the Ironic delivery workers: its listening address in its network
 * namespace on this boot, the same for a restarted process (which takes its partitions
 * back at once), another for any address two live processes could hold side by side.
 */
describe("the Ironic delivery worker's name", () => {
  it("is the same for the same address, another for another port or bind address", () => {
    const name = workerIdentity("127.0.0.1", 6390);
    expect(workerIdentity("127.0.0.1", 6390)).to.equal(name);
    expect(name).to.match(/:6390@[0-9a-f]{12}$/);
    expect(workerIdentity("127.0.0.1", 6391)).to.not.equal(name);
    expect(workerIdentity("0.0.0.0", 6390)).to.not.equal(name);
  });

  it("without a fixed port it is this process's own, never taken again", () => {
    const first = workerIdentity("127.0.0.1", 0);
    expect(first).to.contain(`:${process.pid}:`);
    expect(workerIdentity("127.0.0.1", 0)).to.not.equal(first);
  });
});
