// The private redis-server the tests start lives in src/chaos (the chaos runner starts one too).
export { PrivateRedisServer as TestRedisServer, freePort } from "../../src/chaos/redis-server.js";
