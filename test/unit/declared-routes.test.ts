import { expect } from "chai";
import { expressPath, urlPattern } from "../../src/api/http/declared-routes.js";

describe("A route's path, declared once, as each HTTP stack matches it", () => {
  it("is express's path with a :name for each {name}", () => {
    expect(expressPath("/v1/shards/{shard}/lease")).to.equal("/v1/shards/:shard/lease");
    expect(expressPath("/fenced/{shard}/lease-{token}-{fence_key}/ironic")).to.equal(
      "/fenced/:shard/lease-:token-:fence_key/ironic",
    );
  });

  it("matches a request URL as express does: any case, one trailing slash, a query; each {name} one segment", () => {
    const lease = urlPattern("/v1/shards/{shard}/lease");
    expect(lease.exec("/v1/shards/rack-1/lease")?.slice(1)).to.deep.equal(["rack-1"]);
    expect(lease.exec("/V1/Shards/rack%201/LEASE/?x=1")?.slice(1)).to.deep.equal(["rack%201"]);
    for (const miss of [
      "/v1/shards//lease",
      "/v1/shards/a/b/lease",
      "/v1/shards/a/lease//",
      "/v1/shards/a/leases",
      "/v1/shards/a/lease/more",
      "/x/v1/shards/a/lease",
    ])
      expect(lease.test(miss), miss).to.equal(false);
    // A literal's dots are dots, not any character.
    expect(urlPattern("/v1/a.b").test("/v1/axb")).to.equal(false);
  });
});
