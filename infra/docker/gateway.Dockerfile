# syntax=docker/dockerfile:1
# The Gantry gateway on Node (`gantry gateway`), with the web console and /docs. Build from
# the repository root:
#   docker build -f infra/docker/gateway.Dockerfile -t gantry-gateway .
#   docker run -p 8787:8787 -v gantry-data:/var/lib/gantry gantry-gateway

ARG NODE_IMAGE=node:20-slim

# Compilers for better-sqlite3's native module, and npm 11 for package.json's allowScripts
# (Node 20 ships npm 10). Both stages below that install packages start from here.
FROM ${NODE_IMAGE} AS toolchain
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/* \
 && npm install -g npm@11 --no-audit --no-fund

# Every dependency, devDependencies included: `npm ci` runs `prepare`, which builds dist/
# (the console with Vite, the SDK bundle). The sources it builds from come first.
FROM toolchain AS build
WORKDIR /opt/gantry
COPY package.json package-lock.json tsconfig.json ./
COPY scripts ./scripts
COPY client ./client
COPY console ./console
COPY shared ./shared
# The gateway runs no inference: never fetch onnxruntime's CUDA libraries here.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund \
 && test -f dist/web/console/index.html \
 && test -f dist/client.js

# Production dependencies only, with no lifecycle script (`prepare` needs the devDependencies
# left out here); then the native builds the gateway needs, run on purpose. In a stage of its
# own so that the compilers stay out of the image.
FROM toolchain AS deps
WORKDIR /opt/gantry
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3 esbuild \
 && npm cache clean --force

FROM ${NODE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o node -g node -m 0750 /var/lib/gantry
WORKDIR /opt/gantry
COPY --from=deps /opt/gantry/node_modules ./node_modules
COPY --from=build /opt/gantry/dist ./dist
COPY package.json tsconfig.json ./
COPY bin ./bin
COPY cli ./cli
COPY client ./client
COPY gateway ./gateway
COPY gpu-agent ./gpu-agent
COPY shared ./shared
RUN ln -s /opt/gantry/bin/gantry.js /usr/local/bin/gantry

# GANTRY_METRICS_HOST: a container's loopback is its own, so with GANTRY_METRICS_PORT set
# (-e GANTRY_METRICS_PORT=9464) Prometheus reaches /metrics on the container's address.
ENV NODE_ENV=production \
    GANTRY_HOST=0.0.0.0 \
    PORT=8787 \
    GANTRY_METRICS_HOST=0.0.0.0 \
    GANTRY_DATA_DIR=/var/lib/gantry
VOLUME ["/var/lib/gantry"]
EXPOSE 8787
# The official image's unprivileged user (uid 1000).
USER node
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "gantry"]
CMD ["gateway"]
