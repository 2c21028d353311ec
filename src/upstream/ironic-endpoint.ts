/**
 * Where Ironic's API is, read from the URL an operator gives (`--ironic`): its origin, the
 * path it is served under (devstack's `/baremetal`; "" at the root) and the credentials
 * the URL carries (Ironic's http_basic). Read once, here, for the bridge's own calls and
 * the fenced endpoint alike. Pure.
 */
export interface IronicEndpoint {
  /** `http:` or `https:` */
  protocol: string;
  hostname: string;
  port: number;
  /** scheme, host and port: no credentials, no path */
  origin: string;
  /** no trailing slash; "" at the root */
  basePath: string;
  /** the URL's `user:password`, decoded, or null when it has none */
  credentials: { user: string; password: string } | null;
}

export function parseIronicEndpoint(configured: string): IronicEndpoint {
  const url = new URL(configured);
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new Error(`${url.protocol} is not http: or https:`);
  return {
    protocol: url.protocol,
    hostname: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port),
    origin: url.origin,
    basePath: url.pathname.replace(/\/+$/, ""),
    credentials:
      url.username === "" && url.password === ""
        ? null
        : { user: decodeURIComponent(url.username), password: decodeURIComponent(url.password) },
  };
}
