import { IRONIC_HEADERS } from "./ironic.js";

/**
 * Post an inspection's data as the ramdisk does (`POST /v1/continue_inspection`, what
 * ironic-python-agent sends; Ironic finds the node by its ports' MACs). A node the conductor
 * still holds (powering it on) answers 409: posted again, as the ramdisk retries. When the
 * accepted post was sent (performance.now()).
 */
export async function postInventory(ironic: string, body: unknown): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const postedAt = performance.now();
    const res = await fetch(`${ironic}/v1/continue_inspection`, {
      method: "POST",
      headers: IRONIC_HEADERS,
      body: JSON.stringify(body),
    });
    if (res.status === 202) return postedAt;
    if (res.status !== 409 || attempt === 50)
      throw new Error(`continue_inspection: ${res.status} ${await res.text()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
