// Mocha's spec reporter plus one closing line "N passed, N failed, N skipped" that CI
// reads to count tests.
const Mocha = require("mocha");

class CountingSpec extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats;
      process.stdout.write(`\ntests: ${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

module.exports = CountingSpec;
