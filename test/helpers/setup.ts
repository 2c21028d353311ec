// Loaded by mocha before the tests (.mocharc.json "require").
import { logger } from "../../src/runtime/log.js";
import { stopSharedServer } from "./backends.js";
import { stopSharedCloud } from "./openstack/cloud.js";

// Request logs are useful in a running bridge, noise in a test report.
// SHARDBRIDGE_LOG_LEVEL still wins when set.
if (process.env.SHARDBRIDGE_LOG_LEVEL === undefined) logger.level = "warn";

/** Root hooks: stop the redis-server shared by the suites once every test has run. */
export const mochaHooks = {
  async afterAll() {
    await stopSharedServer();
    await stopSharedCloud();
  },
};
