# shardbridge in a container: built with `make build` in a full Node image, run as the
# unprivileged `node` user in a slim one with production dependencies only.
#   docker build --build-arg SHARDBRIDGE_COMMIT=$(git rev-parse --short=12 HEAD) -t shardbridge .
#   docker run -p 6390:6390 -e SHARDBRIDGE_STORE=redis+sentinel://... \
#     -v /etc/shardbridge:/etc/shardbridge:ro -e SHARDBRIDGE_TOKENS_FILE=/etc/shardbridge/tokens.json \
#     -e SHARDBRIDGE_SHARDS=/etc/shardbridge/shards shardbridge
FROM node:20-bookworm AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json Makefile ./
COPY scripts ./scripts
COPY src ./src
# No .git in the build context: the commit comes in as a build argument.
ARG SHARDBRIDGE_COMMIT=""
ENV SHARDBRIDGE_COMMIT=${SHARDBRIDGE_COMMIT}
RUN npm run build && npm ci --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
# setpriv (util-linux) for `shardbridge run`; bash for its watchdog.
RUN apt-get update && apt-get install -y --no-install-recommends util-linux bash \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/shardbridge
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
USER node
ENV SHARDBRIDGE_BIND=0.0.0.0 SHARDBRIDGE_LOG_FORMAT=json
EXPOSE 6390
ENTRYPOINT ["node", "/opt/shardbridge/dist/cli.js"]
CMD ["serve"]
