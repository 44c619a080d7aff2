# One image for every Muster service; the command picks the service (`serve gateway`, `topics create`, ...).
# Build stage: install the package and its dependencies into a virtualenv.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/muster
WORKDIR /src
COPY pyproject.toml README.md ./
COPY muster ./muster
COPY schemas ./schemas
COPY services ./services
RUN /opt/muster/bin/pip install . && /opt/muster/bin/python -m compileall -q /opt/muster

# Runtime stage: the virtualenv only, no build tools or sources, run as an unprivileged user.
# Works with a read-only root filesystem: nothing is written outside /tmp.
FROM python:3.11-slim
RUN groupadd --gid 10001 muster \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin muster
COPY --from=build /opt/muster /opt/muster
ENV PATH=/opt/muster/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
WORKDIR /tmp
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["muster"]
CMD ["--help"]
