# zkcompat as a drop-in for the official `zookeeper` image: the same ZOO_* variables,
# volumes, ports and user; zoo.cfg and myid written on first start (zkcompat.cli.container).
#   docker build -t zkcompat .
#   docker build --build-arg BASE_IMAGE=my-registry/python:3.11-slim -t zkcompat .
#   scripts/build-image       podman, with a Debian base made locally (no registry needed)
# A base that already has zkcompat's dependencies: --build-arg INSTALL_DEPENDENCIES=no.
# Every step runs Python in exec form, so the base needs Python 3.11+ and nothing else.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG INSTALL_DEPENDENCIES=yes

ENV ZOO_CONF_DIR=/conf \
    ZOO_DATA_DIR=/data \
    ZOO_DATA_LOG_DIR=/datalog \
    ZOO_LOG_DIR=/logs \
    ZOO_TICK_TIME=2000 \
    ZOO_INIT_LIMIT=5 \
    ZOO_SYNC_LIMIT=2 \
    ZOO_AUTOPURGE_PURGEINTERVAL=0 \
    ZOO_AUTOPURGE_SNAPRETAINCOUNT=3 \
    ZOO_MAX_CLIENT_CNXNS=60 \
    ZOO_STANDALONE_ENABLED=true \
    ZOO_ADMINSERVER_ENABLED=true \
    PYTHONPATH=/opt/zkcompat \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

COPY setup.cfg pyproject.toml README.md /opt/zkcompat/
COPY docker/prepare_image.py /opt/zkcompat/docker/
COPY zkcompat /opt/zkcompat/zkcompat
RUN ["python", "/opt/zkcompat/docker/prepare_image.py"]

USER 1000:1000
WORKDIR /data
VOLUME ["/data", "/datalog", "/logs"]
EXPOSE 2181 2888 3888 8080

# Python as PID 1 ignores SIGTERM, for which zkcompat installs no handler (the kernel drops
# a signal PID 1 has not claimed), so `docker stop` waited out its timeout and killed it.
# SIGINT has Python's own handler: `zkcompat serve` stops cleanly on KeyboardInterrupt.
STOPSIGNAL SIGINT
# Healthy while the server runs, serving or waiting for a quorum (ruok answers imok either
# way, as ZooKeeper's does), so a member started before its peers is not reported unhealthy.
HEALTHCHECK --interval=10s --timeout=6s --start-period=5s --retries=3 \
    CMD ["python", "-m", "zkcompat.cli.container", "ruok"]
ENTRYPOINT ["python", "-m", "zkcompat.cli.container", "entrypoint"]
CMD ["python", "-m", "zkcompat", "serve", "--config", "/conf/zoo.cfg"]
