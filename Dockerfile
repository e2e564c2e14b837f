# The fan-out worker (and, with another command, the simulator) as one image.
# Node 26 is the Active LTS line; the SDK's native core is prebuilt for linux x64 and arm64 glibc, which Debian provides.
ARG NODE_IMAGE=node:26-trixie-slim

# Compiles TypeScript and prebuilds the workflow bundle, so a worker starts without bundling.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

# Production dependencies only: no TypeScript, jest or @temporalio/testing in the final image.
FROM ${NODE_IMAGE} AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
# The SDK's native core ships for five platforms; Linux images need only the Linux ones (about 80 MB less).
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force && \
    find node_modules/@temporalio/core-bridge/releases -mindepth 1 -maxdepth 1 ! -name '*-linux-gnu' -exec rm -rf {} +

FROM ${NODE_IMAGE}
WORKDIR /app
# The heap cap: Node otherwise sizes its heap from the machine, not the container, and grows it lazily (a worker
# reached 1.9 GB RSS on a 100,000-item batch; with 256 MB a 20,000-item batch at concurrency 200 peaked at 494 MB RSS).
# 512 MB leaves room for 500 calls in flight; give the container about 1 GB. `fanout worker` re-launches itself with it
# and sizes its workflow thread's heap for the workflow cache (FANOUT_MAX_CACHED_WORKFLOWS, 2,500: about 0.1 MB a cached
# agent); a heap limit in NODE_OPTIONS instead would hold the workflow thread to it too, whatever the cache.
ENV NODE_ENV=production \
    FANOUT_WORKER_HEAP_MB=512 \
    FANOUT_HEALTH_PORT=8081
COPY --from=dependencies /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
USER node
EXPOSE 8081
# Healthy while the worker polls; unhealthy while it drains on SIGTERM or has lost its state.
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.FANOUT_HEALTH_PORT}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# PID 1 is the launcher of the capped worker: it passes SIGTERM on, which starts the worker's graceful shutdown, and exits
# as the worker does.
CMD ["node", "dist/cli/main.js", "worker"]
