import { expect } from "chai";
import { readFileSync } from "node:fs";
import { finishedInspection } from "../../src/bridge/inspection/ironic-notification.js";

/** A real notification: Ironic 39's `provision_set.end` as a node left inspection (oslo's messagingv2 envelope). */
const DONE = readFileSync(new URL("../fixtures/ironic-inspection-done.json", import.meta.url), "utf8");

/** The fixture with its message changed by `edit` (the node's fields under ironic_object.data). */
function edited(edit: (message: any) => void): string {
  const envelope = JSON.parse(DONE);
  const message = JSON.parse(envelope["oslo.message"]);
  edit(message);
  return JSON.stringify({ ...envelope, "oslo.message": JSON.stringify(message) });
}

describe("Ironic notifications: which say an inspection finished", () => {
  it("provision_set.end, event done out of inspecting: the node and Ironic's finish time", () => {
    expect(finishedInspection(DONE)).to.deep.equal({
      node: "90d2cea0-e3d7-470b-acdb-ee7b4f9d44f5",
      finishedAt: "2026-12-03T18:37:49Z",
    });
  });

  it("a finish time without a zone is Ironic's UTC", () => {
    const body = edited(
      (m) => (m.payload["ironic_object.data"].inspection_finished_at = "2026-12-03T18:37:49.123456"),
    );
    expect(finishedInspection(body)).to.include({ finishedAt: "2026-12-03T18:37:49.123456Z" });
  });

  it("other notifications are not inspections: null", () => {
    const others = [
      edited((m) => (m.event_type = "baremetal.node.provision_set.start")),
      edited((m) => (m.payload["ironic_object.data"].event = "wait")),
      edited((m) => (m.payload["ironic_object.data"].previous_provision_state = "deploying")),
      JSON.stringify({
        "oslo.version": "2.0",
        "oslo.message": JSON.stringify({ event_type: "baremetal.port.create.end", payload: {} }),
      }),
    ];
    for (const body of others) expect(finishedInspection(body)).to.equal(null);
  });

  it("what cannot be read says why, and never throws", () => {
    expect(finishedInspection("{not json"))
      .to.have.property("unreadable")
      .that.match(/not JSON/);
    const noTime = edited((m) => (m.payload["ironic_object.data"].inspection_finished_at = null));
    expect(finishedInspection(noTime)).to.deep.equal({
      unreadable: "node 90d2cea0-e3d7-470b-acdb-ee7b4f9d44f5: no inspection_finished_at",
    });
    const badUuid = edited((m) => (m.payload["ironic_object.data"].uuid = "node-b"));
    expect(finishedInspection(badUuid)).to.have.property("unreadable").that.match(/uuid/);
  });
});
