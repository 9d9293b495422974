"""Jobs, and later sensors and schedules, that run the lineage."""
