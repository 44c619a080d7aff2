"""Muster's public Python package: ``muster.client``, the typed client of the gateway's API and the Kafka
submitter for pipelines that produce onto ``muster.intents.v1``."""
