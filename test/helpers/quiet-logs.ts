// Loaded by mocha before the tests (.mocharc.json "require"): request logs are useful in
// a running bridge, noise in a test report. SHARDBRIDGE_LOG_LEVEL still wins when set.
import { logger } from "../../src/log.js";

if (process.env.SHARDBRIDGE_LOG_LEVEL === undefined) logger.level = "warn";
