"""The queue manager: the only writer of admission decisions.

It folds configuration, capacity and usage (compacted topics, followed), intents and run events
(consumer group ``muster-queue-manager``) into ``QueueState`` and runs ``services.core.schedule`` after
every change (debounced) and periodically. Its own durable state is ``muster.jobs`` (one record per
job, written before the decision it explains); a restart rebuilds from it before consuming again.

Rules worth knowing:

- a job id is submitted once; later ``SubmitJob`` messages with that id are ignored;
- events of any attempt other than the job's current one are stale and ignored;
- each ``RunFailed`` counts one whole-gang restart (done by the dispatcher); the failure arriving when
  ``restarts == spec.max_restarts`` is terminal;
- one instance owns every pool: sharding by pool (``--pool``) is refused until it exists.
"""
