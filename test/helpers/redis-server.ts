// The private redis-server the tests start lives in src/tools/chaos (the chaos runner starts one too).
export { PrivateRedisServer as TestRedisServer } from "../../src/tools/chaos/redis-server.js";
export { freePort } from "../../src/tools/chaos/free-port.js";
