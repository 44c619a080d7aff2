"""Muster inside other tools: ``muster.integrations.airflow`` (Apache Airflow's provider, ``muster[airflow]``)."""
