# The fan-out worker (and the simulator, with another command) as one image.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build && npm prune --omit=dev
ENV NODE_ENV=production
USER node
CMD ["node", "dist/cli/main.js", "worker"]
