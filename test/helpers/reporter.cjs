// Mocha's spec reporter plus one closing line "N passed, N failed, N skipped" that CI
// reads to count tests, the slowest test files (CI has 20 minutes for all of them: this
// says where they go), and a watchdog for what a test left running.
const Mocha = require("mocha");
const { relative } = require("node:path");

// After the last test the process must exit by itself. If anything a test started (a
// server, a socket, a worker, an interval) still holds it open after this long, say
// what and exit non-zero, so CI fails in seconds rather than hanging until its timeout.
const LEAK_GRACE_MS = 10_000;
/** How many of the slowest test files the closing lines name. */
const SLOWEST_FILES = 12;

class CountingSpec extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    // Each file's wall time, hooks included: from its first top-level suite's start to its last's end.
    const fileMs = new Map();
    const started = new Map();
    const { EVENT_SUITE_BEGIN, EVENT_SUITE_END } = Mocha.Runner.constants;
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (suite.parent?.root === true && suite.file) started.set(suite, performance.now());
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      const at = started.get(suite);
      if (at !== undefined) fileMs.set(suite.file, (fileMs.get(suite.file) ?? 0) + performance.now() - at);
    });
    // The failures again, a line each, beside the closing count: CI keeps only the tail of
    // the output, where the spec reporter's own list (far above) may be cut off.
    const failed = [];
    runner.on(Mocha.Runner.constants.EVENT_TEST_FAIL, (test, error) => {
      const file = test.file ? relative(process.cwd(), test.file) : "?";
      const message = String(error?.message ?? error)
        .replace(/\s*\n\s*/g, " | ")
        .slice(0, 1_500);
      failed.push(`  ${file}: ${test.fullTitle()}\n      ${message}`);
    });
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats;
      if (failed.length > 0) process.stdout.write(`\nfailed:\n${failed.join("\n")}\n`);
      const slowest = [...fileMs].sort((a, b) => b[1] - a[1]).slice(0, SLOWEST_FILES);
      if (slowest.length > 1) {
        const total = [...fileMs.values()].reduce((sum, ms) => sum + ms, 0);
        process.stdout.write(`\nslowest test files (of ${(total / 60_000).toFixed(1)} min in all):\n`);
        for (const [file, ms] of slowest)
          process.stdout.write(
            `  ${(ms / 1000).toFixed(1).padStart(6)} s  ${relative(process.cwd(), file)}\n`,
          );
      }
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
