// Loaded by mocha before the tests (.mocharc.json "require").
import { logger } from "../../src/runtime/log.js";
import { stopSharedServer } from "./backends.js";
import { stopSharedCloud } from "./openstack/cloud.js";

// Request logs are useful in a running bridge, noise in a test report.
// SHARDBRIDGE_LOG_LEVEL still wins when set.
if (process.env.SHARDBRIDGE_LOG_LEVEL === undefined) logger.level = "warn";

// Coverage (c8, `make test`) counts what this process runs. The bridges, agents and `run`s
// the tests start are processes of their own: left uncounted, so that hundreds of them do
// not each write a coverage file (and one killed with -9 writes none anyway). This process
// keeps its own: Node read the setting when it started.
delete process.env.NODE_V8_COVERAGE;

/** Root hooks: stop the redis-server shared by the suites once every test has run. */
export const mochaHooks = {
  async afterAll() {
    await stopSharedServer();
    await stopSharedCloud();
  },
};
