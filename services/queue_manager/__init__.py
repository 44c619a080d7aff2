"""The queue manager: the only writer of admission decisions.

It folds configuration, capacity and usage (compacted topics, followed), intents and run events
(consumer group ``muster-queue-manager``) into ``QueueState`` and runs ``services.core.schedule`` after
every change (debounced) and periodically. Its own durable state is ``muster.jobs`` (one record per
job, written before the decision it explains); a restart rebuilds from it before consuming again.

Rules worth knowing:

- a job id is submitted once; later ``SubmitJob`` messages with that id are ignored;
- events of any attempt other than the job's current one are stale and ignored;
- the dispatcher restarts a failed gang (up to ``spec.max_restarts``) and says when the budget is spent
  (``DispatchFailed(reason="restarts_exhausted")``, terminal); a ``RunFailed`` only updates the restart
  count shown, from the failed revision, so a failure reported twice counts once;
- without ``--pool`` one instance owns every pool; with it, the instance is the shard of those pools and
  ignores the queues and nodes of the others (``pools``).
"""
