// Mocha's spec reporter plus one closing line "N passed, N failed, N skipped" that CI
// reads to count tests, and a watchdog for what a test left running.
const Mocha = require("mocha");

// After the last test the process must exit by itself. If anything a test started (a
// server, a socket, a worker, an interval) still holds it open after this long, say
// what and exit non-zero, so CI fails in seconds rather than hanging until its timeout.
const LEAK_GRACE_MS = 10_000;

class CountingSpec extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats;
      process.stdout.write(`\ntests: ${passes} passed, ${failures} failed, ${pending} skipped\n`);
      setTimeout(() => {
        const held = process.getActiveResourcesInfo().filter((kind) => kind !== "TTYWrap");
        process.stderr.write(
          `\ntests: the process did not exit ${LEAK_GRACE_MS / 1000} s after the last test; ` +
            `still open: ${held.join(", ") || "(nothing Node reports)"}\n`,
        );
        // Mocha sets the exit code from the failure count in its own "exit" listener;
        // this one runs after it.
        process.on("exit", () => {
          process.exitCode = 1;
        });
        process.exit(1);
      }, LEAK_GRACE_MS).unref();
    });
  }
}

module.exports = CountingSpec;
