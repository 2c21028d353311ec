import { Service } from "./service.js";
import { openstackBin } from "./venv.js";

/**
 * A WSGI application module's `application` served by cheroot (an Ironic dependency, so
 * pinned with it). The applications read their options from sys.argv as well as their
 * files (oslo.config), so this script's own arguments must not reach them: the module is
 * imported with an argv of the program's name alone.
 */
const SERVE = `
import importlib, sys
module, port, prog = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.argv = [prog]
application = importlib.import_module(module).application
from cheroot.wsgi import Server
Server(("127.0.0.1", port), application, numthreads=4).safe_start()
`;

/**
 * `module`'s WSGI application (`keystone.wsgi.api`, `glance.wsgi.api`, ...) on 127.0.0.1:`port`,
 * as a WSGI server serves it; `env` tells it where its files are (OS_<PROJECT>_CONFIG_DIR).
 * Started, not yet answering: wait with `service.until`.
 */
export function serveWsgi(
  name: string,
  module: string,
  port: number,
  log: string,
  env: NodeJS.ProcessEnv,
): Service {
  return Service.start(name, openstackBin("python"), ["-c", SERVE, module, String(port), name], log, env);
}
