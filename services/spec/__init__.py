"""Reading the human-written documents (cluster file, job spec) into wire and core types."""
