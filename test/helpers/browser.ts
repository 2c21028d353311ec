import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

/** Debian's chromium (scripts/test-packages.sh installs it); playwright never downloads one here. */
export const CHROMIUM = "/usr/bin/chromium";

/**
 * A real headless Chromium with a new, empty profile of its own, quiet on the network
 * (no update checks, no sync, no QUIC): `close` ends it and removes the profile.
 */
export async function openBrowser(
  viewport = { width: 1280, height: 800 },
): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), "sb-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
