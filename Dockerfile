# One image for every Muster service; the command picks the service.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY services ./services
RUN pip install --no-cache-dir . && useradd --uid 10001 --create-home muster
USER 10001
ENTRYPOINT ["muster"]
CMD ["--help"]
